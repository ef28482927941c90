package storepg_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestRunCancelRunsAgainAfterADeadlock: RunCancelJobs locks a run's jobs in
// its join's order, which a worker's checkpoint batch (job rows locked
// across its statements) can cross. Here a transaction holds the job the
// cancel reaches second, waits until the cancel holds the first, then
// locks that one too: Postgres aborts the cancel, which waited first, to
// break the deadlock, and RunCancel runs again and cancels both jobs.
//
// Postgres looks for a deadlock once a waiter has waited deadlock_timeout
// (1 s): when the test's lock comes later than that (a loaded machine),
// the cancel's look found nothing and the test's transaction is the one
// aborted. Such a try made no deadlock of the cancel's, and the test tries
// again, up to ten runs.
func TestRunCancelRunsAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	s := storepgtest.NewTestStore(t)
	cancelAborted := 0
	for try := 0; try < 10 && cancelAborted == 0; try++ {
		jobs := runOfTwo(t, s)
		// The order the cancel takes is its plan's: hold each in turn.
		if crossCancel(t, s, jobs, jobs[try%2], jobs[1-try%2]) {
			cancelAborted++
		}
	}
	require.Positive(t, cancelAborted, "no try made the deadlock")
}

// crossCancel holds job held, cancels the run of jobs, and when the cancel
// holds other, locks it too: whether Postgres aborted the cancel for it.
// The cancel must succeed whichever way.
func crossCancel(t *testing.T, s *storepg.Store, jobs [3]string, held, other string) (cancelAborted bool) {
	t.Helper()
	ctx := t.Context()
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }() // a no-op after Commit
	require.NoError(t, lockJob(ctx, tx, held))
	done := make(chan error, 1)
	var res *store.RunOperationResult
	go func() {
		var err error
		res, err = s.RunCancel(context.Background(), &store.RunCancelParams{Tenant: "acme", RunID: jobs[2]})
		done <- err
	}()
	waitBlockedBy(t, s, tx.Conn().PgConn().PID())
	if tryLock(t, s, other) { // the cancel holds other and waits on held
		err := lockJob(ctx, tx, other) // returns once Postgres broke the deadlock
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			require.NoError(t, tx.Rollback(ctx)) // this transaction was the one aborted
		} else {
			require.NoError(t, err)
			cancelAborted = true
		}
	}
	if !cancelAborted {
		_ = tx.Rollback(ctx)
	} else {
		require.NoError(t, tx.Commit(ctx))
	}
	select {
	case err := <-done:
		require.NoError(t, err, "the cancel Postgres aborted to break the deadlock runs again")
	case <-time.After(30 * time.Second):
		t.Fatal("RunCancel did not return")
	}
	require.Equal(t, 2, res.Count)
	return cancelAborted
}

// runOfTwo creates a run of two queued jobs: their ids, then the run's.
func runOfTwo(t *testing.T, s *storepg.Store) [3]string {
	t.Helper()
	ctx := t.Context()
	created, err := s.RunCreate(ctx, &store.RunCreateParams{
		ID: uuid.NewString(), Tenant: "acme", IdempotencyKey: "run-" + uuid.NewString(), Fingerprint: "fp",
		Name: "r", Pipeline: "invoice", ModelProfile: "fast", Params: []byte(`{}`),
	})
	require.NoError(t, err)
	var params []*store.JobSubmitParams
	for range 2 {
		key := uuid.NewString()
		doc := []byte("invoice " + key)
		sum := sha256.Sum256(doc)
		params = append(params, &store.JobSubmitParams{
			ID: uuid.NewString(), Tenant: "acme", Method: "/oncejob.v1.RunService/SubmitRunItems",
			IdempotencyKey: "key-" + key, Fingerprint: "fp-" + key, DedupKey: "dedup:v1:" + key,
			Pipeline: "invoice", PipelineVersion: 1, PromptVersion: "1", ModelProfile: "fast",
			Document: doc, DocumentSHA256: hex.EncodeToString(sum[:]), DocumentMedia: "text/plain",
			Params: []byte(`{}`), RunID: created.Run.ID,
		})
	}
	res, err := s.JobSubmitMany(ctx, &store.JobSubmitManyParams{Jobs: params})
	require.NoError(t, err)
	var out [3]string
	for i, item := range res.Items {
		require.NoError(t, item.Err)
		out[i] = item.Job.ID
	}
	out[2] = created.Run.ID
	return out
}

// lockJob locks job id's row in tx, waiting for it.
func lockJob(ctx context.Context, tx pgx.Tx, id string) error {
	_, err := tx.Exec(ctx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", id)
	return err
}

// tryLock reports whether another transaction holds job id's row.
func tryLock(t *testing.T, s *storepg.Store, id string) bool {
	t.Helper()
	tx, err := s.Pool().Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE NOWAIT", id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return true
	}
	require.NoError(t, err)
	return false
}

// waitBlockedBy waits until a statement waits on a lock that backend pid
// holds: the cancel, since this test's transaction blocks nothing else.
func waitBlockedBy(t *testing.T, s *storepg.Store, pid uint32) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE $1::int = ANY(pg_blocking_pids(pid))`, int(pid)).Scan(&n)
		require.NoError(t, err)
		return n > 0
	}, 30*time.Second, 5*time.Millisecond, "the cancel never waited on the held job")
}
