package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// Per job costs.
//
// What is measured, exactly (bench/README.md says the same):
//   - statements: Query and Execute messages the system's clients sent,
//     counted by pgCounter, a proxy between them and Postgres
//     (pg_stat_statements is not loaded on the shared server and needs a
//     restart to be); round trips: Sync and Query messages;
//   - commits and rollbacks: pg_stat_database.xact_commit / xact_rollback
//     of the benchmark's own database, less the bench's own queries on it
//     (its completion polls, counted); read-only transactions count too;
//   - rows: pg_stat_database.tup_inserted / tup_updated / tup_deleted of
//     that database;
//   - WAL: pg_stat_wal (wal_records, wal_fpi, wal_bytes, wal_write,
//     wal_sync) and pg_current_wal_lsn(). These are CLUSTER-WIDE: other
//     databases on the same server (other engineers' tests) add to them.
//     Each phase first measures the cluster for one second with nothing of
//     its own running and prints that background rate; the median of the
//     repeated phases is reported.
//
// The statistics of a backend reach pg_stat_database when it goes idle (at
// most once a second) or exits: the counters are read on fresh connections
// after the measured system's connections closed.

// dbSnap is one reading of the counters.
type dbSnap struct {
	at                                         time.Time
	commits, rollbacks, tupIns, tupUpd, tupDel int64
	walRecords, walFPI, walBytes               int64
	walWrite, walSync, lsn                     int64
	otherActive                                int64 // active client backends in other databases
}

func takeSnap(ctx context.Context, dbURL string) (dbSnap, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return dbSnap{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	s := dbSnap{at: time.Now()}
	err = conn.QueryRow(ctx, `SELECT d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted,
			w.wal_records, w.wal_fpi, w.wal_bytes::bigint, w.wal_write, w.wal_sync,
			pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
			(SELECT count(*) FROM pg_stat_activity a WHERE a.state = 'active' AND a.backend_type = 'client backend'
				AND a.datname IS DISTINCT FROM current_database() AND a.pid <> pg_backend_pid())
		FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()`).
		Scan(&s.commits, &s.rollbacks, &s.tupIns, &s.tupUpd, &s.tupDel,
			&s.walRecords, &s.walFPI, &s.walBytes, &s.walWrite, &s.walSync, &s.lsn, &s.otherActive)
	return s, err
}

// background is what the cluster wrote while the benchmark was idle.
type background struct {
	lsnPerSec, syncPerSec float64
	otherActive           int64
}

// quietWindow reads the counters twice, a second apart, with nothing of
// the benchmark running: the second reading is the phase's "before", the
// difference the cluster's background rate. The second also lets the
// backends of connections closed just before exit and report.
func quietWindow(ctx context.Context, dbURL string) (dbSnap, background, error) {
	a, err := takeSnap(ctx, dbURL)
	if err != nil {
		return dbSnap{}, background{}, err
	}
	select {
	case <-ctx.Done():
		return dbSnap{}, background{}, ctx.Err()
	case <-time.After(time.Second):
	}
	b, err := takeSnap(ctx, dbURL)
	if err != nil {
		return dbSnap{}, background{}, err
	}
	sec := b.at.Sub(a.at).Seconds()
	return b, background{
		lsnPerSec:   float64(b.lsn-a.lsn) / sec,
		syncPerSec:  float64(b.walSync-a.walSync) / sec,
		otherActive: max(a.otherActive, b.otherActive),
	}, nil
}

// costSample is one cost phase of one system.
type costSample struct {
	system                                     string
	jobs                                       int
	elapsed                                    time.Duration
	proto                                      protoCounts
	commits, rollbacks, tupIns, tupUpd, tupDel int64
	walRecords, walFPI, walBytes               int64
	walWrite, walSync, lsnBytes                int64
	bg                                         background
}

// costBetween is the sample of a phase between before and after, less
// benchTxns transactions the bench itself ran on the database.
func costBetween(system string, jobs int, elapsed time.Duration, proto protoCounts, before, after dbSnap, benchTxns int64, bg background) costSample {
	return costSample{
		system: system, jobs: jobs, elapsed: elapsed, proto: proto, bg: bg,
		commits:    after.commits - before.commits - benchTxns,
		rollbacks:  after.rollbacks - before.rollbacks,
		tupIns:     after.tupIns - before.tupIns,
		tupUpd:     after.tupUpd - before.tupUpd,
		tupDel:     after.tupDel - before.tupDel,
		walRecords: after.walRecords - before.walRecords,
		walFPI:     after.walFPI - before.walFPI,
		walBytes:   after.walBytes - before.walBytes,
		walWrite:   after.walWrite - before.walWrite,
		walSync:    after.walSync - before.walSync,
		lsnBytes:   after.lsn - before.lsn,
	}
}

// perJob are the figures of one sample per job.
type perJob struct {
	statements, roundTrips, commits, rollbacks, rowsWritten float64
	walRecords, walBytes, lsnBytes, walWrites, walSyncs     float64
	bgBytes, bgSyncs                                        float64 // the background rate over the phase's time, per job
	rate                                                    float64 // jobs/s through the proxy (reference)
}

func (s costSample) perJob() perJob {
	n := float64(s.jobs)
	sec := s.elapsed.Seconds()
	return perJob{
		statements:  float64(s.proto.statements()) / n,
		roundTrips:  float64(s.proto.roundTrips()) / n,
		commits:     float64(s.commits) / n,
		rollbacks:   float64(s.rollbacks) / n,
		rowsWritten: float64(s.tupIns+s.tupUpd+s.tupDel) / n,
		walRecords:  float64(s.walRecords) / n,
		walBytes:    float64(s.walBytes) / n,
		lsnBytes:    float64(s.lsnBytes) / n,
		walWrites:   float64(s.walWrite) / n,
		walSyncs:    float64(s.walSync) / n,
		bgBytes:     s.bg.lsnPerSec * sec / n,
		bgSyncs:     s.bg.syncPerSec * sec / n,
		rate:        n / sec,
	}
}

// medianPerJob is the per-field median of the samples of one system.
func medianPerJob(samples []costSample) perJob {
	var rows []perJob
	for _, s := range samples {
		rows = append(rows, s.perJob())
	}
	m := func(f func(perJob) float64) float64 {
		var v []float64
		for _, r := range rows {
			v = append(v, f(r))
		}
		return median(v)
	}
	return perJob{
		statements:  m(func(r perJob) float64 { return r.statements }),
		roundTrips:  m(func(r perJob) float64 { return r.roundTrips }),
		commits:     m(func(r perJob) float64 { return r.commits }),
		rollbacks:   m(func(r perJob) float64 { return r.rollbacks }),
		rowsWritten: m(func(r perJob) float64 { return r.rowsWritten }),
		walRecords:  m(func(r perJob) float64 { return r.walRecords }),
		walBytes:    m(func(r perJob) float64 { return r.walBytes }),
		lsnBytes:    m(func(r perJob) float64 { return r.lsnBytes }),
		walWrites:   m(func(r perJob) float64 { return r.walWrites }),
		walSyncs:    m(func(r perJob) float64 { return r.walSyncs }),
		bgBytes:     m(func(r perJob) float64 { return r.bgBytes }),
		bgSyncs:     m(func(r perJob) float64 { return r.bgSyncs }),
		rate:        m(func(r perJob) float64 { return r.rate }),
	}
}

// median of v (the mean of the middle two for an even count); 0 if empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pgHostPort is the host:port of the -pg server.
func pgHostPort(pgURL string) (string, error) {
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", err
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", fmt.Errorf("-pg %q: no host (the cost phases put a proxy in front of a TCP server)", pgURL)
	}
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(host, port), nil
}

