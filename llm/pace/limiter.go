package pace

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/store"
)

// Weights of the two classes in the fair queue: an interactive call goes
// before batch calls, 8 to 1, and batch calls still move.
const (
	interactiveWeight = 8
	batchWeight       = 1
	// maxAsk bounds the calls one draw asks for.
	maxAsk = 512
	// inFlightPoll is how often a limit bound by the calls in flight of
	// other processes looks again.
	inFlightPoll = 20 * time.Millisecond
)

type waiter struct {
	call    Call
	path    []fairKey
	tokens  int64
	bytes   int
	granted chan struct{}
	ticket  *Ticket
}

// limiter is one limit in this process: its fair queue, and the loop that
// draws for it from the store.
type limiter struct {
	p          *Pacer
	name       string
	configured Limit
	wake       chan struct{}

	mu    sync.Mutex
	queue *fairNode
	// What this process holds and owes the store.
	calls        int   // granted and not done
	sentCalls    int   // the count the store has of this process
	reserved     int64 // tokens of the calls in flight
	returnTokens int64 // to settle at the next draw
	pause        time.Time
	pausePending bool
	lastDraw     time.Time
	// What the store said last.
	sharedCalls   int
	nextAt        time.Time
	inFlightBound bool
	pausedUntil   time.Time
	// What the provider said.
	answered       bool    // any answer came
	usages         int     // answers whose usage taught tokens per call
	usedMean       float64 // tokens a call used, on average
	learnedReq     float64
	learnedTok     float64
	reqGuessed     bool // learnedReq is a whole bucket's limit per minute
	tokGuessed     bool
	reqCapacity    float64
	tokCapacity    float64
	tokensPerByte  float64
	completionMean float64
	latencyMean    float64 // seconds
	// shadowReq and shadowTok follow the buckets as this process's grants
	// fill them (the other processes' unseen), for estimates.
	shadowReq, shadowTok time.Time
	// deferredUntil holds the next tries handed to deferred calls that
	// have not come yet (a min-heap): a call deferred now comes back after
	// them, spaced at the rate the limit serves calls, so deferred calls
	// come back one after another, not all at once. A next try that passed
	// leaves it, so a call deferred again is not counted twice.
	deferredUntil timeHeap
	// Counters.
	granted, used, rateLimited, deferred int64
	byClassTenant                        map[string]int // waiting per class and tenant
	tenantsByClass                       [2]map[string]int
}

func newLimiter(p *Pacer, name string, configured Limit) *limiter {
	l := &limiter{
		p: p, name: name, configured: configured,
		wake:          make(chan struct{}, 1),
		queue:         newFairNode(1),
		tokensPerByte: 1.0 / 3, completionMean: 256,
		byClassTenant: map[string]int{},
	}
	l.tenantsByClass = [2]map[string]int{{}, {}}
	return l
}

func (l *limiter) lock()   { l.mu.Lock() }
func (l *limiter) unlock() { l.mu.Unlock() }

func (l *limiter) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// effective is the pace in force, per second, and the bursts.
type effective struct {
	reqRate, reqBurst, tokRate, tokBurst float64
	inFlight                             int
}

func (l *limiter) effective() effective {
	e := effective{reqRate: l.configured.RequestsPerMinute / 60, tokRate: l.configured.TokensPerMinute / 60, inFlight: l.configured.CallsInFlight}
	if l.learnedReq > 0 && (e.reqRate == 0 || l.learnedReq < e.reqRate) {
		e.reqRate = l.learnedReq
	}
	if l.learnedTok > 0 && (e.tokRate == 0 || l.learnedTok < e.tokRate) {
		e.tokRate = l.learnedTok
	}
	if !l.answered && e.reqRate == 0 && e.tokRate == 0 && e.inFlight == 0 {
		// Nothing known: one call goes first, and its answer's headers
		// set the pace.
		e.inFlight = 1
	}
	burst := BurstDefault.Seconds()
	e.reqBurst = max(1, e.reqRate*burst)
	if l.reqCapacity > 0 {
		e.reqBurst = max(1, min(e.reqBurst, l.reqCapacity/2))
	}
	e.tokBurst = max(1, e.tokRate*burst)
	if l.tokCapacity > 0 {
		e.tokBurst = max(1, min(e.tokBurst, l.tokCapacity/2))
	}
	return e
}

