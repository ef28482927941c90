package llm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
)

// clock is a stopped clock the simulator's batches age by.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type batchBundle struct {
	sim    *llmsim.Running
	client *llm.OpenAIClient
	clock  *clock
	since  time.Time
}

func setupBatch(t *testing.T, delay time.Duration, faults llmsim.Faults) *batchBundle {
	t.Helper()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	sim, err := llmsim.Start("", llmsim.Config{BatchDelay: delay, Now: c.Now, Faults: faults})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	client := newClient(t, llm.Config{BaseURL: sim.URL, Timeout: 5 * time.Second, Batches: true})
	return &batchBundle{sim: sim, client: client, clock: c, since: c.Now().Add(-time.Minute)}
}

func batchCalls(prefix string, n int) []*llm.Request {
	calls := make([]*llm.Request, n)
	for i := range calls {
		calls[i] = request(fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("Document %d of %s.\n\nIts words are %d and %d.", i, prefix, i*7, i*13))
	}
	return calls
}

func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed))
}

// resultsByKey fails the test on a custom_id answered twice.
func resultsByKey(t *testing.T, rs []llm.BatchResult) map[string]llm.BatchResult {
	t.Helper()
	out := map[string]llm.BatchResult{}
	for _, r := range rs {
		_, dup := out[r.CustomID]
		require.False(t, dup, "custom_id %s answered twice", r.CustomID)
		out[r.CustomID] = r
	}
	return out
}

func TestBatchLifecycleAnswersAsOnline(t *testing.T) {
	t.Parallel()
	rng := seeded(t)
	for _, n := range []int{1, 2 + rng.IntN(80)} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			b := setupBatch(t, 10*time.Second, llmsim.Faults{})
			calls := batchCalls("life", n)
			batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-life", b.since, calls, map[string]string{"run": "r1"}, llm.EnsureHooks{})
			require.NoError(t, err)
			require.Equal(t, llm.BatchValidating, batch.Status)
			require.Equal(t, map[string]string{llm.TagKey: "tag-life", "run": "r1"}, batch.Metadata)
			require.Equal(t, n, batch.Total)

			for _, step := range []struct {
				by     time.Duration
				status string
			}{{0, llm.BatchValidating}, {2 * time.Second, llm.BatchInProgress}, {7500 * time.Millisecond, llm.BatchFinalizing}, {500 * time.Millisecond, llm.BatchCompleted}} {
				b.clock.advance(step.by)
				got, err := b.client.GetBatch(t.Context(), batch.ID)
				require.NoError(t, err)
				require.Equal(t, step.status, got.Status)
				batch = got
			}
			require.True(t, batch.Finished())
			require.Equal(t, n, batch.Completed)
			require.Empty(t, batch.ErrorFileID)

			results, err := b.client.BatchResults(t.Context(), batch)
			require.NoError(t, err)
			byKey := resultsByKey(t, results)
			require.Len(t, byKey, n)

			// Each line's answer is the one an online call would get.
			online := setup(t, setupOpts{})
			for _, call := range calls {
				r := byKey[call.ProviderKey]
				require.Nil(t, r.Err)
				want, err := online.client.Generate(t.Context(), call)
				require.NoError(t, err)
				require.Equal(t, want.Content, r.Response.Content)
				require.Equal(t, want.PromptTokens, r.Response.PromptTokens)
				require.NotEmpty(t, r.Response.ProviderRequestID)
			}
			st := b.sim.Stats()
			require.EqualValues(t, n, st.BatchBilledCalls)
			require.Zero(t, st.BilledCalls, "batch lines are not online calls")
			require.EqualValues(t, 1, st.BatchesCreated)
			require.EqualValues(t, 1, st.FilesUploaded)

			// Reading the results again bills nothing.
			_, err = b.client.BatchResults(t.Context(), batch)
			require.NoError(t, err)
			require.EqualValues(t, n, b.sim.Stats().BatchBilledCalls)
		})
	}
}