// viaProxy is the URL of database db on the -pg server through the proxy
// at addr.
func viaProxy(pgURL, addr, db string) (string, error) {
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", err
	}
	u.Host = addr
	u.Path = "/" + db
	u.RawQuery = "sslmode=disable"
	return u.String(), nil
}

// costPhase runs -cost-jobs light jobs with one worker process connected
// through the counting proxy.
func (e *engineBench) costPhase(ctx context.Context, i int) (costSample, error) {
	c := e.c
	sc := lightScenario(c.costJobs)
	tag := fmt.Sprintf("cost-light-%d", i+1)
	p, err := e.prepare(ctx, tag, sc, 1, nil)
	if err != nil {
		return costSample{}, err
	}
	callsBefore := p.callsBefore
	p.pool.Close() // its backends exit and report their statistics
	dbURL := c.pgURL + "/" + c.db + "?sslmode=disable"
	upstream, err := pgHostPort(c.pgURL)
	if err != nil {
		return costSample{}, err
	}

	before, bg, err := quietWindow(ctx, dbURL)
	if err != nil {
		return costSample{}, err
	}
	proxy, err := startPGCounter(upstream)
	if err != nil {
		return costSample{}, err
	}
	defer proxy.close()
	workerURL, err := viaProxy(c.pgURL, proxy.addr(), c.db)
	if err != nil {
		return costSample{}, err
	}
	poll, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return costSample{}, err
	}
	logf("%s: one worker process through the counting proxy, --workers %d", tag, c.workers)
	elapsed, polls, err := e.runWorkers(ctx, poll, workerRun{tag: tag, procs: 1, workers: c.workers, url: workerURL, total: c.warmupJobs + sc.jobs})
	if err == nil {
		err = e.checkCalls(ctx, poll, callsBefore, int64(sc.jobs))
		polls++
	}
	poll.Close(context.WithoutCancel(ctx))
	if err != nil {
		return costSample{}, err
	}
	counts := proxy.counts()
	time.Sleep(1100 * time.Millisecond) // the closed backends report
	after, err := takeSnap(ctx, dbURL)
	if err != nil {
		return costSample{}, err
	}
	// The bench's own transactions: its polls, and the "before" reading.
	s := costBetween(sysEngine, sc.jobs, elapsed, counts, before, after, int64(polls)+1, bg)
	pj := s.perJob()
	logf("%s: %.1f statements, %.1f commits, %.2f WAL syncs, %.0f WAL bytes per job (background %.0f B/s)",
		tag, pj.statements, pj.commits, pj.walSyncs, pj.lsnBytes, bg.lsnPerSec)
	return s, nil
}
