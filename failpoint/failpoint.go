// Package failpoint names the lines where a crash test may kill the process.
//
// A failpoint is armed by the environment variable ONCEJOB_FAILPOINTS, read
// once at start: a comma-separated list of name=action, where action is
//
//	kill        SIGKILL this process the first time the line runs
//	kill@N      ... the N-th time it runs
//	kill%P      ... each time with probability P percent (1-100)
//	stop        SIGSTOP this process the first time the line runs: a stall
//	            the test ends with SIGCONT (the process then goes on)
//	stop@N      ... the N-th time it runs
//
// e.g. ONCEJOB_FAILPOINTS=after_llm_response=kill@3,after_publish_commit=kill%5.
// Unarmed, Inject costs one atomic load. The binary is the production
// binary: nothing is compiled differently for tests, so the tests kill what
// ships.
package failpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// The named failpoints of the engine (docs/architecture.md, "Failpoints").
const (
	AfterLLMResponse      = "after_llm_response"
	BeforeCheckpointWrite = "before_checkpoint_write"
	AfterCheckpointWrite  = "after_checkpoint_write"
	AfterPublishCommit    = "after_publish_commit"
	// PublishBatchInFlight: the completer's batch of publishes committed,
	// none of its jobs has been answered yet.
	PublishBatchInFlight = "publish_batch_in_flight"
	// ProviderBatchIntent: a member of a provider batch is about to
	// journal its intent row.
	ProviderBatchIntent = "provider_batch_intent"
	// ProviderBatchAfterUpload: a provider batch's input file is uploaded,
	// the batch not created yet.
	ProviderBatchAfterUpload = "provider_batch_after_upload"
	// ProviderBatchBeforeCreate: the members' leases are confirmed for the
	// create, the batch not created yet.
	ProviderBatchBeforeCreate = "provider_batch_before_create"
	// ProviderBatchAfterCreate: the provider batch is created, its id not
	// yet polled.
	ProviderBatchAfterCreate = "provider_batch_after_create"
	// ProviderBatchApplying: a line's answer is in hand, its checkpoint and
	// journal row not written yet.
	ProviderBatchApplying = "provider_batch_applying"
)

// The named failpoints of the relay.
const (
	// RelayBeforeSend: a delivery is claimed, nothing is sent yet.
	RelayBeforeSend = "relay_before_send"
	// RelayAfterSend: the sink answered (a receiver committed), the
	// attempt is not journaled yet.
	RelayAfterSend = "relay_after_send"
	// RelayAfterJournal: the batch's attempts are journaled and settled.
	RelayAfterJournal = "relay_after_journal"
	// ChatAfterPost: the chat sink posted, its sent_messages row is not
	// written yet - the remaining window of the check-then-act.
	ChatAfterPost = "chat_after_post"
)

// EnvVar arms failpoints.
const EnvVar = "ONCEJOB_FAILPOINTS"

type point struct {
	stop    bool  // SIGSTOP rather than SIGKILL
	nth     int64 // kill on this hit; 0 if probabilistic
	percent int   // kill with this probability per hit
	hits    atomic.Int64
}

var (
	once   sync.Once
	armed  atomic.Bool
	points map[string]*point
)

func load() {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		return
	}
	pts, err := Parse(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "failpoint: %s: %v\n", EnvVar, err)
		os.Exit(2)
	}
	points = pts
	armed.Store(len(points) > 0)
	fmt.Fprintf(os.Stderr, "failpoint: armed %s\n", spec)
}

// Parse reads a failpoint spec; exported for tests.
func Parse(spec string) (map[string]*point, error) {
	out := map[string]*point{}
	for _, item := range strings.Split(spec, ",") {
		name, action, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want name=action", item)
		}
		p := &point{nth: 1}
		switch {
		case action == "kill":
		case action == "stop":
			p.stop = true
		case strings.HasPrefix(action, "stop@"):
			n, err := strconv.ParseInt(action[5:], 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%q: stop@N needs N >= 1", item)
			}
			p.stop, p.nth = true, n
		case strings.HasPrefix(action, "kill@"):
			n, err := strconv.ParseInt(action[5:], 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%q: kill@N needs N >= 1", item)
			}
			p.nth = n
		case strings.HasPrefix(action, "kill%"):
			pc, err := strconv.Atoi(action[5:])
			if err != nil || pc < 1 || pc > 100 {
				return nil, fmt.Errorf("%q: kill%%P needs 1 <= P <= 100", item)
			}
			p.nth, p.percent = 0, pc
		default:
			return nil, fmt.Errorf("%q: unknown action %q", item, action)
		}
		out[name] = p
	}
	return out, nil
}

// Inject marks a failpoint: when armed for name, the process is killed here.
func Inject(name string) {
	once.Do(load)
	if !armed.Load() {
		return
	}
	p, ok := points[name]
	if !ok {
		return
	}
	hit := p.hits.Add(1)
	if p.stop && hit == p.nth {
		fmt.Fprintf(os.Stderr, "failpoint: %s hit %d: SIGSTOP\n", name, hit)
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		return
	}
	if p.stop {
		return
	}
	if (p.nth > 0 && hit == p.nth) || (p.percent > 0 && rand.IntN(100) < p.percent) {
		fmt.Fprintf(os.Stderr, "failpoint: %s hit %d: SIGKILL\n", name, hit)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
