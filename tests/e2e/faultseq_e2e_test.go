package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// The fault-combination harness (issue #30): sequences of stalls, kills,
// restarts and provider faults drawn at random from a seed, each driven
// against two or three real servers on one Postgres schema and the
// simulator as a process, for online calls and provider batches. After
// each sequence every item must have SUCCEEDED and every call been billed
// once (the simulator's bills by provider key). CI runs a few sequences;
// more on demand:
//
//	go test -run TestFaultSequences ./tests/e2e/ -e2e.faultseqs=200
//
// Each sequence prints its seed; -e2e.faultseed=S -e2e.faultseqs=1 (or
// ONCEJOB_E2E_FAULTSEED, ONCEJOB_E2E_FAULTSEQS) replays it: the same
// faults in the same order at the same offsets (the processes' own timing
// is not replayed).
var (
	faultSeqs    = flag.Int("e2e.faultseqs", envInt("ONCEJOB_E2E_FAULTSEQS", 4), "fault sequences TestFaultSequences runs")
	faultSeed    = flag.Uint64("e2e.faultseed", uint64(envInt("ONCEJOB_E2E_FAULTSEED", 0)), "seed of the first fault sequence (the next ones: +1, +2, ...); 0 draws one")
	faultPar     = flag.Int("e2e.faultpar", envInt("ONCEJOB_E2E_FAULTPAR", 2), "fault sequences run at once")
	faultServers = flag.Int("e2e.faultservers", envInt("ONCEJOB_E2E_FAULTSERVERS", 0), "servers per fault sequence, 2 or 3; 0 draws it from the seed")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// faultSeq is one sequence: what runs, on how many servers, and the faults
// in order.
type faultSeq struct {
	seed       uint64
	mode       string // "online" or "batch"
	servers    int
	items      int
	batchDelay time.Duration // of every batch, in batch mode
	latency    time.Duration // of every online call, in online mode
	steps      []faultStep
}

type faultStep struct {
	after  time.Duration // since the previous step ended
	kind   string        // stall, kill, restart, provider
	server int
	stall  time.Duration
	faults string // the simulator's faults, for kind provider
}

func (s faultStep) String() string {
	switch s.kind {
	case "stall":
		return fmt.Sprintf("+%v stall s%d %v", s.after, s.server, s.stall)
	case "provider":
		return fmt.Sprintf("+%v provider %s", s.after, s.faults)
	}
	return fmt.Sprintf("+%v %s s%d", s.after, s.kind, s.server)
}

func (q faultSeq) String() string {
	steps := make([]string, len(q.steps))
	for i, s := range q.steps {
		steps[i] = s.String()
	}
	return fmt.Sprintf("seed=%d %s servers=%d items=%d batch-delay=%v latency=%v: %s", q.seed, q.mode, q.servers, q.items, q.batchDelay, q.latency, strings.Join(steps, "; "))
}

var (
	onlineFaults = []string{
		`{"unavailable":{"every":3,"count":10}}`,
		`{"rate_limit":{"every":4,"count":8,"retry_after":"200ms"}}`,
		`{"bill_then_timeout":{"every":4,"count":6,"delay":"5s"}}`,
		`{"hang":{"every":5,"count":3}}`,
		`{"unavailable":{"every":2,"count":4},"bill_then_timeout":{"every":3,"count":4,"delay":"5s"}}`,
	}
	batchFaults = []string{
		`{"batch_create_lost":{"count":1}}`,
		`{"batch_line_fail":{"every":7,"count":6}}`,
		`{"batch_expire":{"count":1,"completed":0.5}}`,
		`{"batch_create_lost":{"count":1},"batch_line_fail":{"every":5,"count":4}}`,
	}
)

// newFaultSeq draws the sequence of seed: every server restarted once
// (SIGTERM, then the same command), and up to three more faults (a stall
// past the leases, a SIGKILL and start, a provider fault), in a random
// order at random offsets.
func newFaultSeq(seed uint64, servers int) faultSeq {
	r := rand.New(rand.NewPCG(seed, 0x6f6e63656a6f62))
	q := faultSeq{seed: seed, mode: "online", servers: servers, items: 10 + r.IntN(41)}
	if r.IntN(2) == 0 {
		q.mode = "batch"
	}
	if q.servers == 0 {
		q.servers = 2 + r.IntN(2)
	}
	q.batchDelay = time.Duration(300+r.IntN(1700)) * time.Millisecond
	// Online calls last long enough for the faults to find them in flight,
	// and well within the servers' --llm-timeout.
	q.latency = time.Duration(300+r.IntN(900)) * time.Millisecond
	for i := range q.servers {
		q.steps = append(q.steps, faultStep{kind: "restart", server: i})
	}
	for range r.IntN(4) {
		s := faultStep{server: r.IntN(q.servers)}
		switch r.IntN(3) {
		case 0:
			s.kind, s.stall = "stall", time.Duration(1000+r.IntN(5000))*time.Millisecond
		case 1:
			s.kind = "kill"
		default:
			s.kind = "provider"
			if q.mode == "online" {
				s.faults = onlineFaults[r.IntN(len(onlineFaults))]
			} else {
				s.faults = batchFaults[r.IntN(len(batchFaults))]
			}
		}
		q.steps = append(q.steps, s)
	}
	r.Shuffle(len(q.steps), func(i, j int) { q.steps[i], q.steps[j] = q.steps[j], q.steps[i] })
	for i := range q.steps {
		q.steps[i].after = time.Duration(r.IntN(2500)) * time.Millisecond
	}
	return q
}

// simFaults is faults (JSON) with the sequence's latency of online calls.
func (q faultSeq) simFaults(faults string) string {
	if q.mode != "online" {
		return faults
	}
	latency := fmt.Sprintf(`"latency":%q`, q.latency.String())
	if faults == "{}" {
		return "{" + latency + "}"
	}
	return "{" + latency + "," + faults[1:]
}

// faultSeqPipelines: one LLM call per item, online or in provider batches of
// at most 25 calls, with a budget no sequence spends.
const faultSeqPipelines = `
model_profiles:
  online:
    model: sim-1
    prompt_micros_per_1k: 1000
    completion_micros_per_1k: 2000
  batched:
    model: sim-1
    prompt_micros_per_1k: 1000
    completion_micros_per_1k: 2000
    provider_batch: {max_calls: 25, linger: 300ms}
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [online, batched]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    retry: {max_attempts: 200, initial_backoff: 10ms, max_backoff: 500ms, deadline: 30m}
`

func TestFaultSequences(t *testing.T) {
	t.Parallel()
	seed := *faultSeed
	if seed == 0 {
		seed = rand.Uint64() >> 1
	}
	n := *faultSeqs
	t.Logf("fault sequences: %d from seed %d (replay one: -e2e.faultseed=<its seed> -e2e.faultseqs=1)", n, seed)
	sem := make(chan struct{}, max(1, *faultPar))
	for i := range n {
		q := newFaultSeq(seed+uint64(i), *faultServers)
		t.Run(fmt.Sprintf("seed=%d", q.seed), func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Logf("sequence %s", q)
			runFaultSeq(t, q)
		})
	}
}

