package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/worker"
)

// applyStallStore forces the interleaving of a slow process applying a
// batch's answer: attempt 1's heartbeats stop and its applying write
// waits until attempt 2 has claimed the job, so the write journals the
// answer (unfenced) and its checkpoint is fenced out; attempt 2 reads the
// journal only after that write.
type applyStallStore struct {
	worker.Store
	stalled atomic.Value // the job id whose attempt 1 stalls
	once    sync.Once
	written chan struct{}
	tenant  string
}

func (s *applyStallStore) JobHeartbeatMany(ctx context.Context, p *store.JobHeartbeatManyParams) (*store.JobHeartbeatManyResult, error) {
	stalled, _ := s.stalled.Load().(string)
	if stalled == "" {
		return s.Store.JobHeartbeatMany(ctx, p)
	}
	q := *p
	q.Leases = nil
	for _, l := range p.Leases {
		if l.JobID != stalled || l.Attempt > 1 { // the stalled attempt's lease is left to expire
			q.Leases = append(q.Leases, l)
		}
	}
	if len(q.Leases) == 0 {
		return &store.JobHeartbeatManyResult{}, nil
	}
	return s.Store.JobHeartbeatMany(ctx, &q)
}

func (s *applyStallStore) CheckpointWriteMany(ctx context.Context, p *store.CheckpointWriteManyParams) error {
	a := p.Attempt
	if a == nil || a.JobAttempt != 1 || a.Outcome != store.LLMOutcomeSucceeded || a.PriceClass != store.PriceClassBatch {
		return s.Store.CheckpointWriteMany(ctx, p)
	}
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.Store.CheckpointWriteMany(ctx, p)
	}
	s.stalled.Store(a.JobID)
	// Until attempt 2 took the job over; the bound only ends a test that
	// fails anyway, so it is long enough for a loaded machine.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		job, err := s.JobGetByID(context.WithoutCancel(ctx), &store.JobGetByIDParams{Tenant: s.tenant, ID: a.JobID})
		if err == nil && job.Attempt >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer close(s.written)
	return s.Store.CheckpointWriteMany(context.WithoutCancel(ctx), p)
}

func (s *applyStallStore) LLMAttemptList(ctx context.Context, p *store.LLMAttemptListParams) ([]*store.LLMAttempt, error) {
	if stalled, _ := s.stalled.Load().(string); stalled == p.JobID {
		select {
		case <-s.written:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.LLMAttemptList(ctx, p)
}

// TestBatchAnswerJournaledByALostAttemptIsNotSentAgain: an attempt whose
// lease ran out while it applied its batch line journals the answer (the
// journal is unfenced) but not its checkpoint; the attempt that took the
// job over reads that journal row and must take the answer from the same
// batch, not collect the call into a new one: the provider bills every
// line of every batch, and a new group of other calls has another tag.
func TestBatchAnswerJournaledByALostAttemptIsNotSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	jobs := []*store.Job{
		submitTwin(t, b.store, reg, "Quarterly report. Revenue grew."),
		submitTwin(t, b.store, reg, "Annual report. Costs fell."),
	}
	st := &applyStallStore{Store: b.store, written: make(chan struct{}), tenant: jobs[0].Tenant}
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, Timeout: 10 * time.Second, Batches: true})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Store: st, Provider: provider, Pipelines: reg, Concurrency: 4,
		LeaseDuration: 2 * time.Second, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	billed := 0
	for _, job := range jobs {
		got := waitTerminal(t, b.store, job)
		require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
		attempts, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: job.ID})
		require.NoError(t, err)
		for _, a := range attempts {
			if a.Billed {
				billed++
			}
		}
	}
	stalled, _ := st.stalled.Load().(string)
	require.NotEmpty(t, stalled, "an attempt 1 applied a batch answer")
	got, err := b.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: jobs[0].Tenant, ID: stalled})
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Attempt, "attempt 2 took the stalled job over")
	stats := b.sim.Stats()
	require.EqualValues(t, 1, stats.BatchesCreated, "no call was sent in a second batch")
	require.EqualValues(t, 2, stats.BatchBilledCalls)
	require.Zero(t, stats.BilledCalls)
	require.Equal(t, 2, billed, "one bill per call in the journal")
}
