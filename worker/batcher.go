package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// The batcher sends the calls of profiles with a provider_batch through the
// provider's batch API (docs/architecture.md, "Provider batches"). Calls of
// one model are collected into a group until it holds MaxCalls or Linger
// has passed since its first call. A closed group is named by a tag, the
// hash of its provider keys and their jobs' attempts, and every member
// journals an intent row (outcome_unknown, "provider batch <tag>"), fenced
// by its lease, before anything reaches the provider: so a member taken
// over after a crash knows which batch its call went into and waits for
// that batch (found by its tag) instead of sending the call again. A tag
// whose batch the provider does not hold was never created: its calls are
// collected again. A call sent again after its line failed or expired is
// in a later attempt, so in a batch of another name: never the old line
// read back.

// intentPrefix starts the error text of an intent row.
const intentPrefix = store.BatchIntentPrefix

// errBatchVoid: the tag an intent row names has no batch at the provider.
var errBatchVoid = errors.New("the provider holds no batch of this tag")

// errBatchFenced: a member's job was taken over before the create, so the
// batch is not created (the taker may collect the call again).
var errBatchFenced = errors.New("provider batch not created: a member's job was taken over before the create")

// batchVoidGrace is how long a later attempt waits before it takes a tag
// with no batch at the provider for one never created: a create the
// earlier attempt sent before its leases ended may still be on its way.
const batchVoidGrace = 5 * time.Second

// batchSince bounds the provider lookups of a resumed tag: no batch is
// older than its 24 h window plus a margin.
const batchSince = 48 * time.Hour

type batcher struct {
	w   *Worker
	bp  llm.BatchProvider
	log *slog.Logger
	ctx context.Context // the worker's: groups end with it

	mu    sync.Mutex
	open  map[string]*batchGroup // collecting, by model
	byTag map[string]*batchGroup // sent or resumed, by tag
}

// batchGroup is one batch of calls, collecting or sent.
type batchGroup struct {
	b       *batcher
	tag     string
	adopt   string // the provider's id of a batch adopted by the sweep
	cfg     pipeline.ProviderBatch
	members []*batchMember
	sent    []store.Lease // the leases of the members whose calls are sent
	bytes   int64         // of the members' lines in the input file
	full    chan struct{} // closed when MaxCalls joined or MaxBytes reached

	// After the batch finished: its results, by provider key.
	done    chan struct{}
	results map[string]llm.BatchResult
	err     error
	left    int             // members gone before the results
	cancels int             // of those, gone because their job was cancelled (one a call: a job may have several)
	gone    map[string]bool // the jobs of those cancels
	waiting int             // members waiting on it now
	leaving chan struct{}   // wakes the poller when a member leaves
}

type batchMember struct {
	req    *llm.Request
	intent store.LLMAttempt
	lease  store.Lease
	ctx    context.Context
}

// newBatcher returns the worker's batcher: an error when a configured
// profile has a provider_batch and the provider no batch API; nil when the
// provider has none, so a job of a batch twin (a provider_batch run's) is
// refused by this worker.
func newBatcher(w *Worker, ctx context.Context) (*batcher, error) {
	bp, err := llm.BatchesOf(w.cfg.Provider)
	if err != nil {
		if len(w.cfg.Pipelines.BatchProfiles()) == 0 {
			return nil, nil
		}
		return nil, err
	}
	b := &batcher{w: w, bp: bp, log: w.log, ctx: ctx, open: map[string]*batchGroup{}, byTag: map[string]*batchGroup{}}
	go b.sweep()
	return b, nil
}

