package storepg

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// ListenerApplicationName is the application_name of the LISTEN connection,
// to find it in pg_stat_activity.
const ListenerApplicationName = "oncejob-listener"

// The tail reads this many events a query; the LISTEN connection
// reconnects after a jittered wait that doubles from the min to the max.
const (
	listenTailBatch  = 1000
	listenMinBackoff = 50 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// JobEventListen implements store.WatchStore with two sources feeding one
// channel:
//
//   - a connection of its own (not from the pool) that LISTENs on the
//     schema's channel, on which every process's store announces events
//     after they commit (notifier.go); it reconnects with jittered
//     exponential backoff when it drops;
//   - a tail of the log on the pool, every PollInterval and at once after
//     each (re)connect: the events after its cursor in (tx, id) order whose
//     transactions have all ended, so it never skips one. It finds what a
//     dropped connection missed.
//
// The tail starts at the end of the log as of this call.
func (s *Store) JobEventListen(ctx context.Context, params *store.JobEventListenParams) (<-chan store.JobEventNotification, error) {
	p := params.WithDefaults()
	l := &listener{s: s, params: p, logger: p.Logger, pollNow: make(chan struct{}, 1)}
	start, err := s.q.JobEventTailStart(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("storepg: listen: %w", interpretError(err))
	}
	l.cursor = store.JobChangeCursor{Tx: start}
	l.out = make(chan store.JobEventNotification, p.Buffer)

	var wg sync.WaitGroup
	wg.Go(func() { l.listen(ctx) })
	wg.Go(func() { store.RunTail(ctx, p, l.pollNow, l.tailOnce) })
	go func() { wg.Wait(); close(l.out) }()
	return l.out, nil
}

type listener struct {
	s       *Store
	params  store.JobEventListenParams
	logger  *slog.Logger
	pollNow chan struct{} // capacity 1: tail at once (after a (re)connect)
	out     chan store.JobEventNotification
	cursor  store.JobChangeCursor // tail's own; only tail touches it
}

// listen holds the LISTEN connection until ctx is done.
func (l *listener) listen(ctx context.Context) {
	reconnect := retry.Backoff{Initial: listenMinBackoff, Max: listenMaxBackoff, Multiplier: 2}
	failures := 0 // since the last LISTEN in place
	for {
		err := l.listenOnce(ctx, func() { failures = 0 })
		if ctx.Err() != nil {
			return
		}
		failures++
		// Full jitter, so replicas that lost the database together do not
		// come back in lockstep.
		wait := reconnect.Wait(failures, retry.Jitter())
		l.logger.WarnContext(ctx, "job event listener disconnected; reconnecting", "error", err, "backoff", wait.String())
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// listenOnce connects, LISTENs and relays notifications until the
// connection fails or ctx is done. listening runs once LISTEN is in place.
func (l *listener) listenOnce(ctx context.Context, listening func()) error {
	cfg := l.s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	channel, err := l.s.q.JobEventChannel(ctx, conn)
	if err != nil {
		return err
	}
	// LISTEN takes no parameters; the identifier is quoted.
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	listening()
	l.s.signals.Listening.Signal(struct{}{})
	// Whatever committed while no connection listened is in the log.
	select {
	case l.pollNow <- struct{}{}:
	default:
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		note, ok := parseNotification(n.Payload)
		if !ok {
			l.logger.WarnContext(ctx, "job event listener: unexpected payload", "channel", n.Channel)
			continue
		}
		select {
		case l.out <- note:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// parseNotification reads "<job id> <seq> <tenant>" (0003_watch.up.sql).
func parseNotification(payload string) (store.JobEventNotification, bool) {
	parts := strings.SplitN(payload, " ", 3)
	if len(parts) != 3 {
		return store.JobEventNotification{}, false
	}
	seq, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil {
		return store.JobEventNotification{}, false
	}
	return store.JobEventNotification{JobID: parts[0], Seq: int32(seq), Tenant: parts[2]}, true
}

// tailOnce notifies the events after the tail's cursor whose transactions
// have all ended, up to the end of the log.
func (l *listener) tailOnce(ctx context.Context) error {
	for {
		rows, err := l.s.q.JobEventTail(ctx, l.s.pool, dbsqlc.JobEventTailParams{
			AfterTx: l.cursor.Tx,
			AfterID: l.cursor.ID,
			Max:     listenTailBatch,
		})
		if err != nil {
			return err
		}
		for _, r := range rows {
			select {
			case l.out <- store.JobEventNotification{Tenant: r.Tenant, JobID: r.JobID, Seq: int32(r.Seq)}:
			case <-ctx.Done():
				return ctx.Err()
			}
			l.cursor = store.JobChangeCursor{Tx: r.Tx, ID: r.ID}
		}
		if len(rows) < listenTailBatch {
			return nil
		}
	}
}
