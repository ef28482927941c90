package clientsdk_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeysEveryCodePointAgrees: every code point Unicode 14 assigns (the
// version of Python's tables; Go's are newer), alone as a host label and
// between two letters, is accepted by Go's NormalizeURL and Python's
// normalize_url alike, with one result, or refused by both. So the
// per-character rules of docs/keys.md (UTS #46 with the letter-digit rule)
// give what Python's IDNA2008 tables give: issue 30 found 59 combining
// marks Go accepted and Python refused.
func TestKeysEveryCodePointAgrees(t *testing.T) {
	t.Parallel()
	requireKeysPython(t)
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
	answers := runPythonOracle(t, inputs)
	var diffs []string
	accepted := 0
	for i, in := range inputs {
		goOut, goErr := goAnswer(in)
		if goErr == nil {
			accepted++
		}
		if py := answers[i]; (goErr != nil) != (py.Err != "") || goOut != py.Out {
			diffs = append(diffs, fmt.Sprintf("%+q: Go %q (%v), Python %q (%s)", in.In, goOut, goErr, py.Out, py.Err))
		}
	}
	t.Logf("%d code points, %d inputs, %d accepted by both", len(cps), len(inputs), accepted)
	require.Empty(t, diffs[:min(len(diffs), 30)], "%d disagreements", len(diffs))
	require.Greater(t, accepted, 100000)
}