// sweep follows, every ProviderBatchSweep, the batches whose record nobody
// touched for three of these: their follower is gone (a crash, a call
// that went elsewhere, a job cancelled) and the provider bills their lines
// all the same. Followed to their end, their bills are recorded, so a run
// shows every line the provider billed for it (RunBatch.BilledLines). A
// batch adopted so is cancelled, as any other, once the jobs of all its
// lines are cancelled (allCancelled); several processes may adopt one
// batch at once, which costs polls, not calls.
func (b *batcher) sweep() {
	every := b.w.cfg.ProviderBatchSweep
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(b.ctx, every)
		stale, err := b.w.cfg.Store.ProviderBatchListStale(ctx, &store.ProviderBatchListStaleParams{StaleBefore: time.Now().Add(-3 * every), Limit: 100})
		cancel()
		if err != nil {
			b.log.Warn("provider batches nobody follows: not listed", "error", err)
			continue
		}
		for _, pb := range stale {
			b.mu.Lock()
			if _, ok := b.byTag[pb.Tag]; ok {
				b.mu.Unlock()
				continue
			}
			g := &batchGroup{b: b, tag: pb.Tag, adopt: pb.BatchID, done: make(chan struct{}), leaving: make(chan struct{}, 1)}
			b.byTag[pb.Tag] = g
			b.mu.Unlock()
			b.log.Info("provider batch adopted: nobody followed it", "tag", pb.Tag, "batch", pb.BatchID, "status", pb.Status)
			go g.follow(nil)
		}
	}
}

// call answers req through a provider batch: the batch tag names, when an
// earlier attempt sent the call in one, or a new one. It returns the line's
// answer, or its classified failure.
func (b *batcher) call(ctx context.Context, lease store.Lease, req *llm.Request, intent store.LLMAttempt, cfg pipeline.ProviderBatch, tag string) (*llm.Response, error) {
	if tag != "" {
		// Looked up twice, batchVoidGrace apart: a create sent just
		// before the earlier attempt's deadline may not be visible yet.
		// The first look that finds no batch revokes the tag (deletes
		// its input file): a create reaching the provider after that is
		// refused, so the second look's answer is final.
		for look := range 2 {
			if look > 0 {
				select {
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				case <-time.After(batchVoidGrace):
				}
			}
			if resp, err := b.wait(ctx, b.resume(tag), lease.JobID, req.ProviderKey); !errors.Is(err, errBatchVoid) {
				return resp, err
			}
		}
		b.log.Info("provider batch was never created; collecting the call again", "tag", tag, "provider_key", req.ProviderKey)
	}
	return b.wait(ctx, b.join(ctx, lease, req, intent, cfg), lease.JobID, req.ProviderKey)
}

// join adds the call to the open group of its model, opening one if none,
// or if the call's line would take the open one past MaxBytes.
func (b *batcher) join(ctx context.Context, lease store.Lease, req *llm.Request, intent store.LLMAttempt, cfg pipeline.ProviderBatch) *batchGroup {
	size := llm.BatchLineBytes(req)
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.open[req.Model]
	if g != nil && g.bytes+size > g.cfg.MaxBytes {
		b.close(req.Model, g)
		g = nil
	}
	if g == nil {
		g = &batchGroup{b: b, cfg: cfg, full: make(chan struct{}), done: make(chan struct{}), leaving: make(chan struct{}, 1)}
		b.open[req.Model] = g
		go g.collect(req.Model)
	}
	g.members = append(g.members, &batchMember{req: req, intent: intent, lease: lease, ctx: ctx})
	g.bytes += size
	if len(g.members) == cfg.MaxCalls || g.bytes >= cfg.MaxBytes {
		b.close(req.Model, g)
	}
	return g
}

// close closes the open group g of model: it is sent at once. b.mu held.
func (b *batcher) close(model string, g *batchGroup) {
	delete(b.open, model)
	close(g.full)
}

// resume returns the group of tag, following its batch if no member of
// this process does yet.
func (b *batcher) resume(tag string) *batchGroup {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g, ok := b.byTag[tag]; ok {
		return g
	}
	g := &batchGroup{b: b, tag: tag, done: make(chan struct{}), leaving: make(chan struct{}, 1)}
	b.byTag[tag] = g
	go g.follow(nil)
	return g
}

