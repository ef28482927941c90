package clientsdk_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// tsGeneratedInputs is how many generated inputs the TypeScript client
// meets beside the corpus (docs/keys.md): fewer than Python's, the same
// generator.
const tsGeneratedInputs = 4000

// TestKeysDifferentialTypeScript is TestKeysDifferential for the
// TypeScript client (clientsdk/typescript, built by `make ts`): the
// corpus, then generated hostile inputs (a fresh seed each run, printed;
// ONCEJOB_KEYS_SEED replays one) through the Go SDK and, in one node
// process (clientsdk/typescript/test/keys_oracle.mjs), the package's
// workId, submitKey and normalizeUrl: the same key, or both refuse.
func TestKeysDifferentialTypeScript(t *testing.T) {
	t.Parallel()
	requireTypeScriptClient(t)

	raw, err := os.ReadFile(corpusFile)
	require.NoError(t, err)
	var corpus []keyInput
	require.NoError(t, json.Unmarshal(raw, &corpus))

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ONCEJOB_KEYS_SEED"); s != "" {
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (replay: ONCEJOB_KEYS_SEED=%d go test ./clientsdk -run TestKeysDifferentialTypeScript)", seed, seed)
	g := &keyGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	inputs := append([]keyInput(nil), corpus...)
	for range tsGeneratedInputs {
		inputs = append(inputs, g.input())
	}

	answers := runOracle(t, inputs, nil, "node", "typescript/test/keys_oracle.mjs")
	counts, refusedBy := map[string]int{}, map[string]int{}
	var failures []string
	unrepresentable := 0
	for i, in := range inputs {
		goOut, goErr := goAnswer(in)
		if !jsRepresentable(in) {
			// JavaScript strings cannot hold it, so there is nothing to
			// compare. Go refuses most such inputs, but not all: in a payload
			// with a duplicate member name, the last value wins and an
			// invalid earlier one is never read (seed 1796450868115884400).
			_ = goErr
			unrepresentable++
			continue
		}
		ts := answers[i]
		counts[in.Op]++
		if goErr != nil && ts.Err != "" {
			refusedBy[in.Op]++
		}
		if !ts.Crash && (goErr != nil) == (ts.Err != "") && goOut == ts.Out {
			continue
		}
		entry, _ := json.Marshal(in)
		where := "generated"
		if i < len(corpus) {
			where = "corpus"
		}
		failures = append(failures, fmt.Sprintf("%s input %d: Go %q (err %v), TypeScript %q (err %q)\n  corpus entry: %s",
			where, i, goOut, goErr, ts.Out, ts.Err, entry))
	}
	t.Logf("%d inputs (%d from the corpus) %v, refused by both %v; %d not representable in a JS string (skipped)",
		len(inputs), len(corpus), counts, refusedBy, unrepresentable)
	if len(failures) > 0 {
		if len(failures) > 20 {
			failures = append(failures[:20], fmt.Sprintf("... and %d more", len(failures)-20))
		}
		t.Fatalf("seed %d: Go and TypeScript disagree on %d inputs:\n%s", seed, len(failures), strings.Join(failures, "\n"))
	}
	require.GreaterOrEqual(t, len(inputs)-len(corpus), 1000)
	for op, n := range counts {
		require.Less(t, refusedBy[op], n*3/4, "%s: too few inputs accepted", op)
	}
}

// highSurrogateEscape is a JSON escape of a high surrogate.
var highSurrogateEscape = regexp.MustCompile(`(?i)\\ud[89ab][0-9a-f]{2}`)

// jsRepresentable says whether the oracle's JS strings can hold in as Go
// sees it. A JS string holds a byte that is not UTF-8 as a lone low
// surrogate (as Python's surrogateescape does), which, right after a high
// surrogate escape in JSON text, JSON.parse pairs with it into one valid
// character: a JavaScript caller can never pass what Go refuses there, so
// there is nothing to compare. (The refusal of the escape alone, and of
// the byte alone, is compared everywhere else.)
func jsRepresentable(in keyInput) bool {
	for _, s := range []string{in.Payload, in.Params, in.Text} {
		for _, m := range highSurrogateEscape.FindAllStringIndex(s, -1) {
			if r, size := utf8.DecodeRuneInString(s[m[1]:]); r == utf8.RuneError && size == 1 {
				return false
			}
		}
	}
	return true
}

