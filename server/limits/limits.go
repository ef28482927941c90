// Package limits keeps one tenant from hurting another: per-tenant submit
// rate and burst (a token bucket, golang.org/x/time/rate), jobs in flight,
// watch streams open and document bytes a day. A call over a limit is
// RESOURCE_EXHAUSTED with an ErrorInfo naming the limit and a RetryInfo
// saying when to try again (the HTTP gateway makes that 429 with
// Retry-After).
//
// go-grpc-middleware's ratelimit interceptor is not used: it rewraps the
// limiter's error in a status of its own, which drops the RetryInfo, and
// its Limiter sees no request, so it cannot count a SubmitJobs call's items
// or bytes.
//
// The rate and the watch count are kept in each process (so with N serve
// replicas behind a balancer a tenant gets up to N times the rate); jobs in
// flight and bytes a day are read from the store, shared by all replicas,
// at most once a second per tenant, with this process's admissions since
// added.
package limits

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// ErrorInfo reasons of the limits.
const (
	ReasonSubmitRate   = "TENANT_SUBMIT_RATE"
	ReasonJobsInFlight = "TENANT_JOBS_IN_FLIGHT"
	ReasonWatchStreams = "TENANT_WATCH_STREAMS"
	// ReasonKeyWatchStreams: one API key's watch streams.
	ReasonKeyWatchStreams = "KEY_WATCH_STREAMS"
	ReasonDocumentBytes   = "TENANT_DOCUMENT_BYTES_PER_DAY"
)

// usageTTL is how long a tenant's usage read from the store is used.
const usageTTL = time.Second

// inFlightRetry is the RetryInfo of the jobs-in-flight limit: jobs end on
// their own time, so it is a polling hint.
const inFlightRetry = 5 * time.Second

// watchRetry is the RetryInfo of the watch-streams limit.
const watchRetry = 5 * time.Second

// Tenant is one tenant's limits. Zero is no limit.
type Tenant struct {
	// SubmitRate is submissions a second (SubmitJob is one; SubmitJobs one
	// per item), refilled continuously.
	SubmitRate float64 `yaml:"submit_rate"`
	// SubmitBurst is how many may come at once. Default: the rate rounded
	// up, at least 1.
	SubmitBurst int `yaml:"submit_burst"`
	// JobsInFlight bounds the tenant's jobs not finished (queued, running,
	// retry_wait, awaiting_approval, outcome_unknown).
	JobsInFlight int64 `yaml:"jobs_in_flight"`
	// WatchStreams bounds the WatchJob, WatchJobs and WatchRun streams open
	// at once, per process.
	WatchStreams int `yaml:"watch_streams"`
	// WatchStreamsPerKey bounds the watch streams one API key has open at
	// once, per process, so one key cannot take its tenant's whole share.
	WatchStreamsPerKey int `yaml:"watch_streams_per_key"`
	// DocumentBytesPerDay bounds the document bytes of the jobs the tenant
	// creates in a UTC day.
	DocumentBytesPerDay int64 `yaml:"document_bytes_per_day"`
	// StoreCalls bounds the tenant's unary calls (SubmitJob aside, which
	// the group commit batches) running at once, per process: its share of
	// the store's connections, so one tenant cannot hold them all. A call
	// over it waits for a slot (with at most 4 × StoreCalls others, for at
	// most 10 s), then is refused. serve's default is half the store's
	// connections.
	StoreCalls int `yaml:"store_calls"`
}

func (t Tenant) validate(name string) error {
	switch {
	case t.SubmitRate < 0 || math.IsNaN(t.SubmitRate) || math.IsInf(t.SubmitRate, 0):
		return fmt.Errorf("%s: submit_rate must be a non-negative number", name)
	case t.SubmitBurst < 0:
		return fmt.Errorf("%s: submit_burst must not be negative", name)
	case t.JobsInFlight < 0:
		return fmt.Errorf("%s: jobs_in_flight must not be negative", name)
	case t.WatchStreams < 0:
		return fmt.Errorf("%s: watch_streams must not be negative", name)
	case t.WatchStreamsPerKey < 0:
		return fmt.Errorf("%s: watch_streams_per_key must not be negative", name)
	case t.DocumentBytesPerDay < 0:
		return fmt.Errorf("%s: document_bytes_per_day must not be negative", name)
	case t.StoreCalls < 0:
		return fmt.Errorf("%s: store_calls must not be negative", name)
	}
	return nil
}

func (t Tenant) burst() int {
	if t.SubmitBurst > 0 {
		return t.SubmitBurst
	}
	return max(1, int(math.Ceil(t.SubmitRate)))
}