// A crash at either point of EnsureBatch — after the upload, or after the
// create whose answer was lost — leaves one file and one batch, found again.
func TestEnsureBatchNeverCreatesTwice(t *testing.T) {
	t.Parallel()
	t.Run("stopped after upload", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, 0, llmsim.Faults{})
		calls := batchCalls("up", 5)
		ctx, cancel := context.WithCancel(t.Context())
		_, err := llm.EnsureBatch(ctx, b.client, "tag-up", b.since, calls, nil, llm.EnsureHooks{AfterUpload: cancel})
		require.ErrorIs(t, err, context.Canceled)
		require.EqualValues(t, 0, b.sim.Stats().BatchesCreated)

		for range 3 {
			batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-up", b.since, calls, nil, llm.EnsureHooks{})
			require.NoError(t, err)
			require.Equal(t, "tag-up", batch.Metadata[llm.TagKey])
		}
		st := b.sim.Stats()
		require.EqualValues(t, 1, st.FilesUploaded, "the file was found, not uploaded again")
		require.EqualValues(t, 1, st.BatchesCreated)
	})
	t.Run("answer to create lost", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, 0, llmsim.Faults{BatchCreateLost: &llmsim.Trigger{Count: 1}})
		calls := batchCalls("lost", 4)
		_, err := llm.EnsureBatch(t.Context(), b.client, "tag-lost", b.since, calls, nil, llm.EnsureHooks{})
		class, ok := llm.ClassOf(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, llm.ClassOutcomeUnknown, class)

		batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-lost", b.since, calls, nil, llm.EnsureHooks{})
		require.NoError(t, err)
		got, err := b.client.GetBatch(t.Context(), batch.ID)
		require.NoError(t, err)
		require.Equal(t, llm.BatchCompleted, got.Status)
		st := b.sim.Stats()
		require.EqualValues(t, 1, st.BatchesCreated)
		require.EqualValues(t, 4, st.BatchBilledCalls)
	})
	t.Run("other tags are not found", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, 0, llmsim.Faults{})
		first, err := llm.EnsureBatch(t.Context(), b.client, "tag-a", b.since, batchCalls("a", 2), nil, llm.EnsureHooks{})
		require.NoError(t, err)
		second, err := llm.EnsureBatch(t.Context(), b.client, "tag-b", b.since, batchCalls("b", 2), nil, llm.EnsureHooks{})
		require.NoError(t, err)
		require.NotEqual(t, first.ID, second.ID)
		// A lookup bounded by since after both finds neither.
		_, err = b.client.FindBatch(t.Context(), llm.TagKey, "tag-a", b.clock.Now().Add(time.Hour))
		require.ErrorIs(t, err, llm.ErrNotFound)
		require.EqualValues(t, 2, b.sim.Stats().BatchesCreated)
	})
}

// The lookup pages through the provider's list, newest first.
func TestFindBatchPages(t *testing.T) {
	t.Parallel()
	b := setupBatch(t, 0, llmsim.Faults{})
	const n = 130 // more than one page of 100
	var ids []string
	for i := range n {
		batch, err := llm.EnsureBatch(t.Context(), b.client, fmt.Sprintf("page-%d", i), b.since, batchCalls(fmt.Sprint("p", i), 1), nil, llm.EnsureHooks{})
		require.NoError(t, err)
		ids = append(ids, batch.ID)
	}
	for _, i := range []int{0, 29, 30, n - 1} {
		got, err := b.client.FindBatch(t.Context(), llm.TagKey, fmt.Sprintf("page-%d", i), b.since)
		require.NoError(t, err)
		require.Equal(t, ids[i], got.ID)
	}
	_, err := b.client.FindBatch(t.Context(), llm.TagKey, "page-none", b.since)
	require.ErrorIs(t, err, llm.ErrNotFound)
	require.EqualValues(t, n, b.sim.Stats().BatchesCreated)
}