// wait returns key's result in g, or leaves g when ctx ends first (a
// leave of job because it was cancelled counts toward cancelling g).
func (b *batcher) wait(ctx context.Context, g *batchGroup, job, key string) (*llm.Response, error) {
	b.mu.Lock()
	g.waiting++
	b.mu.Unlock()
	// waiting is decremented in each branch, not by a defer: a leaving
	// member must no longer count as waiting when it wakes the poller,
	// whose allCancelled reads it.
	select {
	case <-g.done:
		b.mu.Lock()
		g.waiting--
		b.mu.Unlock()
	case <-ctx.Done():
		b.mu.Lock()
		g.waiting--
		g.left++
		if errors.Is(context.Cause(ctx), errCancelRequested) {
			g.cancels++
			if g.gone == nil {
				g.gone = map[string]bool{}
			}
			g.gone[job] = true
		}
		b.mu.Unlock()
		select {
		case g.leaving <- struct{}{}:
		default:
		}
		return nil, context.Cause(ctx)
	}
	if g.err != nil {
		return nil, g.err
	}
	r, ok := g.results[key]
	switch {
	case !ok:
		return nil, &llm.Error{Class: llm.ClassUnavailable, Message: "provider batch " + g.tag + " has no result line for the call"}
	case r.Err != nil:
		return nil, r.Err
	}
	failpoint.Inject(failpoint.ProviderBatchApplying)
	return r.Response, nil
}

// collect closes the group when full or after the linger, and sends it.
func (g *batchGroup) collect(model string) {
	t := time.NewTimer(g.cfg.Linger)
	defer t.Stop()
	select {
	case <-g.full:
	case <-t.C:
	case <-g.b.ctx.Done():
	}
	b := g.b
	if b.ctx.Err() != nil { // shutting down: the calls go with the next process
		b.mu.Lock()
		if b.open[model] == g {
			delete(b.open, model)
		}
		b.mu.Unlock()
		g.finish(nil, context.Cause(b.ctx))
		return
	}
	b.mu.Lock()
	if b.open[model] == g {
		delete(b.open, model)
	}
	keys := make([]string, len(g.members))
	for i, m := range g.members {
		// The attempt names the batch too: a call whose line failed or
		// expired is retried by a later attempt, and a tag of its key
		// alone would find the old batch and read the failed line back.
		keys[i] = fmt.Sprintf("%s@%d", m.req.ProviderKey, m.intent.JobAttempt)
	}
	slices.Sort(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, "\n")))
	g.tag = "oncejob-" + hex.EncodeToString(sum[:16])
	b.byTag[g.tag] = g
	members := g.members
	b.mu.Unlock()

	calls := g.intents(members)
	if len(calls) == 0 {
		b.log.Info("provider batch not sent: no member still holds its job", "tag", g.tag, "members", len(members))
		g.finish(nil, errors.New("no call of the batch was journaled"))
		return
	}
	g.follow(calls)
}

// intents journals each member's intent, fenced by its lease (an attempt
// taken over writes nothing: its intent would name a batch that is never
// created after the taker's own), then checks that the member's job still
// holds its lease: a member gone, or whose job a later attempt took over
// (which may have read the journal before the intent), is not sent. A
// later attempt that reads the intent waits for this group (in this
// process, by tag) or finds its batch at the provider.
func (g *batchGroup) intents(members []*batchMember) []*llm.Request {
	b := g.b
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 30*time.Second)
	defer cancel()
	var journaled []*batchMember
	for _, m := range members {
		if m.ctx.Err() != nil {
			continue
		}
		m.intent.Outcome, m.intent.Error = store.LLMOutcomeOutcomeUnknown, intentPrefix+g.tag
		failpoint.Inject(failpoint.ProviderBatchIntent)
		if err := b.w.cfg.Store.LLMAttemptRecord(ctx, &store.LLMAttemptRecordParams{Attempt: m.intent, Fence: &m.lease}); err != nil {
			if errors.Is(err, store.ErrLeaseLost) {
				b.log.Info("provider batch: a member's job was taken over; its intent is not journaled, its call not sent", "tag", g.tag, "provider_key", m.req.ProviderKey)
			} else {
				b.log.Error("provider batch intent not journaled; the call is not sent", "error", err, "provider_key", m.req.ProviderKey)
			}
			continue
		}
		journaled = append(journaled, m)
	}
	if len(journaled) == 0 {
		return nil
	}
	leases := make([]store.Lease, len(journaled))
	for i, m := range journaled {
		leases[i] = m.lease
	}
	beat, err := b.w.cfg.Store.JobHeartbeatMany(ctx, &store.JobHeartbeatManyParams{Leases: leases, LeaseDuration: b.w.cfg.LeaseDuration})
	if err != nil {
		b.log.Error("provider batch: leases not confirmed; the calls are not sent", "error", err, "tag", g.tag)
		return nil
	}
	lost := map[store.Lease]bool{}
	for _, l := range beat.Lost {
		lost[l] = true
	}
	var calls []*llm.Request
	for _, m := range journaled {
		if !lost[m.lease] {
			calls = append(calls, m.req)
			g.sent = append(g.sent, m.lease)
		}
	}
	return calls
}

