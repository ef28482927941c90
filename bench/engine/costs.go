package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Per job costs.
//
// What is measured, exactly (bench/README.md says the same):
//   - statements: CommandComplete and ErrorResponse messages the server
//     sent the system's clients, counted by pgCounter, a proxy between them
//     and Postgres (pg_stat_statements is not loaded on the shared server
//     and needs a restart to be); requests: the Query and Execute messages
//     they sent; round trips: Sync and Query messages;
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
	lsnText                                    string
	dbOID                                      uint32
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
			pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, pg_current_wal_lsn()::text, d.datid,
			(SELECT count(*) FROM pg_stat_activity a WHERE a.state = 'active' AND a.backend_type = 'client backend'
				AND a.datname IS DISTINCT FROM current_database() AND a.pid <> pg_backend_pid())
		FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()`).
		Scan(&s.commits, &s.rollbacks, &s.tupIns, &s.tupUpd, &s.tupDel,
			&s.walRecords, &s.walFPI, &s.walBytes, &s.walWrite, &s.walSync, &s.lsn, &s.lsnText, &s.dbOID, &s.otherActive)
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
	db                                         dbWAL // this database's share of the WAL
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
	statements, requests, roundTrips, commits, rollbacks, rowsWritten float64
	walRecords, walBytes, lsnBytes, walWrites, walSyncs               float64
	dbRecords, dbBytes, dbFPIBytes, dbWriteCommits                    float64 // this database's WAL (pg_walinspect); -1: not read
	bgBytes, bgSyncs                                                  float64 // the background rate over the phase's time, per job
	rate                                                              float64 // jobs/s through the proxy (reference)
}

func (s costSample) perJob() perJob {
	n := float64(s.jobs)
	sec := s.elapsed.Seconds()
	pj := perJob{
		statements:     float64(s.proto.statements()) / n,
		requests:       float64(s.proto.requests()) / n,
		roundTrips:     float64(s.proto.roundTrips()) / n,
		commits:        float64(s.commits) / n,
		rollbacks:      float64(s.rollbacks) / n,
		rowsWritten:    float64(s.tupIns+s.tupUpd+s.tupDel) / n,
		walRecords:     float64(s.walRecords) / n,
		walBytes:       float64(s.walBytes) / n,
		lsnBytes:       float64(s.lsnBytes) / n,
		walWrites:      float64(s.walWrite) / n,
		walSyncs:       float64(s.walSync) / n,
		dbRecords:      -1,
		dbBytes:        -1,
		dbFPIBytes:     -1,
		dbWriteCommits: -1,
		bgBytes:        s.bg.lsnPerSec * sec / n,
		bgSyncs:        s.bg.syncPerSec * sec / n,
		rate:           n / sec,
	}
	if s.db.ok {
		pj.dbRecords = float64(s.db.records) / n
		pj.dbBytes = float64(s.db.bytes) / n
		pj.dbFPIBytes = float64(s.db.fpiBytes) / n
		pj.dbWriteCommits = float64(s.db.writeCommits) / n
	}
	return pj
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
		statements:     m(func(r perJob) float64 { return r.statements }),
		requests:       m(func(r perJob) float64 { return r.requests }),
		roundTrips:     m(func(r perJob) float64 { return r.roundTrips }),
		commits:        m(func(r perJob) float64 { return r.commits }),
		rollbacks:      m(func(r perJob) float64 { return r.rollbacks }),
		rowsWritten:    m(func(r perJob) float64 { return r.rowsWritten }),
		walRecords:     m(func(r perJob) float64 { return r.walRecords }),
		walBytes:       m(func(r perJob) float64 { return r.walBytes }),
		lsnBytes:       m(func(r perJob) float64 { return r.lsnBytes }),
		walWrites:      m(func(r perJob) float64 { return r.walWrites }),
		walSyncs:       m(func(r perJob) float64 { return r.walSyncs }),
		dbRecords:      m(func(r perJob) float64 { return r.dbRecords }),
		dbBytes:        m(func(r perJob) float64 { return r.dbBytes }),
		dbFPIBytes:     m(func(r perJob) float64 { return r.dbFPIBytes }),
		dbWriteCommits: m(func(r perJob) float64 { return r.dbWriteCommits }),
		bgBytes:        m(func(r perJob) float64 { return r.bgBytes }),
		bgSyncs:        m(func(r perJob) float64 { return r.bgSyncs }),
		rate:           m(func(r perJob) float64 { return r.rate }),
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
	inspect := enableWALInspect(ctx, p.pool)
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
	s := costBetween(e.sys(), sc.jobs, elapsed, counts, before, after, int64(polls)+1, bg)
	if inspect {
		s.db = readDBWAL(ctx, dbURL, before, after)
	}
	pj := s.perJob()
	logf("%s: %.1f statements, %.1f commits, %.2f WAL syncs (cluster), %.0f WAL bytes (this database) per job",
		tag, pj.statements, pj.commits, pj.walSyncs, pj.dbBytes)
	return s, nil
}

// dbWAL is one database's share of a range of WAL, read with pg_walinspect
// (PostgreSQL 15 contrib): the records whose block references name the
// database (rel <tablespace>/<database oid>/<relation>), and the
// records, commits included, of the transactions that wrote them. Records
// of the cluster (checkpoints, running transactions) and of other
// databases are left out, so other engineers' work on the same server does
// not count. writeCommits is the number of those transactions' commit
// records: each one, with synchronous_commit on, waited for a WAL flush
// (its own, or one that covered several commits).
type dbWAL struct {
	ok                                     bool
	records, bytes, fpiBytes, writeCommits int64
}

// walInspectSQL reads the WAL between two LSNs for the database oid $3.
const walInspectSQL = `WITH r AS (
	SELECT xid::text AS xid, record_length, fpi_length, resource_manager, record_type,
		coalesce(block_ref, '') ~ ('rel [0-9]+/' || $3::text || '/') AS ours
	FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
), x AS (
	SELECT DISTINCT xid FROM r WHERE ours AND xid <> '0'
)
SELECT count(*), coalesce(sum(record_length), 0), coalesce(sum(fpi_length), 0),
	count(*) FILTER (WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%')
FROM r WHERE ours OR (xid <> '0' AND xid IN (SELECT xid FROM x))`

// enableWALInspect creates pg_walinspect in the phase's database; false if
// the server does not have it (the per-database WAL columns are then n/a).
func enableWALInspect(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) bool {
	_, err := q.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
	if err != nil {
		logf("pg_walinspect: %v (per-database WAL not measured)", err)
	}
	return err == nil
}

// readDBWAL is the database's share of the WAL from before to after.
func readDBWAL(ctx context.Context, dbURL string, before, after dbSnap) dbWAL {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return dbWAL{}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var w dbWAL
	if err := conn.QueryRow(ctx, walInspectSQL, before.lsnText, after.lsnText, strconv.FormatUint(uint64(before.dbOID), 10)).
		Scan(&w.records, &w.bytes, &w.fpiBytes, &w.writeCommits); err != nil {
		logf("pg_walinspect: %v (per-database WAL not measured)", err)
		return dbWAL{}
	}
	w.ok = true
	return w
}
