// Package watch fans a store's event notifications out to the watchers of
// one process. It is dialect-free: the store supplies the durable log
// (store.WatchStore) and a channel of notifications; the hub keeps, per job
// and per tenant, the watchers to wake.
//
// A notification is only a hint. A woken watcher re-reads the log from its
// own position (WatchJobs streams at the tail share one reader per tenant,
// the tenant's feed), so a lost, late, duplicated or coalesced notification
// costs latency at worst, never an event. The hub never blocks on a watcher: a
// watcher's wake-up is a channel of capacity one, sent to without waiting,
// so any number of notifications for a busy watcher fold into one re-read;
// a slow client only delays itself, and catches up from the log.
package watch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/store"
)

// ErrShuttingDown ends every watch when the hub shuts down; the caller
// tells its client where to resume.
var ErrShuttingDown = errors.New("watch: server shutting down")

// ErrAfterSeqPastEnd: the job has no event with the seq the watch was to
// start after.
var ErrAfterSeqPastEnd = errors.New("watch: after_seq is past the job's last event")

// Config is what a Hub needs. Zero fields take the defaults stated.
type Config struct {
	// Store is the log and the notification source. Required.
	Store store.WatchStore
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// PollInterval is the store's fallback tail of the log. Default:
	// store.JobEventListenPollIntervalDefault.
	PollInterval time.Duration
	// BatchSize caps the events one read returns. Default:
	// store.JobChangeListLimitDefault.
	BatchSize int
	// ReadBytes caps the bytes of one read of a tenant's changes
	// (store.JobChangeListParams.MaxBytes). Default:
	// store.PageBytesDefault.
	ReadBytes int64
	// FeedBytes caps the changes a tenant's feed keeps for its streams at
	// the tail; a stream that falls further behind while its client does
	// not read is cut off (ErrSlowConsumer). Default: DefaultFeedBytes.
	FeedBytes int64
	// CatchUpReads is how many reads of a tenant's streams catching up
	// (behind the tail) run at once; the others wait their turn. Default:
	// DefaultCatchUpReads.
	CatchUpReads int
	// SharedMinInterval is the least time between two reads of a value
	// watched with WatchShared: a busy tenant's notifications fold into
	// one read per interval. Default: DefaultSharedMinInterval.
	SharedMinInterval time.Duration
	// SharedIdleInterval reads a WatchShared value again without a
	// notification after this long. Default: DefaultSharedIdleInterval.
	SharedIdleInterval time.Duration
	// Budget is the process's memory budget: the feeds' changes and the
	// streams' batches draw from it. Default: none, unlimited.
	Budget *membudget.Budget
}

// Defaults of Config.
const (
	DefaultFeedBytes    = 4 << 20
	DefaultCatchUpReads = 2

	DefaultSharedMinInterval  = 250 * time.Millisecond
	DefaultSharedIdleInterval = 5 * time.Second
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.PollInterval <= 0 {
		c.PollInterval = store.JobEventListenPollIntervalDefault
	}
	if c.BatchSize <= 0 {
		c.BatchSize = store.JobChangeListLimitDefault
	}
	if c.ReadBytes <= 0 {
		c.ReadBytes = store.PageBytesDefault
	}
	if c.FeedBytes <= 0 {
		c.FeedBytes = DefaultFeedBytes
	}
	if c.CatchUpReads <= 0 {
		c.CatchUpReads = DefaultCatchUpReads
	}
	if c.SharedMinInterval <= 0 {
		c.SharedMinInterval = DefaultSharedMinInterval
	}
	if c.SharedIdleInterval <= 0 {
		c.SharedIdleInterval = DefaultSharedIdleInterval
	}
	c.SharedIdleInterval = max(c.SharedIdleInterval, c.SharedMinInterval)
	return c
}

// Hub is the in-process fan-out. Its methods are safe for concurrent use.
type Hub struct {
	cfg      Config
	mu       sync.RWMutex
	jobs     map[string]map[*subscription]struct{} // by job id
	feeds    map[string]*feed                      // by tenant; see feed
	shared   map[string]map[string]*shared         // by tenant and key; see WatchShared
	catchUps map[string]*catchUpTurns              // by tenant; see catchUp
	closing  chan struct{}
	shutdown sync.Once
	reads    readGroup
	// epoch counts dispatches; see readGroup.
	epoch   atomic.Uint64
	active  atomic.Int64
	signals TestSignals
}

// subscription is one watcher's registration.
type subscription struct {
	wake chan struct{} // capacity 1: "the log may have more for you"
	// seq is the newest seq a job watcher has read; a notification at or
	// below it needs no wake-up.
	seq atomic.Int32
}