// estimate is a call's tokens before it is sent: its prompt's bytes at
// the tokens per byte the provider's usage has shown (a third of a token
// per byte until then, more than common tokenizers give), a margin, and
// its completion's cap (what completions used, half again, with no cap).
func (l *limiter) estimate(bytes, messages, maxTokens int) int64 {
	prompt := math.Ceil(float64(bytes)*l.tokensPerByte*1.1) + float64(4*messages)
	completion := float64(maxTokens)
	if maxTokens <= 0 {
		completion = math.Ceil(l.completionMean * 1.5)
	}
	return int64(prompt + completion)
}

func classOf(batch bool) int {
	if batch {
		return 1
	}
	return 0
}

func (l *limiter) wait(ctx context.Context, c Call) (*Ticket, error) {
	bytes := 0
	for _, m := range c.Messages {
		bytes += len(m.Content)
	}
	l.lock()
	now := time.Now()
	tokens := l.estimate(bytes, len(c.Messages), c.MaxTokens)
	est := l.estimateWait(c, tokens, now)
	// While the pace rests on guesses the call waits here (at most MaxWait
	// and a half) rather than be sent back as far as a guess would send
	// it: the first answers correct the guess within moments.
	if (est > l.p.cfg.MaxWait && !l.guessing(l.effective())) || (!c.Deadline.IsZero() && now.Add(est).After(c.Deadline)) {
		err := l.deferCall(now, est, tokens)
		l.unlock()
		return nil, err
	}
	class := classOf(c.Batch)
	tenantWeight := l.p.cfg.TenantWeights[c.Tenant]
	if tenantWeight == 0 {
		tenantWeight = 1
	}
	w := &waiter{
		call: c, tokens: tokens, bytes: bytes, granted: make(chan struct{}),
		path: []fairKey{
			{name: [2]string{"interactive", "batch"}[class], weight: [2]float64{interactiveWeight, batchWeight}[class]},
			{name: c.Tenant, weight: tenantWeight},
			{name: c.Group, weight: 1},
		},
	}
	l.queue.push(w.path, w)
	l.countWaiting(c, 1)
	l.unlock()
	l.signal()

	limit := l.p.cfg.MaxWait + l.p.cfg.MaxWait/2
	if !c.Deadline.IsZero() {
		limit = min(limit, time.Until(c.Deadline))
	}
	timer := time.NewTimer(max(limit, 0))
	defer timer.Stop()
	select {
	case <-w.granted:
		return w.ticket, nil
	case <-ctx.Done():
		if !l.giveUp(w) {
			w.ticket.Done(nil, nil) // granted as it gave up: never sent
		}
		return nil, context.Cause(ctx)
	case <-timer.C:
		if !l.giveUp(w) {
			return w.ticket, nil
		}
		// It waited longest of the calls still waiting (a FIFO within its
		// group), so it is at the head: the calls that gave up before it
		// are counted by deferCall, those still waiting come after it.
		l.lock()
		now := time.Now()
		err := l.deferCall(now, l.waitAt(l.effective(), 1, tokens, now), tokens)
		l.unlock()
		return nil, err
	}
}

// giveUp takes w out of the queue; false when it was granted meanwhile,
// in which case a cancelled caller's grant is given back.
func (l *limiter) giveUp(w *waiter) bool {
	l.lock()
	removed := l.queue.remove(w.path, w)
	if removed {
		l.countWaiting(w.call, -1)
	}
	l.unlock()
	if !removed {
		<-w.granted
	}
	return removed
}

func (l *limiter) countWaiting(c Call, d int) {
	class := classOf(c.Batch)
	key := string(rune('0'+class)) + c.Tenant
	l.byClassTenant[key] += d
	l.tenantsByClass[class][c.Tenant] += d
	if l.byClassTenant[key] == 0 {
		delete(l.byClassTenant, key)
		delete(l.tenantsByClass[class], c.Tenant)
	}
}