func TestBatchFailedAndExpiredLines(t *testing.T) {
	t.Parallel()
	t.Run("a tenth of the lines fail", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, 0, llmsim.Faults{BatchLineFail: &llmsim.Trigger{Every: 10}})
		batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-fail", b.since, batchCalls("fail", 50), nil, llm.EnsureHooks{})
		require.NoError(t, err)
		batch, err = b.client.GetBatch(t.Context(), batch.ID)
		require.NoError(t, err)
		require.Equal(t, llm.BatchCompleted, batch.Status)
		require.Equal(t, 45, batch.Completed)
		require.Equal(t, 5, batch.Failed)
		results, err := b.client.BatchResults(t.Context(), batch)
		require.NoError(t, err)
		byKey := resultsByKey(t, results)
		require.Len(t, byKey, 50)
		failed := 0
		for _, r := range byKey {
			if r.Err != nil {
				failed++
				require.Nil(t, r.Response)
				require.Equal(t, llm.ClassUnavailable, r.Err.Class, "a 500 line is retried")
				require.Equal(t, http.StatusInternalServerError, r.Err.StatusCode)
				require.False(t, r.Expired)
			}
		}
		require.Equal(t, 5, failed)
		require.EqualValues(t, 45, b.sim.Stats().BatchBilledCalls, "failed lines are not billed")
	})
	t.Run("the batch expires", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, time.Minute, llmsim.Faults{BatchExpire: &llmsim.BatchExpire{Completed: 0.5}})
		batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-exp", b.since, batchCalls("exp", 10), nil, llm.EnsureHooks{})
		require.NoError(t, err)
		b.clock.advance(time.Minute)
		batch, err = b.client.GetBatch(t.Context(), batch.ID)
		require.NoError(t, err)
		require.Equal(t, llm.BatchExpired, batch.Status)
		require.True(t, batch.Finished())
		results, err := b.client.BatchResults(t.Context(), batch)
		require.NoError(t, err)
		byKey := resultsByKey(t, results)
		require.Len(t, byKey, 10)
		expired := 0
		for _, r := range byKey {
			if r.Expired {
				expired++
				require.Equal(t, llm.ClassUnavailable, r.Err.Class)
			} else {
				require.NotNil(t, r.Response)
			}
		}
		require.Equal(t, 5, expired)
		st := b.sim.Stats()
		require.EqualValues(t, 5, st.BatchBilledCalls)
		require.EqualValues(t, 1, st.BatchesExpired)
	})
	t.Run("an invalid line is not retryable", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, 0, llmsim.Faults{})
		calls := batchCalls("bad", 3)
		calls[1] = request("bad-1", "This one is "+llmsim.MarkerInvalidRequest)
		batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-bad", b.since, calls, nil, llm.EnsureHooks{})
		require.NoError(t, err)
		batch, err = b.client.GetBatch(t.Context(), batch.ID)
		require.NoError(t, err)
		results, err := b.client.BatchResults(t.Context(), batch)
		require.NoError(t, err)
		r := resultsByKey(t, results)["bad-1"]
		require.NotNil(t, r.Err)
		require.Equal(t, llm.ClassInvalidRequest, r.Err.Class)
	})
}

func TestCancelBatch(t *testing.T) {
	t.Parallel()
	b := setupBatch(t, time.Hour, llmsim.Faults{})
	batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-cancel", b.since, batchCalls("c", 7), nil, llm.EnsureHooks{})
	require.NoError(t, err)
	b.clock.advance(10 * time.Minute)
	got, err := b.client.CancelBatch(t.Context(), batch.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchCancelling, got.Status)
	b.clock.advance(2 * time.Hour)
	got, err = b.client.GetBatch(t.Context(), batch.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchCancelled, got.Status)
	again, err := b.client.CancelBatch(t.Context(), batch.ID)
	require.NoError(t, err, "cancelling twice is no error")
	require.Equal(t, llm.BatchCancelled, again.Status)
	st := b.sim.Stats()
	require.Zero(t, st.BatchBilledCalls, "a cancelled batch's lines are never billed")
	require.EqualValues(t, 1, st.BatchesCancelled)

	// A finished batch is answered as it is.
	done, err := llm.EnsureBatch(t.Context(), b.client, "tag-done", b.since, batchCalls("d", 2), nil, llm.EnsureHooks{})
	require.NoError(t, err)
	b.clock.advance(2 * time.Hour)
	got, err = b.client.CancelBatch(t.Context(), done.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchCompleted, got.Status)
	require.EqualValues(t, 2, b.sim.Stats().BatchBilledCalls)
}

