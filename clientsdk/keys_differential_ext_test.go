package clientsdk_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// python is Debian's interpreter, which has the idna package the Python
// SDK's normalize_url needs (the pyenv one first on PATH may not).
const python = "/usr/bin/python3"

const (
	corpusFile      = "testdata/keys_corpus.json"
	generatedInputs = 12000
)

// keyInput is one request to both SDKs: op "url" (NormalizeURL), "workid"
// (WorkID of JSON text) or "submit" (SubmitKey of a text document).
type keyInput struct {
	Op string `json:"op"`
	// url: In, or InBase64 for input that is not UTF-8.
	In       string `json:"in,omitempty"`
	InBase64 string `json:"in_base64,omitempty"`
	// workid.
	Kind    string   `json:"kind,omitempty"`
	Version int      `json:"version,omitempty"`
	Payload string   `json:"payload,omitempty"` // JSON text, as written
	Drop    []string `json:"drop,omitempty"`
	// submit.
	Pipeline     string `json:"pipeline,omitempty"`
	Text         string `json:"text,omitempty"`
	MediaType    string `json:"media_type,omitempty"`
	Name         string `json:"name,omitempty"`
	ModelProfile string `json:"model_profile,omitempty"`
	Params       string `json:"params,omitempty"` // a JSON object
	// Note says why a corpus entry is there.
	Note string `json:"note,omitempty"`
}

type keyAnswer struct {
	Out   string `json:"out"`
	Err   string `json:"err"`
	Crash bool   `json:"crash"`
}