// Override is a tenant's entry of the `limits:` section: the fields it
// sets replace the defaults; 0 sets no limit.
type Override struct {
	SubmitRate          *float64 `yaml:"submit_rate,omitempty"`
	SubmitBurst         *int     `yaml:"submit_burst,omitempty"`
	JobsInFlight        *int64   `yaml:"jobs_in_flight,omitempty"`
	WatchStreams        *int     `yaml:"watch_streams,omitempty"`
	WatchStreamsPerKey  *int     `yaml:"watch_streams_per_key,omitempty"`
	DocumentBytesPerDay *int64   `yaml:"document_bytes_per_day,omitempty"`
	StoreCalls          *int     `yaml:"store_calls,omitempty"`
}

func (o Override) apply(t Tenant) Tenant {
	if o.SubmitRate != nil {
		t.SubmitRate = *o.SubmitRate
	}
	if o.SubmitBurst != nil {
		t.SubmitBurst = *o.SubmitBurst
	}
	if o.JobsInFlight != nil {
		t.JobsInFlight = *o.JobsInFlight
	}
	if o.WatchStreams != nil {
		t.WatchStreams = *o.WatchStreams
	}
	if o.WatchStreamsPerKey != nil {
		t.WatchStreamsPerKey = *o.WatchStreamsPerKey
	}
	if o.DocumentBytesPerDay != nil {
		t.DocumentBytesPerDay = *o.DocumentBytesPerDay
	}
	if o.StoreCalls != nil {
		t.StoreCalls = *o.StoreCalls
	}
	return t
}

// Section is the config file's `limits:` section:
//
//	limits:
//	  default:            # every tenant; replaces the --limit-* flags it sets
//	    submit_rate: 50
//	  tenants:
//	    acme:
//	      submit_rate: 200
//	      jobs_in_flight: 0   # no limit for acme
type Section struct {
	Default Override            `yaml:"default,omitempty"`
	Tenants map[string]Override `yaml:"tenants,omitempty"`
}

// Config is what New needs.
type Config struct {
	// Default applies to every tenant without an override.
	Default Tenant
	// Section, when set, overrides Default and names tenants' own limits.
	Section *Section
	// Usage reads jobs in flight and document bytes; required when a
	// tenant has either limit.
	Usage store.UsageStore
	// Logger receives failures to read the usage. Default slog.Default().
	Logger *slog.Logger
}

// Limits enforces per-tenant limits. Safe for concurrent use.
type Limits struct {
	def     Tenant
	tenants map[string]Tenant
	usage   store.UsageStore
	logger  *slog.Logger
	now     func() time.Time

	mu    sync.Mutex
	state map[string]*state
	// keyWatches counts the open watch streams of each key (by prefix).
	keyWatches map[string]int
	signals    TestSignals
}

// state is one tenant's counters in this process.
type state struct {
	limiter *rate.Limiter // nil: no rate limit
	watches int
	store   *storeSlots // made on the tenant's first call that takes a slot

	usage     store.TenantUsage // as read, plus this process's admissions since
	usageAt   time.Time
	usageDay  time.Time // the UTC day usage.DocumentBytes counts
	refreshMu sync.Mutex
}

// None returns Limits that limit nothing.
func None() *Limits {
	l, _ := New(Config{})
	return l
}

// New returns the limits cfg describes.
func New(cfg Config) (*Limits, error) {
	def := cfg.Default
	tenants := map[string]Tenant{}
	if cfg.Section != nil {
		def = cfg.Section.Default.apply(def)
		for name, o := range cfg.Section.Tenants {
			if !tenant.ValidTenant(name) {
				return nil, fmt.Errorf("limits: tenants: %q is not a tenant name", name)
			}
			tenants[name] = o.apply(def)
		}
	}
	if err := def.validate("limits: default"); err != nil {
		return nil, err
	}
	for name, t := range tenants {
		if err := t.validate("limits: tenants: " + name); err != nil {
			return nil, err
		}
	}
	needsUsage := def.JobsInFlight > 0 || def.DocumentBytesPerDay > 0
	for _, t := range tenants {
		needsUsage = needsUsage || t.JobsInFlight > 0 || t.DocumentBytesPerDay > 0
	}
	if needsUsage && cfg.Usage == nil {
		return nil, fmt.Errorf("limits: jobs_in_flight and document_bytes_per_day need a store that reports usage")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Limits{def: def, tenants: tenants, usage: cfg.Usage, logger: logger, now: time.Now, state: map[string]*state{}, keyWatches: map[string]int{}}, nil
}

// For returns the limits of tenant name.
func (l *Limits) For(name string) Tenant {
	if t, ok := l.tenants[name]; ok {
		return t
	}
	return l.def
}

func (l *Limits) stateOf(name string, t Tenant) *state {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.state[name]
	if !ok {
		s = &state{}
		if t.SubmitRate > 0 {
			s.limiter = rate.NewLimiter(rate.Limit(t.SubmitRate), t.burst())
		}
		l.state[name] = s
	}
	return s
}

// exhausted is RESOURCE_EXHAUSTED with the limit's ErrorInfo and RetryInfo.
func exhausted(reason string, retry time.Duration, meta map[string]string, format string, args ...any) error {
	st, _ := status.Newf(codes.ResourceExhausted, format, args...).WithDetails(
		&errdetails.ErrorInfo{Reason: reason, Domain: idempotency.ErrorDomain, Metadata: meta},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)},
	)
	return st.Err()
}

