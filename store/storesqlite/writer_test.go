package storesqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// How long a test waits for the writer's queue to fill, and how often it
// looks: the queue is in-process state no signal reports.
const (
	testWait = 10 * time.Second
	testTick = time.Millisecond
)

// TestWriterCommitsWhatIsQueuedInOneTransaction holds the writer with one
// write, queues more behind it (some of which fail after writing, one whose
// caller gives up), and checks that the queued writes commit in one
// transaction, that a failing write leaves nothing and fails nobody else,
// and that every caller is answered only once its write is readable, i.e.
// committed.
func TestWriterCommitsWhatIsQueuedInOneTransaction(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx := t.Context()

	insertKey := func(ctx context.Context, tx *writeTx, key string) error {
		n, err := s.q.IdempotencyKeyInsert(ctx, tx, dbsqlite.IdempotencyKeyInsertParams{
			Tenant: "t", Method: "m", IdemKey: key, Fingerprint: "fp", JobID: key, CreatedAt: 1,
		})
		if err == nil && n != 1 {
			err = fmt.Errorf("inserted %d rows", n)
		}
		return err
	}
	committed := func(key string) bool {
		_, err := s.q.IdempotencyKeyGet(ctx, s.read, dbsqlite.IdempotencyKeyGetParams{Tenant: "t", Method: "m", IdemKey: key})
		if errors.Is(err, sql.ErrNoRows) {
			return false
		}
		require.NoError(t, err)
		return true
	}

	// The holder runs alone and waits, so everything below queues.
	release := make(chan struct{})
	running := make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, _ int64) error {
			close(running)
			<-release
			return insertKey(ctx, tx, "holder")
		})
	}()
	<-running
	before := s.writer.commits.Load()

	const writes = 40
	failed := errors.New("this write fails after writing")
	errs := make([]error, writes)
	visibleWhenAnswered := make([]bool, writes)
	var wg sync.WaitGroup
	for i := range writes {
		key := fmt.Sprintf("key-%d", i)
		wg.Go(func() {
			errs[i] = s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, _ int64) error {
				if err := insertKey(ctx, tx, key); err != nil {
					return err
				}
				if i%5 == 0 {
					return failed
				}
				return nil
			})
			visibleWhenAnswered[i] = committed(key)
		})
	}
	// A caller that gives up while its write is queued: it never runs.
	gone, giveUp := context.WithCancel(ctx)
	withdrawn := make(chan error, 1)
	go func() {
		withdrawn <- s.inWriteTx(gone, func(ctx context.Context, tx *writeTx, _ int64) error {
			return insertKey(ctx, tx, "withdrawn")
		})
	}()
	require.Eventually(t, func() bool { return len(s.writer.ops) == writes+1 }, testWait, testTick)
	giveUp()
	require.ErrorIs(t, <-withdrawn, context.Canceled)

	close(release)
	require.NoError(t, <-holder)
	wg.Wait()

	require.Equal(t, before+2, s.writer.commits.Load(), "the holder's transaction, then one for every queued write")
	for i := range writes {
		if i%5 == 0 {
			require.ErrorIs(t, errs[i], failed)
			require.False(t, visibleWhenAnswered[i], "write %d failed but its row is there", i)
			continue
		}
		require.NoError(t, errs[i])
		require.True(t, visibleWhenAnswered[i], "write %d answered before its commit", i)
	}
	require.True(t, committed("holder"))
	require.False(t, committed("withdrawn"))
}

// TestWriterAnswersAPanickingWriteAlone checks that a write that panics
// fails alone and the writer goes on.
func TestWriterAnswersAPanickingWriteAlone(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(s.Close)

	err = s.inWriteTx(t.Context(), func(context.Context, *writeTx, int64) error { panic("boom") })
	require.ErrorContains(t, err, "boom")
	_, err = s.JobSubmit(t.Context(), &store.JobSubmitParams{
		ID: "0190d2a4-9a9c-7c3e-8a55-6a1f1f1f1f1f", Tenant: "t", Method: "m", IdempotencyKey: "k",
		Fingerprint: "fp", DedupKey: "d", Pipeline: "p", Document: []byte("doc"), DocumentSHA256: "sha",
		DocumentMedia: "text/plain",
	})
	require.NoError(t, err)
}

// TestWriterPreparesEachStatementOnce checks that the writer's statements
// are prepared on its connection once and reused by later transactions.
func TestWriterPreparesEachStatementOnce(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(s.Close)

	params := func(key string) *store.JobSubmitParams {
		return &store.JobSubmitParams{
			ID: uuid.NewString(), Tenant: "t", Method: "m", IdempotencyKey: key,
			Fingerprint: "fp", DedupKey: "d-" + key, Pipeline: "p", Document: []byte(key), DocumentSHA256: "sha-" + key,
			DocumentMedia: "text/plain",
		}
	}
	_, err = s.JobSubmit(t.Context(), params("first"))
	require.NoError(t, err)
	// The writer prepares what the transaction met once it has ended; the
	// next write runs after that.
	_, err = s.JobSubmit(t.Context(), params("second"))
	require.NoError(t, err)
	prepared := s.writer.stmts.prepared
	require.NotEmpty(t, prepared)
	before := make(map[string]*sql.Stmt, len(prepared))
	maps.Copy(before, prepared)

	_, err = s.JobSubmit(t.Context(), params("third"))
	require.NoError(t, err)
	require.Equal(t, before, s.writer.stmts.prepared, "no statement prepared again")
}

// TestWriterConnectionSettings: the write connection commits durably
// (synchronous=FULL, 2) and keeps its statement journal in memory
// (temp_store=MEMORY, 2), as storesqlite.go's writeParams say and
// docs/performance.md measured.
func TestWriterConnectionSettings(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	got := map[string]int{}
	require.NoError(t, s.writer.write(t.Context(), func(ctx context.Context, tx *writeTx, _ int64) error {
		for _, pragma := range []string{"synchronous", "temp_store"} {
			var v int
			if err := tx.tx.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&v); err != nil {
				return err
			}
			got[pragma] = v
		}
		return nil
	}))
	require.Equal(t, map[string]int{"synchronous": 2, "temp_store": 2}, got)
}