// fence confirms, just before the create, that every member sent still
// holds its job, and bounds the create by a deadline a quarter of a lease
// inside the leases it just renewed. A process that stalls past its leases
// (whose jobs another worker may take over, find no batch of the tag and
// collect again) so never creates the batch afterwards: its create is
// refused by the deadline, or by the fence on the next try. The deadline
// is the process's own clock: a process stopped after the last check and
// before the request leaves it sends the create late, whatever the
// deadline. That create is refused by the provider once the taker revoked
// the tag (deleted its input file) before its second look
// (docs/architecture.md, "Provider batches").
func (g *batchGroup) fence(ctx context.Context) (context.Context, context.CancelFunc, error) {
	lease := g.b.w.cfg.LeaseDuration
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, lease/4)
	beat, err := g.b.w.cfg.Store.JobHeartbeatMany(hctx, &store.JobHeartbeatManyParams{Leases: g.sent, LeaseDuration: lease})
	cancel()
	if err != nil {
		return nil, nil, &llm.Error{Class: llm.ClassUnavailable, Message: "provider batch: the leases were not confirmed before the create", Err: err}
	}
	if len(beat.Lost) > 0 {
		return nil, nil, errBatchFenced
	}
	failpoint.Inject(failpoint.ProviderBatchBeforeCreate)
	cctx, cancel := context.WithDeadline(ctx, start.Add(lease-lease/4))
	return cctx, cancel, nil
}

// follow makes sure the batch of g's tag exists (creating it from calls
// when given), polls it until it finishes and reads its results.
func (g *batchGroup) follow(calls []*llm.Request) {
	b, ctx := g.b, g.b.ctx
	var batch *llm.Batch
	var err error
	if g.adopt != "" {
		err = retryCall(ctx, func() error {
			batch, err = b.bp.GetBatch(ctx, g.adopt)
			return err
		})
	} else {
		batch, err = g.ensure(calls)
	}
	if err != nil {
		if !errors.Is(err, errBatchVoid) {
			b.log.Warn("provider batch not created", "tag", g.tag, "calls", len(calls), "error", err)
		}
		g.finish(nil, err)
		return
	}
	g.record(batch)
	n := len(calls)
	if calls == nil {
		// Resumed (after a restart, a takeover): the jobs of its lines
		// wait on it here one by one, as they are claimed again.
		n = batch.Total
		b.log.Info("provider batch resumed", "tag", g.tag, "batch", batch.ID, "status", batch.Status, "lines", batch.Total)
	}
	if batch, err = g.poll(batch, n); err != nil {
		g.finish(nil, err)
		return
	}
	var results []llm.BatchResult
	err = retryCall(ctx, func() error {
		var err error
		results, err = b.bp.BatchResults(ctx, batch)
		return err
	})
	if err != nil {
		g.finish(nil, err)
		return
	}
	byKey := make(map[string]llm.BatchResult, len(results))
	var billed []string
	for _, r := range results {
		byKey[r.CustomID] = r
		if r.Err == nil {
			billed = append(billed, r.CustomID)
		}
	}
	g.recordBills(billed)
	b.log.Info("provider batch finished", "tag", g.tag, "batch", batch.ID, "status", batch.Status, "completed", batch.Completed, "failed", batch.Failed)
	g.finish(byKey, nil)
}

