package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The account (-account, issue 33): what each statement of a light job
// costs Postgres, beside River's same-work job, read from
// pg_stat_statements in a throwaway cluster of the bench's own (cluster.go):
// per job, for each statement, its calls, execution and planning time,
// shared buffers hit and dirtied, WAL records, bytes and full-page images.
// With pg_stat_statements.track = all the statements run by triggers and
// functions are counted too, as rows of their own (nested): their cost is
// also in the statement that fired them, so the totals add the top-level
// statements only. The measured processes connect as a role of their own
// (accountRole), so the bench's own polls and settling are left out.
// Four accounts, each from a reset of pg_stat_statements:
//   - SubmitJob: the measured jobs submitted through SubmitJob (ghz,
//     -submit-c), new keys, to `oncejob serve --workers 0`;
//   - the light job: the same jobs run by one `oncejob worker` (--workers
//     -workers), from its start to the last job SUCCEEDED;
//   - River same-work: as many River same-work jobs (riversame.go), from
//     client.Start to the last completion;
//   - the relayed event (relayaccount.go): the events the light jobs left
//     in the outbox routed by one `oncejob relay` to JetStream, per event.
// Each also reads the cluster's WAL (pg_stat_wal; the cluster is the
// bench's alone, autovacuum off) and the CPU of the Postgres processes.

// accountRole is the role the measured processes connect as.
const accountRole = "oncejob_account"

// stmtRow is one pg_stat_statements entry, or the sum of several.
type stmtRow struct {
	label                                 string
	toplevel                              bool
	calls, rows, hit, dirtied, walRecords int64
	walFPI                                int64
	execMS, planMS, walBytes              float64
}

func (r *stmtRow) add(o stmtRow) {
	r.calls += o.calls
	r.rows += o.rows
	r.hit += o.hit
	r.dirtied += o.dirtied
	r.walRecords += o.walRecords
	r.walFPI += o.walFPI
	r.execMS += o.execMS
	r.planMS += o.planMS
	r.walBytes += o.walBytes
}

// walStat is a reading of pg_stat_wal, and the insert position then.
type walStat struct {
	records, fpi, bytes int64
	lsn                 string
}

// walRel is the WAL of one relation of the measured database by record
// type (pg_walinspect): what its rows and index entries cost.
type walRel struct {
	rel, record          string
	count, bytes, fpiLen int64
}

// account is one system's statements over n jobs.
type account struct {
	what    string
	jobs    int
	elapsed time.Duration
	stmts   []stmtRow
	wal     walStat // the cluster's, over the run
	walRels []walRel
	pgCPU   time.Duration
}

// runAccount starts the throwaway cluster, runs the three accounts on it and
// prints them; the cluster is removed at the end.
func runAccount(ctx context.Context, c config, tmp, bin string, befores []builtTree, pipelines string) error {
	cl, err := startThrowaway(ctx, true)
	if err != nil {
		return err
	}
	defer cl.close()
	c.pgURL = cl.url()
	logf("account: throwaway Postgres on %s (pg_stat_statements, track = all), removed at the end", c.pgURL)
	admin, err := pgx.Connect(ctx, c.pgURL+"/postgres?sslmode=disable")
	if err != nil {
		return err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE EXTENSION pg_stat_statements; CREATE EXTENSION pg_walinspect`); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, `CREATE ROLE `+accountRole+` LOGIN SUPERUSER`); err != nil {
		return err
	}
	sim, simAddr, err := startSim(ctx, c, tmp, bin)
	if err != nil {
		return err
	}
	defer sim.stop()
	e := &engineBench{c: c, bin: bin, tmp: tmp, pipelines: pipelines, admin: admin, simURL: "http://" + simAddr,
		simPID: sim.cmd.Process.Pid, appUser: accountRole}

	for _, b := range befores {
		e.befores = append(e.befores, &engineBench{c: c, bin: b.bin, tmp: tmp, pipelines: pipelines, admin: admin, simURL: e.simURL,
			simPID: e.simPID, appUser: accountRole, system: b.label})
	}
	var lights, submits, relayed []account
	for _, eb := range e.engines() {
		submitAcc, lightAcc, relayAcc, err := eb.accountLight(ctx)
		if err != nil {
			return fmt.Errorf("account, %s: %w", eb.sys(), err)
		}
		lights, submits = append(lights, lightAcc), append(submits, submitAcc)
		if relayAcc.jobs > 0 {
			relayed = append(relayed, relayAcc)
		}
	}
	sameAcc, err := e.accountRiverSame(ctx)
	if err != nil {
		return fmt.Errorf("account, River same-work: %w", err)
	}
	printAccounts(os.Stdout, c, append(append(append(lights, sameAcc), submits...), relayed...))
	return nil
}

// accountReset empties pg_stat_statements and returns the cluster's WAL so
// far.
func (e *engineBench) accountReset(ctx context.Context) (walStat, error) {
	if _, err := e.admin.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return walStat{}, err
	}
	return readWALStat(ctx, e.admin)
}

func readWALStat(ctx context.Context, q *pgx.Conn) (walStat, error) {
	var w walStat
	err := q.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::bigint, pg_current_wal_insert_lsn()::text FROM pg_stat_wal`).
		Scan(&w.records, &w.fpi, &w.bytes, &w.lsn)
	return w, err
}

