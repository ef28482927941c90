package storesqlite

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// TestReadPoolUnderMoreReadersThanConnections: 32 goroutines, eight times
// the read pool's connections, read at once through prepared statements and
// read transactions (JobEventList holds its connection while it reads), from
// a cold cache: every read answers, none waits on another for good (a
// transaction that prepared while holding its connection, or a prepare
// under the cache's lock, would), and each query is kept once.
func TestReadPoolUnderMoreReadersThanConnections(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	id := uuid.NewString()
	_, err = s.JobSubmit(t.Context(), &store.JobSubmitParams{
		ID: id, Tenant: "acme", Method: "/m", IdempotencyKey: "k", Fingerprint: "fp", DedupKey: "d",
		Pipeline: "p", PipelineVersion: 1, PromptVersion: "1", ModelProfile: "default",
		Document: []byte("doc"), DocumentSHA256: "sha", DocumentMedia: "text/plain", Params: []byte(`{}`),
	})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 32*20)
	for range 32 {
		wg.Go(func() {
			for range 10 {
				evs, err := s.JobEventList(ctx, &store.JobEventListParams{Tenant: "acme", JobID: id})
				if err == nil && len(evs) != 1 {
					t.Errorf("events: %d, want 1", len(evs))
				}
				errs <- err
				job, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "acme", ID: id})
				if err == nil && job.ID != id {
					t.Errorf("job %s, want %s", job.ID, id)
				}
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s.read.mu.Lock()
	prepared := len(s.read.stmts)
	s.read.mu.Unlock()
	// JobEventList's page query (its "does the job exist" query runs only
	// for an empty page) and JobGetByID's query, each kept once.
	require.Equal(t, 2, prepared)
}