// ensure finds the batch of g's tag or, given calls, creates it (fenced);
// without calls, a tag with no batch is revoked and errBatchVoid returned.
func (g *batchGroup) ensure(calls []*llm.Request) (*llm.Batch, error) {
	b, ctx := g.b, g.b.ctx
	var batch *llm.Batch
	err := retryCall(ctx, func() error {
		var err error
		if calls == nil {
			batch, err = b.bp.FindBatch(ctx, llm.TagKey, g.tag, time.Now().Add(-batchSince))
			if errors.Is(err, llm.ErrNotFound) {
				// No batch of the tag yet: its input file is deleted, so
				// that a create its holder sent too late (stalled past
				// its fence) is refused by the provider. One that landed
				// before is found by the next look.
				if err := llm.RevokeBatch(ctx, b.bp, g.tag, time.Now().Add(-batchSince)); err != nil {
					return err
				}
				return errBatchVoid
			}
			return err
		}
		batch, err = llm.EnsureBatch(ctx, b.bp, g.tag, time.Now().Add(-batchSince), calls, nil, llm.EnsureHooks{
			AfterUpload:  func() { failpoint.Inject(failpoint.ProviderBatchAfterUpload) },
			BeforeCreate: g.fence,
		})
		if errors.Is(err, llm.ErrBatchRevoked) {
			// A later attempt of a member's job revoked the tag: it
			// collects the call again.
			return fmt.Errorf("%w (refused by the provider: the tag was revoked)", errBatchFenced)
		}
		if err == nil {
			failpoint.Inject(failpoint.ProviderBatchAfterCreate)
			b.log.Info("provider batch sent", "tag", g.tag, "batch", batch.ID, "calls", len(calls))
		}
		return err
	})
	return batch, err
}

// poll follows the batch with backoff until it has finished, cancelling it
// at the provider when every one of its n calls' jobs was cancelled
// (allCancelled).
func (g *batchGroup) poll(batch *llm.Batch, n int) (*llm.Batch, error) {
	b, ctx := g.b, g.b.ctx
	touched := time.Now()
	for try := 1; !batch.Finished(); {
		if g.allCancelled(n) {
			if cancelled, err := b.bp.CancelBatch(ctx, batch.ID); err != nil {
				b.log.Error("cancel provider batch", "batch", batch.ID, "error", err)
			} else {
				g.record(cancelled)
				b.log.Info("provider batch cancelled: every job in it was cancelled", "batch", batch.ID)
			}
			b.w.signals.BatchCancelled.Signal(g.tag)
			return nil, errCancelRequested
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-g.leaving:
			continue
		case <-time.After(batchPollBackoff.Wait(try, retry.Jitter())):
			try++
		}
		next, err := b.bp.GetBatch(ctx, batch.ID)
		if err != nil {
			b.log.Warn("poll provider batch", "batch", batch.ID, "error", err)
			continue
		}
		if next.Status != batch.Status || time.Since(touched) >= b.w.cfg.ProviderBatchSweep {
			// Touched now and then: a record nobody touches is a batch
			// nobody follows, for the sweep.
			g.record(next)
			touched = time.Now()
		}
		batch = next
	}
	return batch, nil
}

// record keeps the batch's state for the runs whose calls it carries
// (the console shows it). Losing it loses a view,
// never a call: an error is only logged.
func (g *batchGroup) record(batch *llm.Batch) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.b.ctx), 10*time.Second)
	defer cancel()
	params := &store.ProviderBatchRecordParams{Tag: g.tag, BatchID: batch.ID, Status: batch.Status, CreatedAt: batch.CreatedAt}
	if params.CreatedAt.IsZero() {
		params.CreatedAt = time.Now()
	}
	if !batch.ExpiresAt.IsZero() {
		params.ExpiresAt = &batch.ExpiresAt
	}
	if err := g.b.w.cfg.Store.ProviderBatchRecord(ctx, params); err != nil {
		g.b.log.Warn("provider batch: its state not recorded", "batch", batch.ID, "status", batch.Status, "error", err)
	}
}

