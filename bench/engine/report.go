package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets of issue 12 (docs/performance.md, "Engine").
const (
	targetLightOverSame     = 1.5 // issue 33
	targetLightOverDurable  = 1.5
	targetLightOverNoop     = 0.1
	targetRealisticOverLite = 0.4
	targetStatementsPerJob  = 4
	targetWALSyncsPerJob    = 2
	targetWALFraction       = 1.0 / 3
	targetInflightRatio     = 0.9
	targetInflightBytes     = 64 << 10
	targetEmbeddedRate      = 1000
)

type report struct {
	c                     config
	results               []result
	stats                 []stmtStats
	costs                 []costSample
	inflight              *inflightResult
	loadBefore, loadAfter string
}

// verdict prints one target line and adds it to missed when not met.
type verdicts struct {
	w      io.Writer
	missed []string
}

func (v *verdicts) check(name string, got string, met bool, target string) {
	s := "MET"
	if !met {
		s = "NOT MET"
		v.missed = append(v.missed, name)
	}
	fmt.Fprintf(v.w, "  %-44s %-22s target %-16s %s\n", name, got, target, s)
}

// print writes the tables and the targets; it returns the targets missed.
func (r *report) print(w io.Writer) []string {
	r.printHeader(w)
	rate := r.printResults(w)
	r.printStatements(w)
	costs := r.printCosts(w)
	r.printInflight(w)
	return r.printTargets(w, rate, costs)
}

// printHeader writes the engine's and River's settings.
func (r *report) printHeader(w io.Writer) {
	c := r.c
	workers := "--workers " + strconv.Itoa(c.workers)
	if c.workers <= 0 {
		workers = "--workers the binary's default"
	}
	fmt.Fprintf(w, "\nengine: `oncejob worker` x processes, %s each, --poll-interval %s, pool_max_conns %s; simulator latency %s; more flags: %q\n",
		workers, c.pollInterval, poolDesc(c.poolMaxConns), c.simLatency, strings.Join(c.workerArgs, " "))
	fmt.Fprintf(w, "River %s: riverpgxv5, FetchCooldown 2ms, FetchPollInterval 20ms, MaxWorkers %d, pgxpool defaults;\n",
		riverVersion(), c.riverMaxWorkers)
	fmt.Fprintf(w, "  no-op: Work returns nil; durable: Work inserts a result row and an outbox row and calls JobCompleteTx, one transaction;\n")
	fmt.Fprintf(w, "  same-work: a journal row and a claimed event (commit), one call to the same llm-sim, then the journal's answer, a checkpoint,\n")
	fmt.Fprintf(w, "  the result, an outbox row and a published event with JobCompleteTx (commit): the light job's work\n\n")
}

// printResults writes the throughput table and the wait events of each
// phase; it returns the best rate per system and scenario.
func (r *report) printResults(w io.Writer) map[string]float64 {
	rate := map[string]float64{} // best rate per system and scenario
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "scenario\t system\t processes\t jobs\t time\t jobs/s\t Postgres CPU/job\t CPU/job of the process\t")
	for _, x := range r.results {
		procs := strconv.Itoa(x.processes)
		if x.system == sysRiver || x.system == sysRiverDurable || x.system == sysRiverSame {
			procs = "in-process"
		}
		cpu := ""
		if x.cpu > 0 {
			cpu = fmt.Sprintf("%s (machine %.0f%% busy)", (x.cpu / time.Duration(x.jobs)).Round(10*time.Microsecond), 100*x.machineBusy)
		}
		pg := ""
		if x.pgCPU > 0 {
			pg = (x.pgCPU / time.Duration(x.jobs)).Round(10 * time.Microsecond).String()
		}
		fmt.Fprintf(tw, "%s\t %s\t %s\t %d\t %s\t %.0f\t %s\t %s\t\n", x.scenario, x.system, procs, x.jobs,
			x.elapsed.Round(time.Millisecond), x.rate, pg, cpu)
		k := x.system + "/" + x.scenario
		rate[k] = max(rate[k], x.rate)
	}
	tw.Flush()

	first := true
	for _, x := range r.results {
		if x.waits == "" {
			continue
		}
		if first {
			fmt.Fprintf(w, "\nwait events of the database's active client backends during each phase (pg_stat_activity every 50 ms; CPU: none):\n")
			first = false
		}
		fmt.Fprintf(w, "  %s, %s: %s\n", x.scenario, x.system, x.waits)
	}
	return rate
}