// TestKeysDifferential runs the committed corpus of inputs that once made
// the SDKs disagree, then thousands of generated hostile inputs (a fresh
// seed each run, printed; ONCEJOB_KEYS_SEED replays one), through the Go
// SDK and, in one Python process, the Python SDK: NormalizeURL, WorkID and
// SubmitKey must give the same answer, or both refuse the input. Any
// difference fails with the input, written as a corpus entry to add to
// testdata/keys_corpus.json. docs/keys.md is the spec both follow.
func TestKeysDifferential(t *testing.T) {
	t.Parallel()
	requireKeysPython(t)

	raw, err := os.ReadFile(corpusFile)
	require.NoError(t, err)
	var corpus []keyInput
	require.NoError(t, json.Unmarshal(raw, &corpus))
	require.NotEmpty(t, corpus)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ONCEJOB_KEYS_SEED"); s != "" {
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (replay: ONCEJOB_KEYS_SEED=%d go test ./clientsdk -run TestKeysDifferential)", seed, seed)
	g := &keyGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	inputs := append([]keyInput(nil), corpus...)
	for range generatedInputs {
		inputs = append(inputs, g.input())
	}

	start := time.Now()
	answers := runPythonOracle(t, inputs)
	pyTime := time.Since(start)
	counts, refusedBy := map[string]int{}, map[string]int{}
	var failures []string
	start = time.Now()
	for i, in := range inputs {
		goOut, goErr := goAnswer(in)
		py := answers[i]
		counts[in.Op]++
		agree := !py.Crash && (goErr != nil) == (py.Err != "") && goOut == py.Out
		if goErr != nil && py.Err != "" {
			refusedBy[in.Op]++
		}
		if agree {
			continue
		}
		entry, _ := json.Marshal(in)
		where := "generated"
		if i < len(corpus) {
			where = "corpus"
		}
		failures = append(failures, fmt.Sprintf("%s input %d: Go %q (err %v), Python %q (err %q)\n  corpus entry: %s",
			where, i, goOut, goErr, py.Out, py.Err, entry))
	}
	t.Logf("%d inputs (%d from the corpus) %v, refused by both %v; Python took %v, Go %v",
		len(inputs), len(corpus), counts, refusedBy, pyTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if len(failures) > 0 {
		if len(failures) > 20 {
			failures = append(failures[:20], fmt.Sprintf("... and %d more", len(failures)-20))
		}
		t.Fatalf("seed %d: Go and Python disagree on %d inputs:\n%s", seed, len(failures), strings.Join(failures, "\n"))
	}
	require.GreaterOrEqual(t, len(inputs)-len(corpus), 10000)
	// Both refusing everything would agree too: the inputs must exercise
	// the accepting paths of every function.
	for op, n := range counts {
		require.Less(t, refusedBy[op], n*3/4, "%s: too few inputs accepted", op)
	}
}

// requireKeysPython skips (fails under CI=true) without Debian's python3
// and its idna package.
func requireKeysPython(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import idna").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIP: %s cannot import idna (%v: %s); install with: apt-get install -y python3 python3-idna",
			python, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// runPythonOracle sends every input to one Python process as JSON lines and
// returns its answers in order.
func runPythonOracle(t *testing.T, inputs []keyInput) []keyAnswer {
	t.Helper()
	return runOracle(t, inputs, []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8"}, python, "python/tests/keys_oracle.py")
}

// pythonRequest is in as the oracle reads it: every string field with a Go
// string's invalid UTF-8 bytes as lone surrogates U+DC80-U+DCFF.
func pythonRequest(in keyInput) string {
	if in.InBase64 != "" {
		b, _ := base64.StdEncoding.DecodeString(in.InBase64)
		in.In, in.InBase64 = string(b), ""
	}
	var b strings.Builder
	b.WriteString(`{"op":` + pyString(in.Op))
	field := func(name, v string) { b.WriteString(`,"` + name + `":` + pyString(v)) }
	switch in.Op {
	case "url":
		field("in", in.In)
	case "workid":
		field("kind", in.Kind)
		b.WriteString(`,"version":` + strconv.Itoa(in.Version))
		field("payload", in.Payload)
		b.WriteString(`,"drop":[`)
		for i, d := range in.Drop {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(pyString(d))
		}
		b.WriteString("]")
	case "submit":
		field("pipeline", in.Pipeline)
		field("text", in.Text)
		field("media_type", in.MediaType)
		field("name", in.Name)
		field("model_profile", in.ModelProfile)
		field("params", in.Params)
	}
	b.WriteString("}")
	return b.String()
}

// pyString is s as a JSON string whose invalid UTF-8 bytes are \udcXX
// escapes (what Python's surrogateescape makes of them).
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\udc%02x`, s[i])
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// goAnswer is what the Go SDK answers.
func goAnswer(in keyInput) (string, error) {
	switch in.Op {
	case "url":
		s := in.In
		if in.InBase64 != "" {
			b, err := base64.StdEncoding.DecodeString(in.InBase64)
			if err != nil {
				return "", err
			}
			s = string(b)
		}
		return clientsdk.NormalizeURL(s)
	case "workid":
		return clientsdk.WorkID(in.Kind, in.Version, json.RawMessage(in.Payload), in.Drop...)
	case "submit":
		// Params reach SubmitKey as a protobuf Struct, which holds only
		// valid UTF-8 (the generator writes none other into them) and
		// doubles: a number only a replaced duplicate member holds is no
		// error, as in Python's json.loads.
		dec := json.NewDecoder(strings.NewReader(in.Params))
		dec.UseNumber()
		var params map[string]any
		if err := dec.Decode(&params); err != nil {
			return "", err
		}
		if err := numbersToFloat(params); err != nil {
			return "", err
		}
		st, err := structpb.NewStruct(params)
		if err != nil {
			return "", err
		}
		return clientsdk.SubmitKey(&oncejobv1.SubmitJobRequest{
			Pipeline:     in.Pipeline,
			ModelProfile: in.ModelProfile,
			Params:       st,
			Document: &oncejobv1.Document{
				Name: in.Name, MediaType: in.MediaType,
				Content: &oncejobv1.Document_Text{Text: in.Text},
			},
		})
	}
	return "", fmt.Errorf("unknown op %q", in.Op)
}

// numbersToFloat turns the json.Numbers of v into float64s in place.
func numbersToFloat(v any) error {
	set := func(e any, put func(any)) error {
		if n, ok := e.(json.Number); ok {
			f, err := n.Float64()
			if err != nil {
				return err
			}
			put(f)
			return nil
		}
		return numbersToFloat(e)
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if err := set(e, func(f any) { x[k] = f }); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := set(e, func(f any) { x[i] = f }); err != nil {
				return err
			}
		}
	}
	return nil
}