// recordBills keeps the lines the batch billed, by provider key, for the
// runs whose calls it carries: the provider's count beside the journal's,
// so that a call billed by two batches shows (RunBatch.BilledLines). Like
// record, a failure loses a view, never a call.
func (g *batchGroup) recordBills(keys []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.b.ctx), 10*time.Second)
	defer cancel()
	if err := g.b.w.cfg.Store.ProviderBatchBillsRecord(ctx, &store.ProviderBatchBillsRecordParams{Tag: g.tag, ProviderKeys: keys}); err != nil {
		g.b.log.Warn("provider batch: its bills not recorded", "tag", g.tag, "lines", len(keys), "error", err)
	}
}

// allCancelled reports whether the job of every line of the batch was
// cancelled: every one of its n calls (the calls this group sent, or,
// resumed, the batch's lines) left it here because its job was cancelled;
// or, when no member waits here any more, every job whose intent names
// the tag (store.ProviderBatchJobs, one read) is cancelled in the store or
// left here cancelled. The read counts the jobs cancelled before they
// waited here, or anywhere: those of a resumed batch cancelled while still
// queued after a restart never wait on it (docs/architecture.md,
// "Provider batches"). A job not cancelled, or a failed read, keeps the
// batch.
func (g *batchGroup) allCancelled(n int) bool {
	b := g.b
	b.mu.Lock()
	if n > 0 && g.cancels >= n {
		b.mu.Unlock()
		return true
	}
	if g.waiting > 0 { // a job waiting here is not cancelled
		b.mu.Unlock()
		return false
	}
	gone := maps.Clone(g.gone)
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	jobs, err := b.w.cfg.Store.ProviderBatchJobs(ctx, &store.ProviderBatchJobsParams{Tag: g.tag})
	if err != nil {
		if b.ctx.Err() == nil {
			b.log.Warn("provider batch: its jobs not read; it is not cancelled now", "tag", g.tag, "error", err)
		}
		b.w.signals.BatchJobsRead.Signal(BatchJobsReadSignal{Tag: g.tag, Err: err})
		return false
	}
	all := len(jobs) > 0
	for _, j := range jobs {
		if j.Status != store.JobStatusCancelled && !gone[j.JobID] {
			all = false
			break
		}
	}
	b.w.signals.BatchJobsRead.Signal(BatchJobsReadSignal{Tag: g.tag, Jobs: len(jobs), AllCancelled: all})
	return all
}

func (g *batchGroup) finish(results map[string]llm.BatchResult, err error) {
	g.results, g.err = results, err
	close(g.done)
	if errors.Is(err, errBatchVoid) {
		// Looked up again after the grace, by a new follower.
		g.b.mu.Lock()
		if g.b.byTag[g.tag] == g {
			delete(g.b.byTag, g.tag)
		}
		g.b.mu.Unlock()
		return
	}
	// Members resumed after this one finished find the results for a while.
	time.AfterFunc(10*time.Minute, func() {
		g.b.mu.Lock()
		defer g.b.mu.Unlock()
		if g.b.byTag[g.tag] == g {
			delete(g.b.byTag, g.tag)
		}
	})
}

// batchPollBackoff paces the polls of a provider batch.
var batchPollBackoff = retry.Backoff{Initial: 100 * time.Millisecond, Max: 30 * time.Second, Multiplier: 2}

// batchCallBackoff paces the retries of a batch API call.
var batchCallBackoff = retry.Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}

// retryCall runs fn until it succeeds, fails with a class that no retry
// helps, or ctx ends, waiting batchCallBackoff between tries.
func retryCall(ctx context.Context, fn func() error) error {
	for n := 1; ; n++ {
		err := fn()
		class, classified := llm.ClassOf(err)
		if err == nil || !classified || !llm.Retryable(class) {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(batchCallBackoff.Wait(n, retry.Jitter())):
		}
	}
}
