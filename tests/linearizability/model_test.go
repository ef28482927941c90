package linearizability

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

const window = time.Second

// h builds a history from (client, input, output, call ms, return ms); a
// return of -1 is an unanswered call.
type entry struct {
	client    int
	in        Input
	out       Output
	call, ret int64
}

func history(entries ...entry) []porcupine.Operation {
	var ops []porcupine.Operation
	var end int64
	for _, e := range entries {
		end = max(end, e.ret*int64(time.Millisecond))
	}
	for _, e := range entries {
		in := e.in
		in.Call = e.call * int64(time.Millisecond)
		in.Return = e.ret * int64(time.Millisecond)
		ret := in.Return
		if e.ret < 0 {
			in.Return, ret = Unanswered, end+1
		}
		ops = append(ops, porcupine.Operation{ClientId: e.client, Input: in, Call: in.Call, Output: e.out, Return: ret})
	}
	return ops
}

func submit(key, request string) Input { return Input{Op: Submit, Key: key, Request: request} }
func get(key, id string) Input         { return Input{Op: Get, Key: key, JobID: id} }

func check(t *testing.T, m porcupine.Model, ops []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	res, _, err := Check(m, ops, 10*time.Second, nil)
	require.NoError(t, err)
	return res
}

func TestLegalHistories(t *testing.T) {
	for name, ops := range map[string][]porcupine.Operation{
		"concurrent submits make one job": history(
			entry{0, submit("k", "a"), Output{Outcome: Existing, JobID: "j1"}, 0, 30},
			entry{1, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 5, 20},
		),
		"another request is refused in the window": history(
			entry{0, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 0, 10},
			entry{1, submit("k", "b"), Output{Outcome: Reused}, 20, 30},
			entry{0, get("k", "j1"), Output{Outcome: Found, JobKey: "k"}, 40, 50},
		),
		"a failed call took effect": history(
			entry{0, submit("k", "a"), Output{Outcome: Failed}, 0, -1},
			entry{1, submit("k", "a"), Output{Outcome: Existing, JobID: "j1"}, 100, 110},
		),
		"a failed call may have done nothing": history(
			entry{0, submit("k", "a"), Output{Outcome: Failed}, 0, -1},
			entry{1, submit("k", "b"), Output{Outcome: Created, JobID: "j1"}, 100, 110},
			entry{1, submit("k", "a"), Output{Outcome: Reused}, 200, 210},
		),
		"after the window the key makes a new job, or not yet": history(
			entry{0, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 0, 10},
			entry{1, submit("k", "a"), Output{Outcome: Existing, JobID: "j1"}, 1100, 1110},
			entry{0, submit("k", "b"), Output{Outcome: Created, JobID: "j2"}, 1500, 1510},
			entry{1, get("k", "j1"), Output{Outcome: Found, JobKey: "k"}, 1600, 1610},
		),
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, porcupine.Ok, check(t, Model(window), ops))
		})
	}
}

func TestIllegalHistories(t *testing.T) {
	for name, ops := range map[string][]porcupine.Operation{
		"two jobs for one key in the window": history(
			entry{0, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 0, 10},
			entry{1, submit("k", "a"), Output{Outcome: Created, JobID: "j2"}, 20, 30},
		),
		"a replay of a job never created": history(
			entry{0, submit("k", "a"), Output{Outcome: Existing, JobID: "j1"}, 0, 10},
		),
		"another request not refused": history(
			entry{0, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 0, 10},
			entry{1, submit("k", "b"), Output{Outcome: Existing, JobID: "j1"}, 20, 30},
		),
		"the same request refused": history(
			entry{0, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 0, 10},
			entry{1, submit("k", "a"), Output{Outcome: Reused}, 20, 30},
		),
		"an acknowledged job lost": history(
			entry{0, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 0, 10},
			entry{1, get("k", "j1"), Output{Outcome: NotFound}, 20, 30},
		),
		"a replay of the job before the window freed the key": history(
			entry{0, submit("k", "a"), Output{Outcome: Created, JobID: "j1"}, 0, 10},
			entry{1, submit("k", "a"), Output{Outcome: Created, JobID: "j2"}, 1100, 1110},
			entry{0, submit("k", "a"), Output{Outcome: Existing, JobID: "j1"}, 1200, 1210},
		),
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, porcupine.Illegal, check(t, Model(window), ops))
		})
	}
}

// TestBrokenModelIsCaught shows the check can fail: a model that wrongly
// says a failed call never takes effect is refuted by a history the real
// model accepts, and the failing check writes its visualisation.
func TestBrokenModelIsCaught(t *testing.T) {
	failedCallsDoNothing := func(s keyState, in Input, out Output, w time.Duration) []keyState {
		if out.Outcome == Failed {
			return []keyState{s}
		}
		return step(s, in, out, w)
	}
	ops := history(
		entry{0, submit("k", "a"), Output{Outcome: Failed}, 0, -1},
		entry{1, submit("k", "a"), Output{Outcome: Existing, JobID: "j1"}, 100, 110},
		entry{2, submit("other", "a"), Output{Outcome: Created, JobID: "j2"}, 0, 10},
	)
	require.Equal(t, porcupine.Ok, check(t, Model(window), ops))

	res, path, err := Check(model(window, failedCallsDoNothing), ops, 10*time.Second, t.TempDir)
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, res)
	html, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.Contains(string(html), "<html") && strings.Contains(string(html), "submit(k, a)"), "the visualisation shows the history")
}
