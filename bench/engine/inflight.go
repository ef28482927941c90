package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// inflightResult is the in-flight phase: many jobs waiting on a slow LLM in
// one worker process.
type inflightResult struct {
	jobs, workers int
	latency       time.Duration
	elapsed       time.Duration
	rate          float64       // jobs / elapsed
	ideal         float64       // workers / latency: every slot busy with a call
	meanRunning   float64       // jobs RUNNING, mean of the polls (every 50 ms)
	claimed       time.Duration // meanRunning / rate: the time a job spends claimed (Little's law)
	littleRatio   float64       // latency / claimed: 1 when the engine adds nothing to the LLM's wait
	waits         string        // what the database's active backends waited on
	peakRunning   int           // jobs RUNNING in the database (claimed by the worker), highest sample
	peakSimCalls  int64         // calls the simulator held at once, highest sample
	meanSimCalls  float64       // calls the simulator held, mean over the samples
	idleRSS       int64         // bytes, the same worker on an empty queue
	rssAtPeak     int64         // bytes, the sample at peakRunning
	hwm           int64         // bytes, VmHWM at the end
	idleHeap      float64       // MB live heap after the idle worker's last GC (gctrace); -1: no GC ran
	peakHeap      float64       // MB, highest live heap after a GC during the run
	peakStacks    float64       // MB of goroutine stacks at that GC
}

// perJobRSS is (RSS at peak in-flight - idle RSS) / peak in-flight, bytes.
func (r inflightResult) perJobRSS() float64 {
	if r.peakRunning == 0 {
		return 0
	}
	return float64(r.rssAtPeak-r.idleRSS) / float64(r.peakRunning)
}

// perJobHWM is (VmHWM - idle RSS) / peak in-flight, bytes: the peak of the
// whole run, GC garbage and connections to the LLM included.
func (r inflightResult) perJobHWM() float64 {
	if r.peakRunning == 0 {
		return 0
	}
	return float64(r.hwm-r.idleRSS) / float64(r.peakRunning)
}

// perJobHeap is (peak live heap + stacks - idle heap) / peak in-flight, bytes.
func (r inflightResult) perJobHeap() float64 {
	if r.peakRunning == 0 || r.peakHeap <= 0 {
		return 0
	}
	idle := max(r.idleHeap, 0)
	return (r.peakHeap + r.peakStacks - idle) * (1 << 20) / float64(r.peakRunning)
}

// inflightPhase runs -inflight-jobs light jobs through one worker process
// with --workers -inflight-workers while every LLM call takes
// -inflight-latency.
func (e *engineBench) inflightPhase(ctx context.Context) (inflightResult, error) {
	c := e.c
	tag := "inflight"
	r := inflightResult{jobs: c.inflightJobs, workers: c.inflightWorkers, latency: c.inflightLatency, idleHeap: -1}
	r.ideal = float64(r.workers) / r.latency.Seconds()
	env := []string{"GODEBUG=gctrace=1"} // the runtime's GC lines: live heap and stacks
	dbURL := c.pgURL + "/" + c.db + "?sslmode=disable"

	// The same worker, idle: on the empty queue after the warmup.
	idle := func(*pgxpool.Pool) error { return e.measureIdle(ctx, dbURL, env, &r) }
	p, err := e.prepare(ctx, tag, lightScenario(c.inflightJobs), 1, idle)
	if err != nil {
		return r, err
	}
	defer p.pool.Close()
	if err := setSimLatency(ctx, e.simURL, c.inflightLatency); err != nil {
		return r, err
	}
	defer func() { _ = setSimLatency(context.WithoutCancel(ctx), e.simURL, c.simLatency) }()

	// The simulator's calls in progress: received and not yet answered.
	stopSim := startSimSampler(ctx, e.simURL)
	var samples []inflightSample
	logPath := filepath.Join(e.tmp, "worker-inflight-0.log")
	logf("%s: one worker process, --workers %d, LLM latency %s, %d jobs", tag, c.inflightWorkers, c.inflightLatency, c.inflightJobs)
	waits := startWaitSampler(ctx, c.pgURL, c.db)
	elapsed, _, err := e.runWorkers(ctx, p.pool, workerRun{
		tag: tag, procs: 1, workers: c.inflightWorkers, lease: c.inflightLease, env: env,
		total: c.warmupJobs + c.inflightJobs,
		poll: func(ws []*proc, running, queued int) {
			samples = append(samples, inflightSample{running, queued})
			if len(ws) == 0 {
				return
			}
			pid := ws[0].cmd.Process.Pid
			rss, err := procStatusKB(pid, "VmRSS")
			if err != nil {
				return
			}
			if running > r.peakRunning || (running == r.peakRunning && rss<<10 > r.rssAtPeak) {
				r.peakRunning, r.rssAtPeak = running, rss<<10
			}
			if hwm, err := procStatusKB(pid, "VmHWM"); err == nil {
				r.hwm = hwm << 10
			}
		},
	})
	simSamples := stopSim()
	r.waits = waits.finish()
	if err != nil {
		return r, err
	}
	if err := e.checkCalls(ctx, p.pool, p.callsBefore, int64(c.inflightJobs)); err != nil {
		return r, err
	}
	r.elapsed = elapsed
	r.rate = float64(r.jobs) / elapsed.Seconds()

	r.summarize(samples, simSamples, logPath)
	logf("%s: %d jobs in %s: %.0f jobs/s (workers / latency %.0f); peak %d running, RSS %.1f MiB at peak (idle %.1f)",
		tag, r.jobs, elapsed.Round(time.Millisecond), r.rate, r.ideal, r.peakRunning,
		float64(r.rssAtPeak)/(1<<20), float64(r.idleRSS)/(1<<20))
	return r, nil
}