func TestBatchValidationFailsTheBatch(t *testing.T) {
	t.Parallel()
	b := setupBatch(t, 0, llmsim.Faults{})
	mixed := batchCalls("mixed", 2)
	mixed[1].Model = "sim-2"
	batch, err := llm.EnsureBatch(t.Context(), b.client, "tag-mixed", b.since, mixed, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	batch, err = b.client.GetBatch(t.Context(), batch.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchFailed, batch.Status)
	require.NotEmpty(t, batch.Errors)
	require.Contains(t, batch.Errors[0], "line 2")

	// custom_id is the provider key: two calls with one key cannot share a batch.
	dup := batchCalls("dup", 2)
	dup[1].ProviderKey = dup[0].ProviderKey
	batch, err = llm.EnsureBatch(t.Context(), b.client, "tag-dup", b.since, dup, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	batch, err = b.client.GetBatch(t.Context(), batch.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchFailed, batch.Status)
	require.Contains(t, batch.Errors[0], "duplicate_custom_id")
	require.Zero(t, b.sim.Stats().BatchBilledCalls)

	// A call without a provider key never leaves the client.
	keyless := batchCalls("keyless", 1)
	keyless[0].ProviderKey = ""
	_, err = llm.EnsureBatch(t.Context(), b.client, "tag-keyless", b.since, keyless, nil, llm.EnsureHooks{})
	class, _ := llm.ClassOf(err)
	require.Equal(t, llm.ClassInvalidRequest, class)
	require.EqualValues(t, 2, b.sim.Stats().FilesUploaded)
}

func TestBatchUnsupportedIsRefused(t *testing.T) {
	t.Parallel()
	sim := setup(t, setupOpts{})
	_, err := llm.BatchesOf(sim.client) // Batches not set
	require.ErrorIs(t, err, llm.ErrBatchUnsupported)
	_, err = sim.client.GetBatch(t.Context(), "batch_x")
	require.ErrorIs(t, err, llm.ErrBatchUnsupported)
	_, err = llm.BatchesOf(onlineOnly{})
	require.ErrorIs(t, err, llm.ErrBatchUnsupported)

	// A server that says it has batches but has not answers 404: not retryable.
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	client := newClient(t, llm.Config{BaseURL: srv.URL + "/v1", Batches: true})
	bp, err := llm.BatchesOf(client)
	require.NoError(t, err)
	_, err = bp.FindBatch(t.Context(), llm.TagKey, "x", time.Time{})
	class, _ := llm.ClassOf(err)
	require.Equal(t, llm.ClassInvalidRequest, class)
	require.False(t, errors.Is(err, llm.ErrNotFound))
}

// onlineOnly is a Provider with no batch API.
type onlineOnly struct{}

func (onlineOnly) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, errors.New("unused")
}

func (onlineOnly) Lookup(context.Context, string) (*llm.Response, error) {
	return nil, llm.ErrLookupUnsupported
}

func (onlineOnly) CanLookup() bool { return false }

// A holder that stalls after its last check and before its create (a
// process stopped there sends the create late, whatever its deadline) is
// fenced at the provider: the taker, finding no batch of the tag, revokes
// it (deletes its input file) before it sends the calls again, so the late
// create is refused and every call goes in one batch.
func TestRevokedBatchRefusesLateCreate(t *testing.T) {
	t.Parallel()
	t.Run("create after the revoke", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, 0, llmsim.Faults{})
		calls := batchCalls("late", 4)
		// The holder's create is held back until the taker has looked,
		// revoked the tag and sent the calls in a batch of its own.
		var taken *llm.Batch
		stall := func(ctx context.Context) (context.Context, context.CancelFunc, error) {
			_, err := b.client.FindBatch(ctx, llm.TagKey, "tag-old", b.since)
			require.ErrorIs(t, err, llm.ErrNotFound)
			require.NoError(t, llm.RevokeBatch(ctx, b.client, "tag-old", b.since))
			_, err = b.client.FindBatch(ctx, llm.TagKey, "tag-old", b.since)
			require.ErrorIs(t, err, llm.ErrNotFound, "the second look is final")
			taken, err = llm.EnsureBatch(ctx, b.client, "tag-new", b.since, calls, nil, llm.EnsureHooks{})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(ctx)
			return ctx, cancel, nil
		}
		_, err := llm.EnsureBatch(t.Context(), b.client, "tag-old", b.since, calls, nil, llm.EnsureHooks{BeforeCreate: stall})
		require.ErrorIs(t, err, llm.ErrBatchRevoked)
		st := b.sim.Stats()
		require.EqualValues(t, 1, st.BatchesCreated, "the late create was refused")
		require.EqualValues(t, 1, st.FilesDeleted)
		require.Equal(t, "tag-new", taken.Metadata[llm.TagKey])
		// Revoking a tag with no file left is no error.
		require.NoError(t, llm.RevokeBatch(t.Context(), b.client, "tag-old", b.since))
	})
	t.Run("create before the revoke", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t, 0, llmsim.Faults{})
		calls := batchCalls("early", 3)
		sent, err := llm.EnsureBatch(t.Context(), b.client, "tag-early", b.since, calls, nil, llm.EnsureHooks{})
		require.NoError(t, err)
		// The taker's first look missed it; its revoke deletes the file,
		// and the batch keeps its lines.
		require.NoError(t, llm.RevokeBatch(t.Context(), b.client, "tag-early", b.since))
		found, err := b.client.FindBatch(t.Context(), llm.TagKey, "tag-early", b.since)
		require.NoError(t, err, "the second look finds the batch")
		require.Equal(t, sent.ID, found.ID)
		b.clock.advance(time.Second)
		done, err := b.client.GetBatch(t.Context(), sent.ID)
		require.NoError(t, err)
		require.Equal(t, llm.BatchCompleted, done.Status)
		results, err := b.client.BatchResults(t.Context(), done)
		require.NoError(t, err)
		require.Len(t, results, 3)
	})
}

