// Package pace keeps a process's LLM calls inside the provider's limits:
// requests and tokens per minute and calls in flight, per limit (a model
// profile's own, or one that profiles on one account share), drawn from a
// budget in the store that every process shares (store.ProviderLimitStore).
// Each call waits its turn in a fair queue (interactive before batch by
// weight, then tenants, then the runs and single jobs of a tenant), its
// tokens estimated and reserved before it is sent and settled with the
// provider's usage after. The provider's x-ratelimit-* headers and 429s
// adjust the pace of the whole limit, so with no limit configured, or a
// wrong one, it converges to what the provider allows.
// docs/architecture.md, "Provider limits".
package pace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/store"
)

// Limit is a configured provider limit. Zero fields set no limit of that
// kind; the provider's headers may still set a lower one.
type Limit struct {
	RequestsPerMinute float64
	TokensPerMinute   float64
	CallsInFlight     int
}

// Defaults of Config.
const (
	HoldTTLDefault = 10 * time.Second
	MaxWaitDefault = 10 * time.Second
	// BurstDefault is how much of a limit may go at once: half a second
	// of its rate (at least one call), and never more than half of the
	// capacity the provider's headers state, so that the provider's
	// bucket keeps room for the jitter between a call's grant and its
	// arrival.
	BurstDefault = 500 * time.Millisecond
)

// Config configures a Pacer.
type Config struct {
	// Store holds the shared budgets. Required.
	Store store.ProviderLimitStore
	// Holder names this process in the limits' holds; unique per process.
	// Required.
	Holder string
	// Limits are the configured limits by name. A name not here (a
	// profile with no limit) is paced by what the provider says alone.
	Limits map[string]Limit
	// TenantWeights weigh tenants in the fair share; default 1 each.
	TenantWeights map[string]float64
	// HoldTTL is how long this process's calls in flight count for the
	// others after it stops drawing (it died). Default HoldTTLDefault.
	HoldTTL time.Duration
	// MaxWait is the longest a call waits in this process; a longer wait
	// is handed back to the caller as a *WaitError saying until when
	// (the job goes back to the queue, its attempt refunded). Default
	// MaxWaitDefault.
	MaxWait time.Duration
	// DrawInterval is the least time between two draws of a limit: the
	// calls that came due meanwhile are granted by one. Default 10ms.
	DrawInterval time.Duration
	Logger       *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.HoldTTL == 0 {
		c.HoldTTL = HoldTTLDefault
	}
	if c.MaxWait == 0 {
		c.MaxWait = MaxWaitDefault
	}
	if c.DrawInterval == 0 {
		c.DrawInterval = 10 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a limit or setting out of range.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil || c.Holder == "" {
		errs = append(errs, errors.New("pace: Store and Holder are required"))
	}
	for name, l := range c.Limits {
		if err := l.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("limit %q: %w", name, err))
		}
	}
	for tenant, w := range c.TenantWeights {
		if !(w > 0 && w <= 1000) {
			errs = append(errs, fmt.Errorf("tenant %q: weight must be above 0 and at most 1000", tenant))
		}
	}
	if c.HoldTTL < 0 || c.MaxWait < 0 || c.DrawInterval < 0 {
		errs = append(errs, errors.New("pace: durations must not be negative"))
	}
	return errors.Join(errs...)
}

// Validate reports a negative or absurd limit.
func (l Limit) Validate() error {
	const most = 1e12
	if l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || l.CallsInFlight < 0 ||
		l.RequestsPerMinute > most || l.TokensPerMinute > most || l.CallsInFlight > 1_000_000 {
		return fmt.Errorf("requests_per_minute and tokens_per_minute must be 0-%g, calls_in_flight 0-1000000", most)
	}
	return nil
}