// accountLight submits -account-jobs light jobs (the SubmitJob account),
// runs them with one worker process (the light job's account), and, unless
// -nats is empty, has their events relayed (accountRelay).
func (e *engineBench) accountLight(ctx context.Context) (submitAcc, lightAcc, relayAcc account, err error) {
	c := e.c
	sc := lightScenario(c.accountJobs)
	var walBefore walStat
	before := func(*pgxpool.Pool) error {
		var err error
		walBefore, err = e.accountReset(ctx)
		return err
	}
	e.afterSubmit = func(ctx context.Context) error {
		var err error
		submitAcc, err = e.readAccount(ctx, "SubmitJob, new key"+e.suffix(), c.db, sc.jobs, walBefore)
		return err
	}
	defer func() { e.afterSubmit = nil }()
	p, err := e.prepare(ctx, "account-light", sc, 1, before)
	if err != nil {
		return submitAcc, lightAcc, relayAcc, err
	}
	defer p.pool.Close()
	if walBefore, err = e.accountReset(ctx); err != nil {
		return submitAcc, lightAcc, relayAcc, err
	}
	logf("account-light: one worker process, --workers %d", c.workers)
	elapsed, _, err := e.runWorkers(ctx, p.pool, workerRun{tag: "account-light", procs: 1, workers: c.workers, total: c.warmupJobs + sc.jobs})
	if err != nil {
		return submitAcc, lightAcc, relayAcc, err
	}
	if err := e.checkCalls(ctx, p.pool, p.callsBefore, int64(sc.jobs)); err != nil {
		return submitAcc, lightAcc, relayAcc, err
	}
	lightAcc, err = e.readAccount(ctx, "oncejob light job"+e.suffix(), c.db, sc.jobs, walBefore)
	lightAcc.elapsed, lightAcc.pgCPU = elapsed, e.lastCPU.postgres
	if err != nil || c.natsURL == "" {
		return submitAcc, lightAcc, relayAcc, err
	}
	relayAcc, err = e.accountRelay(ctx, p.pool)
	return submitAcc, lightAcc, relayAcc, err
}

// suffix marks a -before tree's accounts.
func (e *engineBench) suffix() string {
	if e.system == "" || e.system == sysEngine {
		return ""
	}
	return " " + strings.TrimPrefix(e.system, sysEngine+" ")
}

// accountRiverSame runs -account-jobs River same-work jobs.
func (e *engineBench) accountRiverSame(ctx context.Context) (account, error) {
	var walBefore walStat
	r, _, err := e.riverPhase(ctx, riverRun{name: "account", n: e.c.accountJobs, kind: riverSame,
		beforeStart: func(ctx context.Context) error {
			var err error
			walBefore, err = e.accountReset(ctx)
			return err
		}})
	if err != nil {
		return account{}, err
	}
	a, err := e.readAccount(ctx, "River same-work job", e.c.riverDB, e.c.accountJobs, walBefore)
	a.elapsed, a.pgCPU = r.elapsed, r.pgCPU
	return a, err
}