// ReasonBatchOverBurst is the ErrorInfo reason of a SubmitJobs call of
// more items than the tenant's burst.
const ReasonBatchOverBurst = "TENANT_SUBMIT_BATCH_OVER_BURST"

// overBurst is INVALID_ARGUMENT, without RetryInfo: a call of more
// submissions than the burst can never be admitted, whatever the wait.
func overBurst(name string, n, burst int) error {
	st, _ := status.Newf(codes.InvalidArgument, "a call of %d submissions is more than tenant %s's submit burst of %d: split it into calls of at most %d", n, name, burst, burst).WithDetails(
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field: "items", Description: fmt.Sprintf("holds %d items, more than the tenant's submit burst of %d", n, burst),
		}}},
		&errdetails.ErrorInfo{Reason: ReasonBatchOverBurst, Domain: idempotency.ErrorDomain, Metadata: map[string]string{"burst": strconv.Itoa(burst), "items": strconv.Itoa(n)}},
	)
	return st.Err()
}

// submission is what a call submits: how many jobs and how many document
// bytes. Zero for a call that submits nothing.
func submission(req any) (n int, bytes int64) {
	switch r := req.(type) {
	case *oncejobv1.SubmitJobRequest:
		return 1, documentBytes(r.GetDocument())
	case *oncejobv1.SubmitJobsRequest:
		for _, it := range r.GetItems() {
			bytes += documentBytes(it.GetRequest().GetDocument())
		}
		return len(r.GetItems()), bytes
	}
	return 0, 0
}

func documentBytes(d *oncejobv1.Document) int64 {
	return int64(len(d.GetText()) + len(d.GetData()))
}

// Admit decides a submission of n jobs and documentBytes document bytes
// by tenant name that does not come through the interceptor (a schedule's
// slot): nil, or the RESOURCE_EXHAUSTED status a SubmitJob would get.
func (l *Limits) Admit(ctx context.Context, name string, n int, documentBytes int64) error {
	return l.admit(ctx, name, n, documentBytes)
}

// admit decides a submission of n jobs and bytes document bytes by tenant
// name: the store-read limits first, so a refusal by one of them spends no
// rate token, then the rate.
func (l *Limits) admit(ctx context.Context, name string, n int, bytes int64) error {
	t := l.For(name)
	if t.SubmitRate == 0 && t.JobsInFlight == 0 && t.DocumentBytesPerDay == 0 {
		return nil
	}
	if t.SubmitRate > 0 && n > t.burst() {
		return overBurst(name, n, t.burst()) // no wait lets it through
	}
	s := l.stateOf(name, t)
	now := l.now()
	if t.JobsInFlight > 0 || t.DocumentBytesPerDay > 0 {
		u, ok := l.usageOf(ctx, name, s, now)
		if ok && t.JobsInFlight > 0 && u.InFlight+int64(n) > t.JobsInFlight {
			return exhausted(ReasonJobsInFlight, inFlightRetry,
				map[string]string{"limit": strconv.FormatInt(t.JobsInFlight, 10), "in_flight": strconv.FormatInt(u.InFlight, 10)},
				"tenant %s has %d jobs in flight, its limit is %d; retry when some have finished", name, u.InFlight, t.JobsInFlight)
		}
		if ok && t.DocumentBytesPerDay > 0 && u.DocumentBytes+bytes > t.DocumentBytesPerDay {
			midnight := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
			return exhausted(ReasonDocumentBytes, midnight.Sub(now),
				map[string]string{"limit": strconv.FormatInt(t.DocumentBytesPerDay, 10), "used": strconv.FormatInt(u.DocumentBytes, 10)},
				"tenant %s has submitted %d document bytes today (UTC), its limit is %d; retry after midnight UTC", name, u.DocumentBytes, t.DocumentBytesPerDay)
		}
	}
	if s.limiter != nil {
		r := s.limiter.ReserveN(now, n)
		if !r.OK() {
			return overBurst(name, n, t.burst())
		}
		if delay := r.DelayFrom(now); delay > 0 {
			r.CancelAt(now)
			return exhausted(ReasonSubmitRate, delay,
				map[string]string{"rate": strconv.FormatFloat(t.SubmitRate, 'f', -1, 64), "burst": strconv.Itoa(t.burst())},
				"tenant %s is over its submit rate of %g a second (burst %d); retry in %s", name, t.SubmitRate, t.burst(), delay.Round(time.Millisecond))
		}
	}
	if t.JobsInFlight > 0 || t.DocumentBytesPerDay > 0 {
		l.mu.Lock()
		s.usage.InFlight += int64(n)
		s.usage.DocumentBytes += bytes
		l.mu.Unlock()
	}
	return nil
}