// laggingDeletes is a provider whose file listing still shows a file after
// its delete succeeded (a listing that lags its deletes).
type laggingDeletes struct {
	llm.BatchProvider
	deletes int
}

func (l *laggingDeletes) DeleteBatchFile(context.Context, string) error {
	l.deletes++
	return nil
}

// TestRevokeBatchWithALaggingListing: a file deleted but still listed is
// deleted once, and the revoke ends rather than spinning on it.
func TestRevokeBatchWithALaggingListing(t *testing.T) {
	t.Parallel()
	b := setupBatch(t, 0, llmsim.Faults{})
	_, err := b.client.UploadBatchFile(t.Context(), "tag-lag.jsonl", batchCalls("lag", 2))
	require.NoError(t, err)
	lag := &laggingDeletes{BatchProvider: b.client}
	require.NoError(t, llm.RevokeBatch(t.Context(), lag, "tag-lag", b.since))
	require.Equal(t, 1, lag.deletes)
}

// lateCreate is a provider whose first create reaches it late: the call
// ends with a lost answer (ClassOutcomeUnknown: the client's deadline, a
// proxy's timeout) while the request is still on its way, and the test
// lands it afterwards with land.
type lateCreate struct {
	llm.BatchProvider
	mu      sync.Mutex
	pending *struct {
		fileID string
		md     map[string]string
	}
	held bool
}

func (l *lateCreate) CreateBatch(ctx context.Context, fileID string, md map[string]string) (*llm.Batch, error) {
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.pending = &struct {
			fileID string
			md     map[string]string
		}{fileID, md}
		l.mu.Unlock()
		return nil, &llm.Error{Class: llm.ClassOutcomeUnknown, Message: "the create's answer did not come in time", Err: context.DeadlineExceeded}
	}
	l.mu.Unlock()
	return l.BatchProvider.CreateBatch(ctx, fileID, md)
}

// land delivers the create held back.
func (l *lateCreate) land(ctx context.Context) (*llm.Batch, error) {
	return l.BatchProvider.CreateBatch(ctx, l.pending.fileID, l.pending.md)
}

// A create whose outcome is unknown may still be on its way and land
// after the next try has looked and created: EnsureBatch revokes the tag
// (deletes its input file) before it returns such an error, so the next
// try finds the batch if the create had landed, else creates from a new
// file, and the late create, naming the deleted file, is refused. Before,
// the next try found no batch, created one from the same file, and the
// late create made a second batch of the same calls: every line billed
// twice.
func TestEnsureBatchAfterAnUnknownCreateNeverCreatesTwice(t *testing.T) {
	t.Parallel()
	b := setupBatch(t, 0, llmsim.Faults{})
	calls := batchCalls("slow", 4)
	p := &lateCreate{BatchProvider: b.client}
	_, err := llm.EnsureBatch(t.Context(), p, "tag-slow", b.since, calls, nil, llm.EnsureHooks{})
	class, ok := llm.ClassOf(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, llm.ClassOutcomeUnknown, class, "retryable: the caller tries again")

	batch, err := llm.EnsureBatch(t.Context(), p, "tag-slow", b.since, calls, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	require.Equal(t, "tag-slow", batch.Metadata[llm.TagKey])
	_, err = p.land(t.Context())
	require.Error(t, err, "the late create names a deleted file")
	st := b.sim.Stats()
	require.EqualValues(t, 1, st.BatchesCreated, "one batch of the tag")
	b.clock.advance(time.Second)
	done, err := b.client.GetBatch(t.Context(), batch.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchCompleted, done.Status)
	require.EqualValues(t, 4, b.sim.Stats().BatchBilledCalls, "each call billed once")
}