// requireTypeScriptClient skips (fails under CI=true) without node or the
// built package.
func requireTypeScriptClient(t *testing.T) {
	t.Helper()
	msg := ""
	if out, err := exec.Command("node", "--version").CombinedOutput(); err != nil {
		msg = fmt.Sprintf("node is missing (%v: %s); install with: apt-get install -y nodejs npm, then make ts", err, strings.TrimSpace(string(out)))
	} else if _, err := os.Stat("typescript/dist/index.js"); err != nil {
		msg = "the TypeScript client is not built (typescript/dist): run make ts"
	}
	if msg == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIP: " + msg)
}

// runOracle sends every input, as pythonRequest writes it, to one process
// (name args..., with env added to this process's environment) as JSON
// lines and returns its answers in order.
func runOracle(t *testing.T, inputs []keyInput, env []string, name string, args ...string) []keyAnswer {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	go func() {
		w := bufio.NewWriter(stdin)
		for _, in := range inputs {
			_, _ = w.WriteString(pythonRequest(in) + "\n")
		}
		_ = w.Flush()
		_ = stdin.Close()
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	answers := make([]keyAnswer, 0, len(inputs))
	for sc.Scan() {
		var a keyAnswer
		require.NoError(t, json.Unmarshal(sc.Bytes(), &a), "%s", sc.Bytes())
		answers = append(answers, a)
	}
	require.NoError(t, sc.Err())
	require.NoError(t, cmd.Wait(), "%s: %s", name, stderr.String())
	require.Len(t, answers, len(inputs), "%s: %s", name, stderr.String())
	return answers
}

// TestKeysEveryCodePointAgreesTypeScript is TestKeysEveryCodePointAgrees
// for the TypeScript client: every code point Unicode 14 assigns (Python's
// unicodedata lists them), alone as a host label and between two letters,
// through Go's NormalizeURL and the package's normalizeUrl: one result, or
// refused by both.
func TestKeysEveryCodePointAgreesTypeScript(t *testing.T) {
	t.Parallel()
	requireKeysPython(t)
	requireTypeScriptClient(t)
	out, err := exec.Command(python, "-c", `
import json, unicodedata
print(json.dumps([cp for cp in range(0x80, 0x110000)
                  if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]))`).Output()
	require.NoError(t, err)
	var cps []rune
	require.NoError(t, json.Unmarshal(out, &cps))
	require.Greater(t, len(cps), 140000, "Unicode 14 assigns more")
	inputs := make([]keyInput, 0, 2*len(cps))
	for _, r := range cps {
		inputs = append(inputs, keyInput{Op: "url", In: "https://" + string(r) + ".example/"}, keyInput{Op: "url", In: "https://a" + string(r) + "b.example/"})
	}
	answers := runOracle(t, inputs, nil, "node", "typescript/test/keys_oracle.mjs")
	var diffs []string
	accepted := 0
	for i, in := range inputs {
		goOut, goErr := goAnswer(in)
		if goErr == nil {
			accepted++
		}
		if ts := answers[i]; ts.Crash || (goErr != nil) != (ts.Err != "") || goOut != ts.Out {
			diffs = append(diffs, fmt.Sprintf("%+q: Go %q (%v), TypeScript %q (%s)", in.In, goOut, goErr, ts.Out, ts.Err))
		}
	}
	t.Logf("%d code points, %d inputs, %d accepted by both", len(cps), len(inputs), accepted)
	require.Empty(t, diffs[:min(len(diffs), 30)], "%d disagreements", len(diffs))
	require.Greater(t, accepted, 100000)
}