// faultServer is one serve process of a sequence, started again with the
// same command after a kill or a restart.
type faultServer struct {
	name string
	addr string
	args []string
	proc *proc
	runs int
}

func (s *faultServer) start(t *testing.T) {
	t.Helper()
	s.runs++
	s.proc = start(t, fmt.Sprintf("%s#%d", s.name, s.runs), nil, s.args...)
	waitHealthyWithin(t, s.proc, s.addr, 2*time.Minute)
}

func runFaultSeq(t *testing.T, q faultSeq) {
	defer func() {
		if t.Failed() {
			t.Logf("FAILED sequence %s\nreplay: go test -count=1 -run TestFaultSequences ./tests/e2e/ -e2e.faultseed=%d -e2e.faultseqs=1", q, q.seed)
		}
	}()
	sim, client := batchSim(t, q.batchDelay)
	dbURL := storepgtest.NewSchemaURL(t)
	pipelines := writeFile(t, "pipelines.yaml", faultSeqPipelines)
	servers := make([]*faultServer, q.servers)
	for i := range servers {
		s := &faultServer{name: fmt.Sprintf("s%d", i), addr: freeAddr(t)}
		s.args = []string{"serve", "--grpc-addr", s.addr, "--database-url", dbURL, "--migrate", "--pipelines", pipelines,
			"--llm-base-url", sim.base + "/v1", "--llm-lookup-path", llmsim.LookupPath, "--llm-batch-api", "--llm-timeout", "3s",
			"--lease-duration", "2s", "--poll-interval", "50ms", "--relays", "0", "--provider-batch-sweep", "1s"}
		s.start(t)
		servers[i] = s
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.proc.signal(syscall.SIGCONT)
		}
	})

	sim.setFaults(t, q.simFaults("{}"))
	profile := map[string]string{"online": "online", "batch": "batched"}[q.mode]
	items := writeItems(t, "items.jsonl", fmt.Sprintf("fs%d", q.seed), q.items)
	stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", "faults", "--pipeline", "light", "--model-profile", profile, "--json", "--addr", servers[0].addr)
	require.Zero(t, code, "%s\n%s", stdout, stderr)
	runID := lastSummary(t, stdout).RunID

	for _, step := range q.steps {
		time.Sleep(step.after)
		s := servers[step.server]
		switch step.kind {
		case "stall":
			s.proc.signal(syscall.SIGSTOP)
			time.Sleep(step.stall)
			s.proc.signal(syscall.SIGCONT)
		case "kill":
			s.proc.signal(syscall.SIGKILL)
			<-s.proc.exited
			s.start(t)
		case "restart":
			s.proc.stop()
			s.start(t)
		case "provider":
			sim.setFaults(t, q.simFaults(step.faults))
		}
	}

	// Every item terminal, then every server stopped and every batch
	// finished: the provider has billed all it will.
	runs, _ := runClients(t, servers[0].addr)
	var run *oncejobv1.Run
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		got, err := runs.GetRun(ctx, &oncejobv1.GetRunRequest{RunId: runID})
		if err == nil {
			run = got.GetRun()
		}
		return err == nil && run.GetProgress().GetComplete()
	}, 5*time.Minute, 200*time.Millisecond, "every item of the run ends")
	// The provider's bills as the run sees them, read from every batch's
	// results (batch mode; none online).
	var billedLines int64
	list, err := runs.ListRunBatches(t.Context(), &oncejobv1.ListRunBatchesRequest{RunId: runID})
	require.NoError(t, err)
	for _, b := range list.GetBatches() {
		billedLines += b.GetBilledLines()
	}
	for _, s := range servers {
		s.proc.stop()
	}
	waitAllBatches(t, sim, client)

	p := run.GetProgress()
	require.EqualValues(t, q.items, p.GetItems())
	require.EqualValues(t, q.items, p.GetSucceeded(), "no item lost: %+v", p)
	st := sim.stats(t)
	byKey, billed, other := st.CallsByKey, st.BilledCalls, st.BatchBilledCalls
	if q.mode == "batch" {
		byKey, billed, other = st.BatchCallsByKey, st.BatchBilledCalls, st.BilledCalls
	}
	require.Zero(t, other, "every call by the profile's way")
	require.Len(t, byKey, q.items, "one provider key per item")
	for key, c := range byKey {
		require.EqualValues(t, 1, c, "%s billed once", key)
	}
	require.EqualValues(t, q.items, billed)
	require.EqualValues(t, q.items, p.GetUsage().GetLlmCalls(), "the run counts the calls the provider billed")
	if q.mode == "batch" {
		require.EqualValues(t, q.items, billedLines, "the run's batches count the provider's bills")
	}
}