func (s *subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is already pending; it covers this one
	}
}

// New returns a Hub. Watches work at once, but only Run delivers live
// events.
func New(cfg Config) (*Hub, error) {
	cfg = cfg.WithDefaults()
	if cfg.Store == nil {
		return nil, errors.New("watch: Config.Store is required")
	}
	h := &Hub{
		cfg:      cfg,
		jobs:     make(map[string]map[*subscription]struct{}),
		feeds:    make(map[string]*feed),
		shared:   make(map[string]map[string]*shared),
		catchUps: make(map[string]*catchUpTurns),
		closing:  make(chan struct{}),
	}
	h.reads.epoch = &h.epoch
	return h, nil
}

// Run starts the store's notification source and dispatches its
// notifications until ctx is done. Should the source fail to start, it
// retries with backoff.
func (h *Hub) Run(ctx context.Context) {
	for n := 1; ; n++ {
		notes, err := h.cfg.Store.JobEventListen(ctx, &store.JobEventListenParams{
			Logger:       h.cfg.Logger,
			PollInterval: h.cfg.PollInterval,
		})
		if err == nil {
			h.wakeAll() // anything before the source started is in the log
			for n := range notes {
				h.dispatch(n)
			}
		}
		if ctx.Err() != nil {
			return
		}
		wait := restartBackoff.Wait(n, retry.Jitter())
		h.cfg.Logger.WarnContext(ctx, "watch: notification source stopped; restarting", "error", err, "backoff", wait.String())
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// restartBackoff paces the restarts of a failing notification source.
var restartBackoff = retry.Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}

// Shutdown ends every watch with ErrShuttingDown and refuses new ones. Call
// it before grpc.Server.GracefulStop, which waits for streams to end.
func (h *Hub) Shutdown() {
	h.shutdown.Do(func() { close(h.closing) })
}

// Budget returns the memory budget the hub draws from (Config.Budget).
func (h *Hub) Budget() *membudget.Budget { return h.cfg.Budget }

// Notifications returns how many notifications the hub has dispatched
// (and times it woke every watcher), for the reads-per-notification
// metric.
func (h *Hub) Notifications() uint64 { return h.epoch.Load() }

// Active returns the number of watches running.
func (h *Hub) Active() int64 { return h.active.Load() }

// addActive counts a watch that starts (1) or ends (-1).
func (h *Hub) addActive(d int64) { h.signals.Active.Signal(h.active.Add(d)) }

func (h *Hub) dispatch(n store.JobEventNotification) {
	h.epoch.Add(1)
	h.mu.RLock()
	defer h.mu.RUnlock()
	for sub := range h.jobs[n.JobID] {
		if n.Seq > sub.seq.Load() {
			sub.signal()
		}
	}
	for _, s := range h.shared[n.Tenant] {
		s.signal()
	}
	if f := h.feeds[n.Tenant]; f != nil {
		f.signal()
	}
	h.signals.Woken.Signal(n)
}

func (h *Hub) wakeAll() {
	h.epoch.Add(1)
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, set := range h.jobs {
		for sub := range set {
			sub.signal()
		}
	}
	for _, byKey := range h.shared {
		for _, s := range byKey {
			s.signal()
		}
	}
	for _, f := range h.feeds {
		f.signal()
	}
}

// subscribe registers a watcher under key before its first read, so no
// notification after that read can miss it.
func (h *Hub) subscribe(index map[string]map[*subscription]struct{}, key string) (*subscription, func(), error) {
	sub := &subscription{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closing:
		return nil, nil, ErrShuttingDown
	default:
	}
	set := index[key]
	if set == nil {
		set = make(map[*subscription]struct{})
		index[key] = set
	}
	set[sub] = struct{}{}
	h.addActive(1)
	return sub, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(set, sub)
		if len(set) == 0 {
			delete(index, key)
		}
		h.addActive(-1)
	}, nil
}

// wait blocks until sub is woken, ctx is done or the hub shuts down.
func (h *Hub) wait(ctx context.Context, sub *subscription) error {
	select {
	case <-sub.wake:
		return h.stopped(ctx)
	case <-ctx.Done():
		return ctx.Err()
	case <-h.closing:
		return ErrShuttingDown
	}
}

// stopped reports why a busy watch must stop before its next read, if it
// must.
func (h *Hub) stopped(ctx context.Context) error {
	select {
	case <-h.closing:
		return ErrShuttingDown
	default:
		return ctx.Err()
	}
}