// readAccount reads the statements the measured role ran in database db
// since the last reset, and the cluster's WAL since walBefore.
func (e *engineBench) readAccount(ctx context.Context, what, db string, jobs int, walBefore walStat) (account, error) {
	a := account{what: what, jobs: jobs}
	rows, err := e.admin.Query(ctx, `SELECT s.query, s.toplevel, s.calls, s.rows, s.total_exec_time, s.total_plan_time,
			s.shared_blks_hit, s.shared_blks_dirtied, s.wal_records, s.wal_fpi, s.wal_bytes::float8
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 AND s.userid = $2::regrole`, db, accountRole)
	if err != nil {
		return a, err
	}
	byLabel := map[string]*stmtRow{}
	for rows.Next() {
		var q string
		var r stmtRow
		if err := rows.Scan(&q, &r.toplevel, &r.calls, &r.rows, &r.execMS, &r.planMS, &r.hit, &r.dirtied, &r.walRecords, &r.walFPI, &r.walBytes); err != nil {
			rows.Close()
			return a, err
		}
		r.label = stmtLabel(q)
		k := fmt.Sprintf("%t %s", r.toplevel, r.label)
		if byLabel[k] == nil {
			byLabel[k] = &stmtRow{label: r.label, toplevel: r.toplevel}
		}
		byLabel[k].add(r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return a, err
	}
	for _, r := range byLabel {
		a.stmts = append(a.stmts, *r)
	}
	sort.Slice(a.stmts, func(i, j int) bool {
		x, y := a.stmts[i], a.stmts[j]
		if x.toplevel != y.toplevel {
			return x.toplevel
		}
		if x.execMS+x.planMS != y.execMS+y.planMS {
			return x.execMS+x.planMS > y.execMS+y.planMS
		}
		return x.label < y.label
	})
	w, err := readWALStat(ctx, e.admin)
	if err != nil {
		return a, err
	}
	a.wal = walStat{records: w.records - walBefore.records, fpi: w.fpi - walBefore.fpi, bytes: w.bytes - walBefore.bytes}
	a.walRels, err = e.walByRelation(ctx, db, walBefore.lsn, w.lsn)
	return a, err
}

// walByRelation reads the WAL between two LSNs that names a relation of
// database db (the first block reference of each record), by relation and
// record type; records of a relation the database no longer has are
// "(dropped)".
func (e *engineBench) walByRelation(ctx context.Context, db, from, to string) ([]walRel, error) {
	if _, err := e.admin.Exec(ctx, `SELECT pg_switch_wal()`); err != nil { // pg_walinspect reads flushed WAL
		return nil, err
	}
	conn, err := pgx.Connect(ctx, e.c.pgURL+"/"+db+"?sslmode=disable")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `WITH r AS (
			SELECT resource_manager || ':' || record_type AS record, record_length, fpi_length,
				(regexp_match(block_ref, 'rel \d+/(\d+)/(\d+)')) AS m
			FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
		)
		SELECT coalesce((SELECT c.relname::text FROM pg_class c WHERE pg_relation_filenode(c.oid) = r.m[2]::oid), '(dropped) ' || r.m[2]),
			r.record, count(*), sum(r.record_length)::bigint, sum(r.fpi_length)::bigint
		FROM r
		WHERE r.m[1]::oid = (SELECT oid FROM pg_database WHERE datname = current_database())
		GROUP BY 1, 2 ORDER BY 4 DESC`, from, to)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (walRel, error) {
		var w walRel
		err := r.Scan(&w.rel, &w.record, &w.count, &w.bytes, &w.fpiLen)
		return w, err
	})
}

var (
	sqlcName   = regexp.MustCompile(`--\s*name:\s*(\w+)`)
	sqlComment = regexp.MustCompile(`--[^\n]*`)
	spaces     = regexp.MustCompile(`\s+`)
)

// stmtLabel names a statement: its sqlc name (oncejob's and River's
// queries are sqlc's), else its first words.
func stmtLabel(q string) string {
	if m := sqlcName.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	s := strings.TrimSpace(spaces.ReplaceAllString(sqlComment.ReplaceAllString(q, " "), " "))
	if len(s) > 72 {
		s = s[:69] + "..."
	}
	return strings.ReplaceAll(s, "|", "/")
}

