package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// TestRunSubmitCtrlC: a signal in the middle of `oncejob run submit`
// prints what was done so far and the command that resumes, and exits with
// the signal's status (130 for SIGINT, 143 for SIGTERM), not "context
// canceled" and 1. The printed command, run as printed, finishes the run:
// every item ends up submitted exactly once.
//
// The items file is a FIFO the test writes, so the signal lands mid-run
// for sure: half the items are written and in the run, the command waits
// for the rest.
func TestRunSubmitCtrlC(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	server := start(t, "serve", nil, embeddedServeArgs(t.TempDir(), addr, nil, "")...)
	waitHealthy(t, server, addr)
	_, jobs := runClients(t, addr)
	const half, total = 40, 80
	allJobs := 0
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}} {
		t.Run(tc.name, func(t *testing.T) {
			items := filepath.Join(t.TempDir(), "items.jsonl")
			require.NoError(t, syscall.Mkfifo(items, 0o600))
			lines := make([]string, total)
			for i := range lines {
				lines[i] = fmt.Sprintf(`{"id": "%s-%d", "text": "document %d of the %s run"}`, tc.name, i, i, tc.name)
			}
			bin := filepath.Join(binDir, "oncejob")
			args := []string{"run", "submit", items, "--addr", addr, "--run", "ctrl-c-" + tc.name, "--id-field", "id", "--batch", "10"}
			cmd := exec.Command(bin, args...)
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			// Opening the FIFO waits for the command to open it (after it
			// created the run and set up its signals).
			fifo, err := os.OpenFile(items, os.O_WRONLY, 0)
			require.NoError(t, err)
			defer fifo.Close()
			_, err = fifo.WriteString(strings.Join(lines[:half], "\n") + "\n")
			require.NoError(t, err)
			// The command's own progress line says the half is in.
			require.Eventually(t, func() bool {
				return strings.Contains(stdout.String(), fmt.Sprintf("submitted %d,", half))
			}, 30*time.Second, 20*time.Millisecond, "progress:\n%s\n%s", stdout.String(), stderr.String())
			runID := regexp.MustCompile(`run ([0-9a-f-]{36}) \(ctrl-c-`).FindStringSubmatch(stdout.String())
			require.NotNil(t, runID, "the run's header:\n%s", stdout.String())

			require.NoError(t, cmd.Process.Signal(tc.sig))
			var exitErr *exec.ExitError
			select {
			case err = <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("run submit did not stop on %s:\n%s", tc.name, stderr.String())
			}
			require.True(t, errors.As(err, &exitErr), "exit: %v", err)
			out := stderr.String()
			require.Equal(t, tc.code, exitErr.ExitCode(), "exit status after %s\n%s", tc.name, out)
			require.NotContains(t, out, "context canceled")
			require.Contains(t, out, fmt.Sprintf("interrupted (%s): run %s: %d lines read; %d items sent, %d accepted (%d new, 0 already in the run, 0 reused, of which 0 deduplicated), 0 failed (0 refused, 0 invalid lines), 0 unanswered",
				tc.name, runID[1], half, half, half, half), out)
			require.Contains(t, out, "oncejob run submit: interrupted ("+tc.name+")")
			resume := regexp.MustCompile(`resume with the same command[^\n]*:\n  (.+)\n`).FindStringSubmatch(out)
			require.NotNil(t, resume, out)
			require.Equal(t, strings.Join(append([]string{bin}, args...), " "), resume[1], "the same command line")
			require.Len(t, runJobs(t, jobs, runID[1]), half, "nothing was submitted after the signal")

			// Resume: the printed command, with every item in the file.
			require.NoError(t, os.Remove(items))
			require.NoError(t, os.WriteFile(items, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
			again, err := exec.Command("sh", "-c", resume[1]).CombinedOutput()
			require.NoError(t, err, "%s", again)
			require.Contains(t, string(again), fmt.Sprintf("run %s: %d lines; %d new items, %d already in the run", runID[1], total, total-half, half), "%s", again)

			byKey := map[string]*oncejobv1.Job{}
			for _, j := range runJobs(t, jobs, runID[1]) {
				require.NotContains(t, byKey, j.GetIdempotencyKey(), "one job per item")
				byKey[j.GetIdempotencyKey()] = j
			}
			require.Len(t, byKey, total, "every item once")
			allJobs += total
			resp, err := jobs.ListJobs(context.Background(), &oncejobv1.ListJobsRequest{PageSize: 500})
			require.NoError(t, err)
			require.Len(t, resp.GetJobs(), allJobs, "no job beside the runs' items")
		})
	}
}
