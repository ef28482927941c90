package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stopped reports whether the process is stopped (SIGSTOP): state T in
// /proc/<pid>/stat.
func stopped(t *testing.T, p *proc) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] == "T"
}

// TestProviderBatchStalledCreate: a server stalls (SIGSTOP at
// provider_batch_before_create, its leases renewed, its input file
// uploaded) past its leases; a second server on the same database takes its
// jobs over, finds no batch of the stalled tag, collects the calls again and
// sends them; the stalled server is woken (SIGCONT) while both run. No call
// is billed twice: the stalled create is refused by its deadline and the
// next try's fence finds the leases lost; a create already on its way when
// the process stopped (past every check, sent on SIGCONT) is refused by
// the provider, the taker having revoked the tag. Groups whose fence ran before the
// stop took hold may be sent by the stalled server (their jobs are then
// waited for by the taker), so the invariant is per call, not a count of
// batches.
func TestProviderBatchStalledCreate(t *testing.T) {
	t.Parallel()
	const n = 300
	for _, wake := range []string{"after-first-batch", "after-takeover"} {
		t.Run(wake, func(t *testing.T) {
			t.Parallel()
			sim, _ := batchSim(t, 500*time.Millisecond)
			s := startBatchServer(t, false, sim, "1s", []string{"ONCEJOB_FAILPOINTS=provider_batch_before_create=stop"})
			stalled := s.proc
			t.Cleanup(func() { stalled.signal(syscall.SIGCONT) })
			items := writeItems(t, "items.jsonl", "s", n)
			stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", "stalled", "--pipeline", "light", "--model-profile", "batched", "--json", "--addr", s.addr)
			require.Zero(t, code, stderr)
			require.NotEmpty(t, lastSummary(t, stdout).RunID)
			require.Eventually(t, func() bool { return stopped(t, stalled) }, 60*time.Second, 20*time.Millisecond, "the failpoint stops the server")
			// Groups whose fence ran before the stop took hold may have been
			// sent: their jobs are waited for, never sent again.
			before := sim.stats(t).BatchesCreated

			// The second server: same database and pipelines, unarmed.
			s.addr = freeAddr(t)
			args := append([]string(nil), s.args...)
			for i, a := range args {
				if a == "--grpc-addr" {
					args[i+1] = s.addr
				}
			}
			taker := start(t, "serve-taker", nil, args...)
			t.Cleanup(taker.stop)
			waitHealthy(t, taker, s.addr)
			require.Eventually(t, func() bool { return sim.stats(t).BatchesCreated > before }, 60*time.Second, 20*time.Millisecond, "the taker sends the calls again")
			if wake == "after-takeover" {
				// Past the void tag's grace: the taker has collected every
				// call of the stalled group again.
				time.Sleep(8 * time.Second)
			}
			stalled.signal(syscall.SIGCONT)

			// The same command again, at the taker, waits for the run.
			s.proc = taker
			sum := submitRun(t, s, items, "stalled")
			require.EqualValues(t, n, sum.Progress.Succeeded, "%+v", sum)

			if wake == "after-takeover" {
				// Every job of the stalled group was taken over, so its
				// create is refused: by the fence on its next try, or by
				// the provider (the taker revoked the tag) if it was on
				// its way when the process stopped.
				require.Eventually(t, func() bool {
					return strings.Contains(stalled.logs.String(), "a member's job was taken over before the create")
				}, 60*time.Second, 50*time.Millisecond, "the stalled create is refused\n%s", grepLines(stalled.logs.String(), "provider batch"))
			}
			// Whatever the stalled server was to send is sent once it has
			// stopped: only then are the provider's counts final.
			stalled.stop()

			st := sim.stats(t)
			require.Zero(t, st.BilledCalls, "no call went online")
			require.Len(t, st.BatchCallsByKey, n)
			for key, c := range st.BatchCallsByKey {
				require.EqualValues(t, 1, c, "%s billed once\nstalled server:\n%s", key, stalled.logs.String())
			}
			require.EqualValues(t, n, st.BatchBilledCalls)
			t.Logf("batches created: %d; stalled server said:\n%s", st.BatchesCreated, grepLines(stalled.logs.String(), "provider batch"))
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