// printAccounts writes each account as a markdown table, per job, then the
// totals side by side.
func printAccounts(w io.Writer, c config, accs []account) {
	fmt.Fprintf(w, "\n## Account (issue 33): %d jobs each, per job; throwaway Postgres, pg_stat_statements track = all\n\n", c.accountJobs)
	fmt.Fprintf(w, "oncejob: `oncejob worker --workers %d --poll-interval %s` (one process); SubmitJob: ghz -c %d to `oncejob serve --workers 0`;\n",
		c.workers, c.pollInterval, c.submitC)
	fmt.Fprintf(w, "River %s: MaxWorkers %d, riverbench's fetch settings. Times in ms per job; buffers, WAL in units per job.\n", riverVersion(), c.riverMaxWorkers)
	fmt.Fprintf(w, "A relayed event's account is per event (its \"jobs\" are events): `oncejob relay` (one loop, --relay-batch-size 100) routing the light jobs' events to a JetStream stream.\n")
	fmt.Fprintf(w, "A nested statement (run by a trigger or a function) is also counted in the statement that fired it; totals add top-level ones.\n")
	for _, a := range accs {
		printAccount(w, a)
	}
	fmt.Fprintf(w, "\n| per job | %s |\n|---|%s\n", strings.Join(accNames(accs), " | "), strings.Repeat("---:|", len(accs)))
	row := func(name string, f func(a account, t stmtRow) string) {
		fmt.Fprintf(w, "| %s |", name)
		for _, a := range accs {
			fmt.Fprintf(w, " %s |", f(a, a.total()))
		}
		fmt.Fprintln(w)
	}
	per := func(a account, v float64) float64 { return v / float64(a.jobs) }
	row("statements (top level)", func(a account, t stmtRow) string { return fmt.Sprintf("%.2f", per(a, float64(t.calls))) })
	row("exec + plan ms", func(a account, t stmtRow) string { return fmt.Sprintf("%.3f", per(a, t.execMS+t.planMS)) })
	row("shared buffers hit", func(a account, t stmtRow) string { return fmt.Sprintf("%.0f", per(a, float64(t.hit))) })
	row("shared buffers dirtied", func(a account, t stmtRow) string { return fmt.Sprintf("%.1f", per(a, float64(t.dirtied))) })
	row("WAL records (statements)", func(a account, t stmtRow) string { return fmt.Sprintf("%.1f", per(a, float64(t.walRecords))) })
	row("WAL bytes (statements)", func(a account, t stmtRow) string { return fmt.Sprintf("%.0f", per(a, t.walBytes)) })
	row("WAL bytes (cluster, pg_stat_wal)", func(a account, _ stmtRow) string { return fmt.Sprintf("%.0f", per(a, float64(a.wal.bytes))) })
	row("WAL records (cluster)", func(a account, _ stmtRow) string { return fmt.Sprintf("%.1f", per(a, float64(a.wal.records))) })
	row("full-page images (cluster)", func(a account, _ stmtRow) string { return fmt.Sprintf("%.2f", per(a, float64(a.wal.fpi))) })
	row("Postgres CPU (all its processes)", func(a account, _ stmtRow) string {
		if a.pgCPU == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f ms", per(a, float64(a.pgCPU))/1e6)
	})
	row("jobs/s (pg_stat_statements on)", func(a account, _ stmtRow) string {
		if a.elapsed == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", float64(a.jobs)/a.elapsed.Seconds())
	})
	fmt.Fprintf(w, "\nthe cluster's WAL beyond the statements' is mostly commit records; the SubmitJob account's Postgres CPU is not read\n")
}

func accNames(accs []account) []string {
	var s []string
	for _, a := range accs {
		s = append(s, a.what)
	}
	return s
}

// total sums the top-level statements.
func (a account) total() stmtRow {
	var t stmtRow
	for _, r := range a.stmts {
		if r.toplevel {
			t.add(r)
		}
	}
	return t
}

func printAccount(w io.Writer, a account) {
	n := float64(a.jobs)
	fmt.Fprintf(w, "\n### %s\n\n", a.what)
	fmt.Fprintf(w, "| statement | calls | exec ms | plan ms | buffers hit | dirtied | WAL records | WAL bytes | FPI |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	line := func(label string, r stmtRow) {
		fmt.Fprintf(w, "| %s | %.3f | %.4f | %.4f | %.1f | %.2f | %.2f | %.0f | %.3f |\n", label,
			float64(r.calls)/n, r.execMS/n, r.planMS/n, float64(r.hit)/n, float64(r.dirtied)/n,
			float64(r.walRecords)/n, r.walBytes/n, float64(r.walFPI)/n)
	}
	for _, r := range a.stmts {
		label := r.label
		if !r.toplevel {
			label = "↳ (nested) " + label
		}
		if r.toplevel && r.calls < int64(a.jobs)/100 && r.execMS+r.planMS < 0.001*n && r.walBytes < n {
			continue // less than 1 call in 100 jobs, 1 µs and 1 byte of WAL a job: in the total
		}
		if !r.toplevel && r.execMS+r.planMS < 0.02*n && r.walBytes < n {
			continue // a function's expressions: under 20 µs and 1 byte of WAL a job
		}
		line(label, r)
	}
	line("**total (top level)**", a.total())
	if len(a.walRels) == 0 {
		return
	}
	fmt.Fprintf(w, "\nWAL of the database's relations (pg_walinspect; a record's first block; commit records name none):\n\n")
	fmt.Fprintf(w, "| relation | record | records | bytes | of which FPI |\n|---|---|---:|---:|---:|\n")
	var count, bytes, fpi int64
	for _, r := range a.walRels {
		count, bytes, fpi = count+r.count, bytes+r.bytes, fpi+r.fpiLen
		if float64(r.bytes)/n < 5 {
			continue // under 5 bytes a job: in the total
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %.0f | %.0f |\n", r.rel, r.record, float64(r.count)/n, float64(r.bytes)/n, float64(r.fpiLen)/n)
	}
	fmt.Fprintf(w, "| **total** | | %.2f | %.0f | %.0f |\n", float64(count)/n, float64(bytes)/n, float64(fpi)/n)
}