// Call is one LLM call asking to be sent.
type Call struct {
	// Limit names the limit the call draws from.
	Limit string
	// Messages and MaxTokens are the request's: the call's tokens are
	// estimated from them and reserved.
	Messages  []llm.Message
	MaxTokens int
	// Tenant, Group (a run's id; "" for a single job) and Batch (the
	// batch class: a run's item) place the call in the fair queue.
	Tenant string
	Group  string
	Batch  bool
	// Deadline, when not zero, is when the job's budget ends: the call
	// waits no later.
	Deadline time.Time
}

// WaitError is a call that would wait longer than the Pacer waits in
// process: try again at Until.
type WaitError struct {
	Limit string
	Until time.Time
	// Reason says which limit binds, for the job's status.
	Reason string
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("waiting for the provider limit %q (%s): next try at %s", e.Limit, e.Reason, e.Until.UTC().Format(time.RFC3339))
}

// Pacer paces the calls of one process.
type Pacer struct {
	cfg  Config
	log  *slog.Logger
	ctx  context.Context // ends the limiters' loops
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	limiters map[string]*limiter
}

// New returns a Pacer; Close stops it.
func New(cfg Config) (*Pacer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Pacer{cfg: cfg, log: cfg.Logger, ctx: ctx, stop: stop, limiters: map[string]*limiter{}}, nil
}

// Close stops drawing and gives this process's calls in flight back.
func (p *Pacer) Close() {
	p.stop()
	p.wg.Wait()
}

func (p *Pacer) limiter(name string) *limiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.limiters[name]
	if !ok {
		l = newLimiter(p, name, p.cfg.Limits[name])
		p.limiters[name] = l
		p.wg.Add(1)
		go func() { defer p.wg.Done(); l.run(p.ctx) }()
	}
	return l
}

// Wait returns when c may be sent, with the Ticket to settle it by. It
// returns a *WaitError when c would wait past MaxWait or its Deadline, and
// ctx's error when ctx ends first.
func (p *Pacer) Wait(ctx context.Context, c Call) (*Ticket, error) {
	return p.limiter(c.Limit).wait(ctx, c)
}

// Stats returns every limit's state, by name.
func (p *Pacer) Stats() []Stats {
	p.mu.Lock()
	ls := make([]*limiter, 0, len(p.limiters))
	for _, l := range p.limiters {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	out := make([]Stats, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.stats())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Limit < out[j].Limit })
	return out
}

// Stats is one limit as this process sees it.
type Stats struct {
	Limit      string
	Configured Limit
	// Learned is what the provider's headers say (zero: nothing yet).
	Learned Limit
	// Effective is the pace in force: the lower of the two.
	Effective Limit
	// CallsInFlight is every process's, as of the last draw;
	// LocalCallsInFlight this process's.
	CallsInFlight      int
	LocalCallsInFlight int
	// ReservedTokens are the tokens this process's calls in flight hold.
	ReservedTokens int64
	// Waiting is the calls waiting in this process.
	Waiting int
	// Granted, Used (tokens settled), RateLimited (429s) and Deferred
	// (calls handed back with a WaitError) count since start.
	Granted, UsedTokens, RateLimited, Deferred int64
	// PausedUntil is the end of the last pause a 429 set.
	PausedUntil time.Time
}

// Ticket is a granted call; Done settles it.
type Ticket struct {
	l        *limiter
	tokens   int64 // reserved
	bytes    int   // of the prompt
	messages int
	start    time.Time
	once     sync.Once
}

// Done settles the call: resp or err is how it ended, both nil when it
// was never sent. The tokens it reserved are settled with the usage the
// provider reported (kept when it did not answer: it may have counted
// them), its headers adjust the pace, and a 429 pauses every process's
// calls of the limit for its Retry-After.
func (t *Ticket) Done(resp *llm.Response, err error) {
	if t == nil {
		return
	}
	t.once.Do(func() { t.l.done(t, resp, err) })
}

// Tokens is what the call reserved.
func (t *Ticket) Tokens() int64 { return t.tokens }