// usageOf returns the tenant's usage, read from the store when what this
// process holds is older than usageTTL or of another day. ok is false when
// the store cannot say: then the store-read limits let the call through
// (the store is down, so the call will fail on its own).
func (l *Limits) usageOf(ctx context.Context, name string, s *state, now time.Time) (store.TenantUsage, bool) {
	day := now.UTC().Truncate(24 * time.Hour)
	l.mu.Lock()
	fresh := now.Sub(s.usageAt) < usageTTL && s.usageDay.Equal(day)
	u := s.usage
	l.mu.Unlock()
	if fresh {
		return u, true
	}
	s.refreshMu.Lock() // one read per tenant at a time; the others wait for it
	defer s.refreshMu.Unlock()
	l.mu.Lock()
	if l.now().Sub(s.usageAt) < usageTTL && s.usageDay.Equal(day) {
		u := s.usage
		l.mu.Unlock()
		return u, true
	}
	l.mu.Unlock()
	read, err := l.usage.TenantUsage(ctx, &store.TenantUsageParams{Tenant: name, Since: day})
	if err != nil {
		l.logger.WarnContext(ctx, "tenant usage unavailable; its limits are not checked", "tenant", name, "error", err)
		return store.TenantUsage{}, false
	}
	l.mu.Lock()
	s.usage, s.usageAt, s.usageDay = *read, l.now(), day
	l.mu.Unlock()
	return *read, true
}

// UnaryServerInterceptor enforces the submit limits on SubmitJob and
// SubmitJobs. It runs after authentication: the tenant is in the context.
func (l *Limits) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if n, bytes := submission(req); n > 0 {
			name, _ := tenant.FromContext(ctx)
			if err := l.admit(ctx, name, n, bytes); err != nil {
				return nil, err
			}
		}
		return handler(ctx, req)
	}
}

var watchMethods = map[string]bool{
	oncejobv1.JobService_WatchJob_FullMethodName:  true,
	oncejobv1.JobService_WatchJobs_FullMethodName: true,
	oncejobv1.RunService_WatchRun_FullMethodName:  true,
}

// StreamServerInterceptor enforces the watch-streams limits, per tenant
// and per API key.
func (l *Limits) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !watchMethods[info.FullMethod] {
			return handler(srv, ss)
		}
		p, _ := tenant.PrincipalFromContext(ss.Context())
		name := p.Tenant
		if name == "" {
			name, _ = tenant.FromContext(ss.Context())
		}
		t := l.For(name)
		if t.WatchStreams == 0 && t.WatchStreamsPerKey == 0 {
			return handler(srv, ss)
		}
		s := l.stateOf(name, t)
		l.mu.Lock()
		if t.WatchStreams > 0 && s.watches >= t.WatchStreams {
			open := s.watches
			l.mu.Unlock()
			return exhausted(ReasonWatchStreams, watchRetry, map[string]string{"limit": strconv.Itoa(t.WatchStreams)},
				"tenant %s has %d watch streams open on this server, its limit is %d", name, open, t.WatchStreams)
		}
		if t.WatchStreamsPerKey > 0 && l.keyWatches[p.KeyPrefix] >= t.WatchStreamsPerKey {
			open := l.keyWatches[p.KeyPrefix]
			l.mu.Unlock()
			return exhausted(ReasonKeyWatchStreams, watchRetry, map[string]string{"limit": strconv.Itoa(t.WatchStreamsPerKey), "key": p.KeyPrefix},
				"API key %s has %d watch streams open on this server, its limit is %d", p.KeyPrefix, open, t.WatchStreamsPerKey)
		}
		s.watches++
		l.keyWatches[p.KeyPrefix]++
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			s.watches--
			if l.keyWatches[p.KeyPrefix]--; l.keyWatches[p.KeyPrefix] == 0 {
				delete(l.keyWatches, p.KeyPrefix)
			}
			l.mu.Unlock()
		}()
		return handler(srv, ss)
	}
}

// AnyUsage is a UsageStore that reports nothing used, for validating a
// section without a store.
var AnyUsage store.UsageStore = anyUsage{}

type anyUsage struct{}

func (anyUsage) TenantUsage(context.Context, *store.TenantUsageParams) (*store.TenantUsage, error) {
	return &store.TenantUsage{}, nil
}