// inflightSample is one poll of the inflight phase: jobs running and queued.
type inflightSample struct {
	running int
	queued  int
}

// measureIdle runs the inflight phase's worker on the empty queue and
// records its idle RSS and live heap in r.
func (e *engineBench) measureIdle(ctx context.Context, dbURL string, env []string, r *inflightResult) error {
	c := e.c
	tag := "inflight"
	logPath := filepath.Join(e.tmp, "worker-inflight-idle.log")
	args := append([]string{"worker",
		"--database-url", dbURL, "--pipelines", e.pipelines,
		"--llm-base-url", e.simURL + "/v1", "--llm-lookup-path", "/oncejob/calls",
		"--workers", strconv.Itoa(c.inflightWorkers), "--poll-interval", c.pollInterval.String(),
		"--lease-duration", c.inflightLease.String(), "--log-level", c.logLevel},
		c.workerArgs...)
	w, err := startProcEnv(ctx, "worker", logPath, env, e.bin, args...)
	if err != nil {
		return err
	}
	defer w.stop()
	time.Sleep(3 * time.Second)
	var rss []float64
	for range 5 {
		if w.exited() {
			return fmt.Errorf("idle worker exited: %s", w.tail())
		}
		v, _ := procStatusKB(w.cmd.Process.Pid, "VmRSS")
		rss = append(rss, float64(v))
		time.Sleep(200 * time.Millisecond)
	}
	r.idleRSS = int64(median(rss)) << 10
	w.stop()
	if gcs := readGCTrace(logPath); len(gcs) > 0 {
		r.idleHeap = gcs[len(gcs)-1].liveMB
	}
	logf("%s: idle worker (--workers %d): RSS %.1f MiB", tag, c.inflightWorkers, float64(r.idleRSS)/(1<<20))
	return nil
}

// startSimSampler samples the simulator's calls in progress every 500 ms
// until the returned function is called; that returns the samples.
func startSimSampler(ctx context.Context, simURL string) func() []int64 {
	simCtx, stopSim := context.WithCancel(ctx)
	var simWG sync.WaitGroup
	var simSamples []int64
	simWG.Add(1)
	go func() {
		defer simWG.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-simCtx.Done():
				return
			case <-t.C:
			}
			if n, err := simInFlight(simCtx, simURL); err == nil {
				simSamples = append(simSamples, n)
			}
		}
	}()
	return func() []int64 {
		stopSim()
		simWG.Wait()
		return simSamples
	}
}

// summarize fills r's mean running jobs and Little's law ratio from the
// poll's samples, its simulator figures from simSamples and its peak heap
// from the worker's GC trace in logPath.
func (r *inflightResult) summarize(samples []inflightSample, simSamples []int64, logPath string) {
	// Little's law over the run: jobs claimed on average / jobs done per
	// second is the time a job spends claimed; the LLM's latency of it is
	// the ratio (1: the engine adds nothing to the wait).
	var sumRunning float64
	for _, s := range samples {
		sumRunning += float64(s.running)
	}
	if len(samples) > 0 && sumRunning > 0 {
		r.meanRunning = sumRunning / float64(len(samples))
		r.claimed = time.Duration(r.meanRunning / r.rate * float64(time.Second))
		r.littleRatio = r.latency.Seconds() / r.claimed.Seconds()
	}
	var sum float64
	for _, n := range simSamples {
		r.peakSimCalls = max(r.peakSimCalls, n)
		sum += float64(n)
	}
	if len(simSamples) > 0 {
		r.meanSimCalls = sum / float64(len(simSamples))
	}
	for _, g := range readGCTrace(logPath) {
		if g.liveMB > r.peakHeap {
			r.peakHeap, r.peakStacks = g.liveMB, g.stacksMB
		}
	}
}

// procStatusKB reads a "Name: N kB" line of /proc/pid/status.
func procStatusKB(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", name, pid)
}

// gcLine is one line of GODEBUG=gctrace=1: "gc N @Ts P%: ... A->B->C MB,
// D MB goal, S MB stacks, ...": C is the live heap after the GC.
type gcLine struct {
	liveMB, stacksMB float64
}

var (
	gcHeapRE   = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)
	gcStacksRE = regexp.MustCompile(`(\d+) MB stacks`)
)

func parseGCTrace(s string) []gcLine {
	var out []gcLine
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		m := gcHeapRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var g gcLine
		g.liveMB, _ = strconv.ParseFloat(m[3], 64)
		if s := gcStacksRE.FindStringSubmatch(line); s != nil {
			g.stacksMB, _ = strconv.ParseFloat(s[1], 64)
		}
		out = append(out, g)
	}
	return out
}

func readGCTrace(path string) []gcLine {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return parseGCTrace(string(b))
}

// simInFlight is the number of calls the simulator has received and not
// answered yet.
func simInFlight(ctx context.Context, simURL string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, simURL+"/oncejob/stats", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Requests      int64 `json:"requests"`
		BilledCalls   int64 `json:"billed_calls"`
		ReplayedCalls int64 `json:"replayed_calls"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	return st.Requests - st.BilledCalls - st.ReplayedCalls, nil
}
