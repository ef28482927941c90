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
func TestRunCancelRunsAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	s := storepgtest.NewTestStore(t)
	ctx := t.Context()
	deadlocks := 0
	for try := range 4 { // the order the cancel takes is its plan's: try both
		jobs := runOfTwo(t, s)
		held, other := jobs[try%2], jobs[1-try%2]
		tx, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		lockJob(t, tx, held)
		done := make(chan error, 1)
		var res *store.RunOperationResult
		go func() {
			var err error
			res, err = s.RunCancel(context.Background(), &store.RunCancelParams{Tenant: "acme", RunID: jobs[2]})
			done <- err
		}()
		waitLockWait(t, s, "RunCancelJobs")
		if otherHeld := tryLock(t, s, other); otherHeld {
			deadlocks++
			lockJob(t, tx, other) // returns once Postgres aborted the cancel
		}
		require.NoError(t, tx.Commit(ctx))
		select {
		case err := <-done:
			require.NoError(t, err, "the cancel Postgres aborted to break the deadlock runs again")
		case <-time.After(30 * time.Second):
			t.Fatal("RunCancel did not return")
		}
		require.Equal(t, 2, res.Count)
	}
	require.Positive(t, deadlocks, "no try made the deadlock")
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
func lockJob(t *testing.T, tx pgx.Tx, id string) {
	t.Helper()
	_, err := tx.Exec(t.Context(), "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", id)
	require.NoError(t, err)
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

// waitLockWait waits until a statement named name waits on a lock.
func waitLockWait(t *testing.T, s *storepg.Store, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '-- name: ' || $1::text || ' %'`, name).Scan(&n)
		require.NoError(t, err)
		return n > 0
	}, 30*time.Second, 5*time.Millisecond, "%s never waited on a lock", name)
}