// estimateWait is how long a new call of tokens would wait: its place in
// the fair queue (round robin among the tenants of its class, an
// interactive call before batch ones) at the pace in force, after any
// pause. Zero when no limit is known.
func (l *limiter) estimateWait(c Call, tokens int64, now time.Time) time.Duration {
	e := l.effective()
	class := classOf(c.Batch)
	mine := l.byClassTenant[string(rune('0'+class))+c.Tenant] + 1
	tenants := len(l.tenantsByClass[class])
	if l.tenantsByClass[class][c.Tenant] == 0 {
		tenants++
	}
	pos := float64(mine * tenants)
	if c.Batch {
		interactive := 0
		for _, n := range l.tenantsByClass[0] {
			interactive += n
		}
		pos += math.Min(float64(interactive), pos*interactiveWeight/batchWeight)
	}
	return l.waitAt(e, math.Min(pos, float64(l.queue.waiting+1)), tokens, now)
}

// waitAt is how long a call of tokens at place pos of the queue would wait
// at the pace e. The buckets' shadows start now when no grant set them
// yet.
func (l *limiter) waitAt(e effective, pos float64, tokens int64, now time.Time) time.Duration {
	var wait float64
	if e.reqRate > 0 {
		wait = math.Max(wait, later(l.shadowReq, now).Sub(now).Seconds()+(pos-e.reqBurst)/e.reqRate)
	}
	if e.tokRate > 0 {
		wait = math.Max(wait, later(l.shadowTok, now).Sub(now).Seconds()+(pos*float64(tokens)-e.tokBurst)/e.tokRate)
	}
	if e.inFlight > 0 && l.latencyMean > 0 {
		wait = math.Max(wait, (pos-float64(max(e.inFlight-l.sharedCalls, 0)))*l.latencyMean/float64(e.inFlight))
	}
	d := time.Duration(math.Max(wait, 0) * float64(time.Second))
	if l.pausedUntil.After(now) {
		d += l.pausedUntil.Sub(now)
	}
	if l.nextAt.After(now) {
		d = max(d, l.nextAt.Sub(now))
	}
	return d
}

// deferCall hands a call of tokens back to wait elsewhere; est is its
// wait from now. It comes back after the calls deferred before it that
// have not come back yet, at the rate the limit serves calls.
func (l *limiter) deferCall(now time.Time, est time.Duration, tokens int64) *WaitError {
	e := l.effective()
	for len(l.deferredUntil) > 0 && !l.deferredUntil[0].After(now) {
		heap.Pop(&l.deferredUntil)
	}
	until := now.Add(est)
	if rate := l.serviceRate(e, tokens); rate > 0 {
		until = until.Add(time.Duration(float64(len(l.deferredUntil)) / rate * float64(time.Second)))
	}
	if l.guessing(e) {
		// The pace rests on guesses: a call comes back within MaxWait, to
		// be deferred again on what the answers have taught meanwhile.
		if most := now.Add(l.p.cfg.MaxWait); until.After(most) {
			until = most
		}
	}
	heap.Push(&l.deferredUntil, until)
	l.deferred++
	return &WaitError{Limit: l.name, Until: until, Reason: l.reason(e, now)}
}

// guessing says the pace in force rests on guesses: a token limit before
// answers' usage taught the tokens a call takes (its reservation assumes
// a long completion), or no limit configured before answers taught one.
func (l *limiter) guessing(e effective) bool {
	const enough = 16
	return l.usages < enough && (e.tokRate > 0 || l.configured == (Limit{}))
}

// serviceRate is the calls a second the limit lets through at the pace in
// force (0: no bound known): its requests, its tokens at calls of tokens,
// and its calls in flight over their latency, whichever is lowest.
func (l *limiter) serviceRate(e effective, tokens int64) float64 {
	rate := math.Inf(1)
	if e.reqRate > 0 {
		rate = e.reqRate
	}
	if l.usedMean > 0 {
		tokens = int64(math.Ceil(l.usedMean)) // what calls use, not what they reserve
	}
	if e.tokRate > 0 && tokens > 0 {
		rate = min(rate, e.tokRate/float64(tokens))
	}
	if e.inFlight > 0 && l.latencyMean > 0 {
		rate = min(rate, float64(e.inFlight)/l.latencyMean)
	}
	if math.IsInf(rate, 1) {
		return 0
	}
	return rate
}

