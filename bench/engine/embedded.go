package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// embeddedPhase runs -embedded-jobs light jobs on the embedded store:
// `oncejob serve` with no --database-url, the store, the API and the
// workers in one process. The queue is filled with the workers stopped
// (after a warmup), then serve starts again with -embedded-workers and the
// clock runs from its start until the jobs are SUCCEEDED, read through the
// HTTP API's CountJobs every 20 ms.
func (e *engineBench) embeddedPhase(ctx context.Context) (result, error) {
	c := e.c
	sc := lightScenario(c.embeddedJobs)
	dataDir := filepath.Join(e.tmp, "embedded-data")
	if err := os.RemoveAll(dataDir); err != nil {
		return result{}, err
	}
	if err := setSimLatency(ctx, e.simURL, c.simLatency); err != nil {
		return result{}, err
	}
	if c.warmupJobs > 0 {
		logf("embedded: warmup: %d jobs through the workers (not measured)", c.warmupJobs)
		srv, addr, api, err := e.serveEmbedded(ctx, dataDir, "warmup", workersArgs(c.embeddedWorkers))
		if err != nil {
			return result{}, err
		}
		err = submit(ctx, c.root, addr, c.submitC, sc, c.warmupJobs)
		if err == nil {
			_, err = waitSucceeded(ctx, api, c.warmupJobs, c.phaseTimeout, nil)
		}
		srv.stop()
		if err != nil {
			return result{}, fmt.Errorf("warmup: %w", err)
		}
	}

	srv, addr, _, err := e.serveEmbedded(ctx, dataDir, "fill", []string{"--workers", "0"})
	if err != nil {
		return result{}, err
	}
	logf("embedded: submitting %d jobs (SubmitJob -c %d, workers stopped)", sc.jobs, c.submitC)
	err = submit(ctx, c.root, addr, c.submitC, sc, sc.jobs)
	srv.stop()
	if err != nil {
		return result{}, err
	}
	if err := httpPost(ctx, e.simURL+"/oncejob/reset", ""); err != nil {
		return result{}, err
	}

	logf("embedded: serve --workers %d", c.embeddedWorkers)
	t0, busy0 := time.Now(), readCPU()
	srv, _, api, err := e.serveEmbedded(ctx, dataDir, "run", workersArgs(c.embeddedWorkers))
	if err != nil {
		return result{}, err
	}
	defer srv.stop()
	done, err := waitSucceeded(ctx, api, c.warmupJobs+sc.jobs, c.phaseTimeout, srv)
	if err != nil {
		return result{}, err
	}
	elapsed := done.Sub(t0)
	cpu := procCPU(srv.cmd.Process.Pid) // the one process: API, store and workers (its start included)
	busy := readCPU()
	billed, err := simBilled(ctx, e.simURL)
	if err != nil {
		return result{}, err
	}
	if billed != int64(sc.jobs) {
		return result{}, fmt.Errorf("the simulator billed %d calls, want %d", billed, sc.jobs)
	}
	r := result{scenario: "light", system: sysEmbedded, processes: 1, jobs: sc.jobs, elapsed: elapsed,
		rate: float64(sc.jobs) / elapsed.Seconds(), cpu: cpu, machineBusy: (busy.busy - busy0.busy) / max(busy.total-busy0.total, 1)}
	logf("embedded: %d jobs in %s: %.0f jobs/s, CPU of serve %s per job, machine %.0f%% busy", sc.jobs, elapsed.Round(time.Millisecond), r.rate,
		(cpu / time.Duration(sc.jobs)).Round(10*time.Microsecond), 100*r.machineBusy)
	return r, nil
}

// serveEmbedded starts `oncejob serve` on the embedded store in dataDir,
// logging to serve-embedded-<tag>.log, and waits until it listens; workers
// are the --workers arguments (none: the binary's default). It returns the
// process, its gRPC address and its HTTP API's base URL.
func (e *engineBench) serveEmbedded(ctx context.Context, dataDir, tag string, workers []string) (*proc, string, string, error) {
	c := e.c
	addr, err := freeAddr()
	if err != nil {
		return nil, "", "", err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, "", "", err
	}
	args := append([]string{"serve",
		"--data-dir", dataDir, "--grpc-addr", addr, "--http-addr", httpAddr,
		"--pipelines", e.pipelines, "--llm-base-url", e.simURL + "/v1", "--llm-lookup-path", "/oncejob/calls",
		"--poll-interval", c.pollInterval.String(), "--lease-duration", c.leaseDuration.String(),
		"--log-level", c.logLevel}, workers...)
	if len(workers) == 0 || workers[len(workers)-1] != "0" {
		args = append(args, c.workerArgs...)
	}
	p, err := startProc(ctx, "serve", filepath.Join(e.tmp, "serve-embedded-"+tag+".log"), e.bin, args...)
	if err != nil {
		return nil, "", "", err
	}
	if err := waitListen(ctx, p, addr); err != nil {
		p.stop()
		return nil, "", "", err
	}
	if err := waitListen(ctx, p, httpAddr); err != nil {
		p.stop()
		return nil, "", "", err
	}
	return p, addr, "http://" + httpAddr, nil
}

// waitSucceeded polls CountJobs (GET /v1/jobs:count) until total jobs are
// SUCCEEDED and returns when it saw them; any job in an end state other
// than SUCCEEDED fails.
func waitSucceeded(ctx context.Context, api string, total int, timeout time.Duration, p *proc) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		counts, err := countJobs(ctx, api)
		if err != nil {
			return time.Time{}, err
		}
		for _, bad := range []string{"FAILED", "DEAD_LETTERED", "CANCELLED", "OUTCOME_UNKNOWN", "AWAITING_APPROVAL"} {
			if n := counts["JOB_STATUS_"+bad]; n > 0 {
				return time.Time{}, fmt.Errorf("%d jobs %s", n, bad)
			}
		}
		if counts["JOB_STATUS_SUCCEEDED"] >= int64(total) {
			return time.Now(), nil
		}
		if p != nil && p.exited() {
			return time.Time{}, fmt.Errorf("server exited: %s", p.tail())
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d succeeded after %s", counts["JOB_STATUS_SUCCEEDED"], total, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// countJobs is CountJobs over the HTTP API: jobs per status.
func countJobs(ctx context.Context, api string) (map[string]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/jobs:count", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/jobs:count: %s", resp.Status)
	}
	var body struct {
		Counts []struct {
			Status string          `json:"status"`
			Count  json.RawMessage `json:"count"` // int64: a JSON string in protojson
		} `json:"counts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, s := range body.Counts {
		n, err := strconv.ParseInt(strings.Trim(string(s.Count), `"`), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("count %s: %w", s.Count, err)
		}
		out[s.Status] = n
	}
	return out, nil
}