// printStatements writes what Postgres counted per job in the throughput
// phases, when -statements-report asks for it.
func (r *report) printStatements(w io.Writer) {
	c := r.c
	if c.statementsReport && len(r.stats) > 0 {
		fmt.Fprintf(w, "\nthroughput phases, what Postgres counted per engine job (commits of the database, bench polls and autovacuum included; WAL cluster-wide) and CPU:\n\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintln(tw, "scenario\t processes\t commits/job\t rows ins/job\t rows upd/job\t WAL rec/job\t WAL bytes/job\t machine busy\t CPU/job: worker\t postgres\t simulator\t rest of machine\t")
		for _, s := range r.stats {
			n := float64(s.jobs)
			busy := s.cpu.machineBusy / max(s.cpu.machineTotal, 1)
			// jiffies are 1/100 s on Linux (USER_HZ).
			machineCPU := time.Duration(s.cpu.machineBusy * float64(10*time.Millisecond))
			other := machineCPU - s.cpu.workers - s.cpu.postgres - s.cpu.sim
			per := func(d time.Duration) string { return (d / time.Duration(s.jobs)).Round(10 * time.Microsecond).String() }
			fmt.Fprintf(tw, "%s\t %d\t %.1f\t %.1f\t %.1f\t %.0f\t %.0f\t %.0f%%\t %s\t %s\t %s\t %s\t\n", s.scenario, s.processes,
				float64(s.commits)/n, float64(s.rowsIns)/n, float64(s.rowsUpd)/n, float64(s.walRecords)/n, float64(s.walBytes)/n,
				100*busy, per(s.cpu.workers), per(s.cpu.postgres), per(s.cpu.sim), per(other))
		}
		tw.Flush()
	}
}

// printCosts writes the per job costs, the median per system; it returns
// them by system.
func (r *report) printCosts(w io.Writer) map[string]perJob {
	c := r.c
	costs := map[string]perJob{}
	if len(r.costs) > 0 {
		bySys := map[string][]costSample{}
		var order []string
		for _, s := range r.costs {
			if _, ok := bySys[s.system]; !ok {
				order = append(order, s.system)
			}
			bySys[s.system] = append(bySys[s.system], s)
		}
		fmt.Fprintf(w, "\nper job costs, light job, median of %d phase(s) of %d jobs per system, clients through a counting proxy:\n", c.costRepeats, c.costJobs)
		fmt.Fprintf(w, "  statements = CommandComplete + ErrorResponse messages from the server (pg_stat_statements is not loaded); requests =\n")
		fmt.Fprintf(w, "  Query + Execute messages the clients sent (a Query may hold several statements); round trips = Sync + Query;\n")
		fmt.Fprintf(w, "  commits, rows = pg_stat_database of the phase's own database (read-only transactions count; the bench's polls subtracted);\n")
		fmt.Fprintf(w, "  WAL (this database) = pg_walinspect: records naming the database's relations and their transactions' commits;\n")
		fmt.Fprintf(w, "  WAL (cluster) = pg_stat_wal and pg_current_wal_lsn(), CLUSTER-WIDE: other databases on this server (other engineers'\n")
		fmt.Fprintf(w, "  tests) add to them; 'background' is what the cluster wrote in a quiet second before the phase, scaled to its time\n\n")
		var ms []perJob
		for _, sys := range order {
			m := medianPerJob(bySys[sys])
			costs[sys] = m
			ms = append(ms, m)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprint(tw, "per job\t")
		for _, sys := range order {
			fmt.Fprintf(tw, " %s (%d)\t", sys, len(bySys[sys]))
		}
		fmt.Fprintln(tw)
		row := func(name, format string, f func(perJob) float64) {
			fmt.Fprintf(tw, "%s\t", name)
			for _, m := range ms {
				if v := f(m); v < 0 {
					fmt.Fprint(tw, " n/a\t")
				} else {
					fmt.Fprintf(tw, " "+format+"\t", v)
				}
			}
			fmt.Fprintln(tw)
		}
		row("statements", "%.2f", func(m perJob) float64 { return m.statements })
		row("requests (Query, Execute)", "%.2f", func(m perJob) float64 { return m.requests })
		row("round trips", "%.2f", func(m perJob) float64 { return m.roundTrips })
		row("commits", "%.2f", func(m perJob) float64 { return m.commits })
		row("rollbacks", "%.3f", func(m perJob) float64 { return m.rollbacks })
		row("rows written (ins+upd+del)", "%.1f", func(m perJob) float64 { return m.rowsWritten })
		row("WAL records (this database)", "%.1f", func(m perJob) float64 { return m.dbRecords })
		row("WAL bytes (this database)", "%.0f", func(m perJob) float64 { return m.dbBytes })
		row("  of which full-page images", "%.0f", func(m perJob) float64 { return m.dbFPIBytes })
		row("write commits (this database)", "%.2f", func(m perJob) float64 { return m.dbWriteCommits })
		row("WAL bytes (cluster, LSN)", "%.0f", func(m perJob) float64 { return m.lsnBytes })
		row("WAL writes (cluster)", "%.3f", func(m perJob) float64 { return m.walWrites })
		row("WAL flushes (cluster, wal_sync)", "%.3f", func(m perJob) float64 { return m.walSyncs })
		row("  background bytes (cluster)", "%.0f", func(m perJob) float64 { return m.bgBytes })
		row("  background flushes (cluster)", "%.3f", func(m perJob) float64 { return m.bgSyncs })
		row("jobs/s through the proxy", "%.0f", func(m perJob) float64 { return m.rate })
		tw.Flush()
		fmt.Fprintf(w, "  a write commit waits for a WAL flush (synchronous_commit on), its own or one shared with other commits: WAL flushes\n")
		fmt.Fprintf(w, "  caused by a system <= min(its write commits, the cluster's wal_sync)\n")
	}
	return costs
}

// printInflight writes the in-flight phase's tables, when it ran.
func (r *report) printInflight(w io.Writer) {
	c := r.c
	if in := r.inflight; in != nil {
		fmt.Fprintf(w, "\nin flight: %d light jobs, one worker process, --workers %d, --lease-duration %s, every LLM call %s\n\n",
			in.jobs, in.workers, c.inflightLease, in.latency)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintln(tw, "time\t jobs/s\t workers/latency\t RUNNING: mean\t peak\t time claimed (mean/rate)\t latency/time claimed\t LLM calls in flight: mean\t peak\t")
		fmt.Fprintf(tw, "%s\t %.0f\t %.0f\t %.0f\t %d\t %s\t %.3f\t %.0f\t %d\t\n",
			in.elapsed.Round(time.Millisecond), in.rate, in.ideal, in.meanRunning, in.peakRunning,
			in.claimed.Round(time.Millisecond), in.littleRatio, in.meanSimCalls, in.peakSimCalls)
		tw.Flush()
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintln(tw, "RSS idle\t RSS at peak RUNNING\t VmHWM\t per in-flight job: RSS at peak\t VmHWM\t Go heap+stacks\t")
		heap := "n/a"
		if in.peakHeap > 0 {
			heap = fmt.Sprintf("%.1f KiB", in.perJobHeap()/1024)
		}
		fmt.Fprintf(tw, "%.1f MiB\t %.1f MiB\t %.1f MiB\t %.1f KiB\t %.1f KiB\t %s\t\n",
			float64(in.idleRSS)/(1<<20), float64(in.rssAtPeak)/(1<<20), float64(in.hwm)/(1<<20), in.perJobRSS()/1024, in.perJobHWM()/1024, heap)
		tw.Flush()
		fmt.Fprintf(w, "  jobs/s = jobs / (worker start to the last finished_at); RUNNING polled every 50 ms; time claimed = mean RUNNING /\n")
		fmt.Fprintf(w, "  jobs/s (Little's law): latency / time claimed is 1.0 when the engine adds nothing to the LLM's wait.\n")
		fmt.Fprintf(w, "  per in-flight job: (VmRSS at the poll with the most jobs RUNNING, or VmHWM, the run's peak - VmRSS of the same\n")
		fmt.Fprintf(w, "  worker idle) / the most jobs RUNNING; the target is judged on VmHWM, the larger;\n")
		fmt.Fprintf(w, "  Go heap = live heap after the run's largest GC plus goroutine stacks (GODEBUG=gctrace=1), less the idle worker's\n")
		fmt.Fprintf(w, "  wait events of the database's active client backends (pg_stat_activity every 50 ms; CPU: none): %s\n", in.waits)
	}
}

// printTargets writes each target of issue 12 the results can judge and
// returns those not met.
func (r *report) printTargets(w io.Writer, rate map[string]float64, costs map[string]perJob) []string {
	c := r.c
	fmt.Fprintf(w, "\ntargets (issue 12):\n")
	v := &verdicts{w: w}
	light := rate[sysEngine+"/light"]
	if light > 0 {
		if sw := rate[sysRiverSame+"/light"]; sw > 0 {
			v.check("light / River same-work (issue 33)", fmt.Sprintf("%.3fx (%.0f / %.0f)", light/sw, light, sw), light/sw >= targetLightOverSame, fmt.Sprintf(">= %.1fx", targetLightOverSame))
		}
		if d := rate[sysRiverDurable+"/light"]; d > 0 {
			v.check("light / River durable", fmt.Sprintf("%.3fx (%.0f / %.0f)", light/d, light, d), light/d >= targetLightOverDurable, fmt.Sprintf(">= %.1fx", targetLightOverDurable))
		}
		if n := rate[sysRiver+"/light"]; n > 0 {
			v.check("light / River no-op", fmt.Sprintf("%.3fx (%.0f / %.0f)", light/n, light, n), light/n >= targetLightOverNoop, fmt.Sprintf(">= %.1fx", targetLightOverNoop))
		}
		if re := rate[sysEngine+"/realistic"]; re > 0 {
			v.check("realistic / light", fmt.Sprintf("%.3fx (%.0f / %.0f)", re/light, re, light), re/light >= targetRealisticOverLite, fmt.Sprintf(">= %.1fx", targetRealisticOverLite))
		}
	}
	if m, ok := costs[sysEngine]; ok {
		v.check("statements per light job", fmt.Sprintf("%.2f", m.statements), m.statements <= targetStatementsPerJob, fmt.Sprintf("<= %d", targetStatementsPerJob))
		flushes, how := m.walSyncs, "cluster wal_sync"
		if m.dbWriteCommits >= 0 && m.dbWriteCommits < flushes {
			flushes, how = m.dbWriteCommits, "write commits"
		}
		v.check("WAL flushes per light job (<= "+how+")", fmt.Sprintf("%.2f", flushes), flushes <= targetWALSyncsPerJob, fmt.Sprintf("<= %d", targetWALSyncsPerJob))
		bytes, how := m.dbBytes, "this database"
		if bytes < 0 {
			bytes, how = m.lsnBytes, "cluster"
		}
		v.check("WAL bytes per light job ("+how+")", fmt.Sprintf("%.0f (%.2f of %.0f)", bytes, bytes/c.walBaseline, c.walBaseline),
			bytes <= c.walBaseline*targetWALFraction, fmt.Sprintf("<= %.0f", c.walBaseline*targetWALFraction))
	}
	if in := r.inflight; in != nil {
		v.check("in-flight jobs/s / (workers / latency)", fmt.Sprintf("%.3f (%.0f / %.0f)", in.rate/in.ideal, in.rate, in.ideal), in.rate/in.ideal >= targetInflightRatio, fmt.Sprintf(">= %.1f", targetInflightRatio))
		v.check("memory (VmHWM) per in-flight job", fmt.Sprintf("%.1f KiB", in.perJobHWM()/1024), in.perJobHWM() <= targetInflightBytes, "<= 64 KiB")
	}
	if e := rate[sysEmbedded+"/light"]; e > 0 {
		v.check("embedded light jobs/s", fmt.Sprintf("%.0f", e), e >= targetEmbeddedRate, fmt.Sprintf(">= %d", targetEmbeddedRate))
	}
	fmt.Fprintln(w)
	return v.missed
}