// timeHeap is a min-heap of times (container/heap).
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// reason names what binds, for a job's status.
func (l *limiter) reason(e effective, now time.Time) string {
	switch {
	case l.pausedUntil.After(now):
		return "the provider answered 429"
	case l.inFlightBound:
		return "calls in flight"
	case e.tokRate > 0 && e.reqRate > 0 && l.configured.TokensPerMinute > 0 && l.configured.RequestsPerMinute == 0:
		return "tokens per minute"
	case e.reqRate > 0:
		return "requests per minute"
	case e.tokRate > 0:
		return "tokens per minute"
	}
	return "calls in flight"
}

// run draws for the limit until ctx ends, then gives its holds back.
func (l *limiter) run(ctx context.Context) {
	defer l.release()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.lock()
		now := time.Now()
		params, due := l.plan(now)
		l.unlock()
		if params != nil {
			res, err := l.p.cfg.Store.ProviderLimitDraw(ctx, params)
			if ctx.Err() != nil {
				return
			}
			l.lock()
			if err != nil {
				l.p.log.Warn("provider limit draw failed", "limit", l.name, "error", err)
				l.returnTokens += params.ReturnTokens
				if params.PauseUntil != nil {
					l.pausePending = true
				}
				l.nextAt = time.Now().Add(100 * time.Millisecond)
			} else {
				l.apply(params, res)
			}
			l.lastDraw = time.Now()
			now = l.lastDraw
			_, due = l.plan(now)
			l.unlock()
		}
		if !due.IsZero() {
			timer.Reset(max(time.Until(due), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-timer.C:
		}
	}
}

// plan returns the draw to make now, or nil and when to look again (zero:
// when woken).
func (l *limiter) plan(now time.Time) (*store.ProviderLimitDrawParams, time.Time) {
	e := l.effective()
	interval := l.p.cfg.DrawInterval
	if earliest := l.lastDraw.Add(interval); now.Before(earliest) {
		return nil, earliest
	}
	var ask []*waiter
	if l.queue.waiting > 0 {
		switch {
		case l.nextAt.After(now) && !l.pausePending:
			// The buckets say when.
		case l.inFlightBound && l.calls == l.sentCalls && now.Before(l.lastDraw.Add(inFlightPoll)):
			// Bound by calls in flight: a call of this process that ends
			// wakes the loop; another's is looked for every inFlightPoll.
		default:
			n := l.queue.waiting
			if e.inFlight > 0 {
				n = min(n, max(e.inFlight-l.calls, 0))
			}
			ask = l.queue.ahead(min(n, maxAsk))
		}
	}
	heartbeat := l.calls > 0 && now.Sub(l.lastDraw) > l.p.cfg.HoldTTL/3
	if len(ask) == 0 && l.returnTokens == 0 && l.calls == l.sentCalls && !l.pausePending && !heartbeat {
		var due time.Time
		switch {
		case l.queue.waiting > 0 && l.nextAt.After(now):
			due = l.nextAt
		case l.queue.waiting > 0:
			due = l.lastDraw.Add(inFlightPoll)
		}
		if l.calls > 0 {
			hb := l.lastDraw.Add(l.p.cfg.HoldTTL / 3)
			if due.IsZero() || hb.Before(due) {
				due = hb
			}
		}
		return nil, due
	}
	p := &store.ProviderLimitDrawParams{
		Name: l.name, Holder: l.p.cfg.Holder, HoldTTL: l.p.cfg.HoldTTL,
		RequestsPerSecond: e.reqRate, RequestBurst: e.reqBurst,
		TokensPerSecond: e.tokRate, TokenBurst: e.tokBurst, CallsInFlight: e.inFlight,
		Calls: l.calls, ReturnTokens: l.returnTokens,
	}
	for _, w := range ask {
		// Estimated again with what the answers taught since it arrived:
		// a reservation made on the first guess (a long completion)
		// would hold a token limit to one call at a time.
		w.tokens = l.estimate(w.bytes, len(w.call.Messages), w.call.MaxTokens)
		p.Ask = append(p.Ask, w.tokens)
	}
	if l.pausePending {
		pause := l.pause
		p.PauseUntil = &pause
	}
	if e.tokRate > 0 && l.returnTokens != 0 && !l.shadowTok.IsZero() {
		// The shadow follows the bucket as the settlement moves it back.
		l.shadowTok = l.shadowTok.Add(-time.Duration(float64(l.returnTokens) / e.tokRate * float64(time.Second)))
	}
	l.returnTokens, l.pausePending = 0, false
	return p, time.Time{}
}

// apply grants what the draw granted to the queue's next waiters (which
// may have changed since: the tokens' difference is settled next).
func (l *limiter) apply(p *store.ProviderLimitDrawParams, res *store.ProviderLimitDrawResult) {
	l.sentCalls = p.Calls + res.Granted
	now := time.Now()
	for i := range res.Granted {
		w := l.queue.pop()
		if w == nil {
			l.returnTokens += p.Ask[i]
			continue
		}
		l.countWaiting(w.call, -1)
		l.returnTokens += p.Ask[i] - w.tokens
		l.calls++
		l.reserved += w.tokens
		l.granted++
		if p.RequestsPerSecond > 0 {
			l.shadowReq = later(l.shadowReq, now).Add(time.Duration(float64(time.Second) / p.RequestsPerSecond))
		}
		if p.TokensPerSecond > 0 {
			l.shadowTok = later(l.shadowTok, now).Add(time.Duration(float64(w.tokens) / p.TokensPerSecond * float64(time.Second)))
		}
		w.ticket = &Ticket{l: l, tokens: w.tokens, bytes: w.bytes, messages: len(w.call.Messages), start: time.Now()}
		close(w.granted)
	}
	l.sharedCalls = res.CallsInFlight - p.Calls - res.Granted + l.calls
	l.nextAt, l.inFlightBound = res.NextAt, res.InFlightBound
	if p.PauseUntil != nil && p.PauseUntil.After(l.pausedUntil) {
		l.pausedUntil = *p.PauseUntil
	}
}

// release gives this process's holds back as it stops.
func (l *limiter) release() {
	l.lock()
	p := &store.ProviderLimitDrawParams{Name: l.name, Holder: l.p.cfg.Holder, HoldTTL: l.p.cfg.HoldTTL, ReturnTokens: l.returnTokens}
	e := l.effective()
	p.TokensPerSecond = e.tokRate
	l.unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = l.p.cfg.Store.ProviderLimitDraw(ctx, p)
}

// done settles a granted call.
func (l *limiter) done(t *Ticket, resp *llm.Response, err error) {
	l.lock()
	defer l.unlock()
	defer l.signal()
	l.calls--
	l.reserved -= t.tokens
	class, classified := llm.ClassOf(err)
	switch {
	case resp != nil:
		l.answered = true
		used := resp.PromptTokens + resp.CompletionTokens
		if used > 0 {
			l.returnTokens += t.tokens - used
			l.used += used
			l.learnTokens(t, resp)
			l.usages++
		}
		lat := time.Since(t.start).Seconds()
		l.latencyMean = ewma(l.latencyMean, lat, 0.1)
		l.observe(resp.RateLimits)
	case classified && class == llm.ClassRateLimited:
		l.returnTokens += t.tokens // the provider counted nothing
		l.rateLimitedBy(err)
	case err == nil:
		// Never sent: the whole reservation goes back.
		l.returnTokens += t.tokens
	default:
		// Not answered: the provider may have counted the call's tokens;
		// the reservation stays spent.
	}
}

// rateLimitedBy takes a 429: the pace it teaches, and a pause of every
// process's calls until its Retry-After and then the time the provider's
// buckets take to refill a burst. The pause empties the shared buckets as
// of its end, and the provider's hold about one call when its Retry-After
// ends: without the refill the calls after it went at the provider's very
// rate with no room for the jitter between a grant and its arrival (the
// room a burst of half the provider's capacity keeps otherwise), and that
// room never came back while calls kept coming (docs/architecture.md,
// "Provider limits").
func (l *limiter) rateLimitedBy(err error) {
	l.answered = true
	l.rateLimited++
	var e *llm.Error
	_ = errors.As(err, &e)
	l.observe(e.RateLimits)
	if e.RateLimits == nil && l.latencyMean > 0 && l.calls > 0 {
		// A provider without headers: halve the pace the calls in
		// flight show (Little's law), then grow it again slowly on
		// answers.
		rate := float64(l.calls+1) / l.latencyMean
		if l.learnedReq > 0 {
			rate = min(rate, l.learnedReq)
		}
		l.learnedReq = max(0.5*rate, 0.1)
	}
	wait := e.RetryAfter
	if wait <= 0 {
		wait = time.Second
	}
	if until := time.Now().Add(wait + l.effective().refill()); until.After(l.pause) {
		l.pause = until
	}
	l.pausePending = true
}

// refill is how long the buckets take to refill a burst at the pace e:
// the longer of the two kinds, at most BurstDefault (a burst of one call
// at a slow pace is an interval the calls after the pause keep anyway).
func (e effective) refill() time.Duration {
	var s float64
	if e.reqRate > 0 {
		s = e.reqBurst / e.reqRate
	}
	if e.tokRate > 0 {
		s = max(s, e.tokBurst/e.tokRate)
	}
	return min(time.Duration(s*float64(time.Second)), BurstDefault)
}

// observe adjusts the learned pace to the provider's headers.
func (l *limiter) observe(rl *llm.RateLimits) {
	if rl == nil {
		if l.learnedReq > 0 && l.reqCapacity == 0 {
			l.learnedReq *= 1.02 // no headers: grow back after a 429
		}
		return
	}
	if rate, ok := rl.Requests.PerSecond(); ok {
		l.learnedReq = learn(l.learnedReq, rate, &l.reqGuessed)
	} else if rl.Requests.Limit > 0 && l.learnedReq == 0 && l.configured.RequestsPerMinute == 0 {
		// Whole, and nothing else known: assume a limit per minute until
		// a reading says otherwise.
		l.learnedReq, l.reqGuessed = float64(rl.Requests.Limit)/60, true
	}
	if rl.Requests.Limit > 0 {
		l.reqCapacity = float64(rl.Requests.Limit)
	}
	if rate, ok := rl.Tokens.PerSecond(); ok {
		l.learnedTok = learn(l.learnedTok, rate, &l.tokGuessed)
	} else if rl.Tokens.Limit > 0 && l.learnedTok == 0 && l.configured.TokensPerMinute == 0 {
		l.learnedTok, l.tokGuessed = float64(rl.Tokens.Limit)/60, true
	}
	if rl.Tokens.Limit > 0 {
		l.tokCapacity = float64(rl.Tokens.Limit)
	}
}

func (l *limiter) learnTokens(t *Ticket, resp *llm.Response) {
	if t.bytes > 0 && resp.PromptTokens > 0 {
		perByte := float64(resp.PromptTokens-int64(4*t.messages)) / float64(t.bytes)
		l.tokensPerByte = min(max(ewma(l.tokensPerByte, perByte, 0.2), 1.0/8), 1)
	}
	l.completionMean = max(ewma(l.completionMean, float64(resp.CompletionTokens), 0.2), 1)
	l.usedMean = ewma(l.usedMean, float64(resp.PromptTokens+resp.CompletionTokens), 0.2)
}

// learn is the learned rate after a reading of rate: the reading itself
// when the old one was a guess (a whole bucket's limit taken as per
// minute: a provider whose window is shorter would be paced far below its
// limit until enough readings averaged the guess away), else their
// moving average.
func learn(old, rate float64, guessed *bool) float64 {
	if *guessed {
		*guessed = false
		return rate
	}
	return ewma(old, rate, 0.3)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func ewma(old, v, alpha float64) float64 {
	if old == 0 {
		return v
	}
	return (1-alpha)*old + alpha*v
}

func (l *limiter) stats() Stats {
	l.lock()
	defer l.unlock()
	e := l.effective()
	return Stats{
		Limit:              l.name,
		Configured:         l.configured,
		Learned:            Limit{RequestsPerMinute: l.learnedReq * 60, TokensPerMinute: l.learnedTok * 60},
		Effective:          Limit{RequestsPerMinute: e.reqRate * 60, TokensPerMinute: e.tokRate * 60, CallsInFlight: e.inFlight},
		CallsInFlight:      l.sharedCalls,
		LocalCallsInFlight: l.calls,
		ReservedTokens:     l.reserved,
		Waiting:            l.queue.waiting,
		Granted:            l.granted, UsedTokens: l.used, RateLimited: l.rateLimited, Deferred: l.deferred,
		PausedUntil: l.pausedUntil,
	}
}
