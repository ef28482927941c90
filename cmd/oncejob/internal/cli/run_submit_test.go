package cli

import (
	"bufio"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
)

// TestRunSubmitFlagsValidate: --run is required and --batch is 1-1000,
// each refused as a usage mistake (exit 2) before anything is sent.
func TestRunSubmitFlagsValidate(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) *runSubmitFlags {
		f := &runSubmitFlags{}
		fs := flag.NewFlagSet("run submit", flag.ContinueOnError)
		f.register(fs)
		require.NoError(t, fs.Parse(args))
		return f
	}
	require.NoError(t, parse("--run", "r").validate())
	require.NoError(t, parse("--run", "r", "--batch", "1").validate())
	require.NoError(t, parse("--run", "r", "--batch", "1000").validate())
	for _, args := range [][]string{{}, {"--run", "r", "--batch", "0"}, {"--run", "r", "--batch", "1001"}} {
		err := parse(args...).validate()
		require.Error(t, err, "%q", args)
		require.Equal(t, cmdline.ExitUsage, cmdline.ExitCode(err), "%q: a usage mistake", args)
	}
}

// TestParseItem: an item starts from the run's defaults (its own params
// and labels win); a line with both or neither of text and path is no
// item; --id-field keys an item by that field, a URL normalised.
func TestParseItem(t *testing.T) {
	t.Parallel()
	var params, labels keyValues
	require.NoError(t, params.Set("lang=en"))
	require.NoError(t, params.Set("n=3"))
	require.NoError(t, labels.Set("team=a"))
	defaults, err := runDefaults("summarize", "", params, labels)
	require.NoError(t, err)

	item, err := parseItem([]byte(`{"text":"hi","params":{"lang":"de"},"labels":{"src":"x"}}`), defaults, "")
	require.NoError(t, err)
	req := item.Request
	require.Equal(t, "hi", req.GetDocument().GetText())
	require.Equal(t, "text/plain", req.GetDocument().GetMediaType())
	require.Equal(t, map[string]any{"lang": "de", "n": float64(3)}, req.GetParams().AsMap())
	require.Equal(t, map[string]string{"team": "a", "src": "x"}, req.GetLabels())
	require.Empty(t, item.Key, "no --id-field: the SDK derives the key from the request")

	for _, line := range []string{`{"text":"a","path":"b"}`, `{"name":"x"}`, `not json`, `[1]`} {
		_, err := parseItem([]byte(line), defaults, "")
		require.Error(t, err, line)
	}

	key := func(line string) string {
		t.Helper()
		item, err := parseItem([]byte(line), defaults, "url")
		require.NoError(t, err, line)
		require.NotEmpty(t, item.Key, line)
		return item.Key
	}
	a := key(`{"text":"one","url":"https://Example.com:443/p?b=2&a=1&utm_source=x#top"}`)
	require.Equal(t, a, key(`{"text":"another text","url":"https://example.com/p?a=1&b=2"}`), "one URL, one key, whatever the text")
	require.NotEqual(t, a, key(`{"text":"one","url":"https://example.com/q"}`))
	_, err = parseItem([]byte(`{"text":"one"}`), defaults, "url")
	require.ErrorContains(t, err, `has no field "url"`)
}

// TestParseItemErrorsInTheUsersWords: a line that is not an item says
// what was expected, in the items file's words - never encoding/json's
// "cannot unmarshal array into Go value of type map[string]json.RawMessage"
// (issue 30, finding 8).
func TestParseItemErrorsInTheUsersWords(t *testing.T) {
	t.Parallel()
	defaults, err := runDefaults("summarize", "", nil, nil)
	require.NoError(t, err)
	for line, want := range map[string]string{
		`[1]`:                               `not a JSON object: the line is an array; each line must be one object, such as {"text": "..."}`,
		`"text"`:                            `not a JSON object: the line is a string; each line must be one object`,
		`42`:                                `not a JSON object: the line is a number; each line must be one object`,
		`not json`:                          `not a JSON object: invalid character 'o' in literal null (expecting 'u') at column 2`,
		`{"text": "a"`:                      `not a JSON object: the line ends before the object does`,
		`{"text": 5}`:                       `field "text" must be a string; found a number`,
		`{"text": "a", "params": [1]}`:      `field "params" must be an object; found an array`,
		`{"text": "a", "labels": {"x": 1}}`: `field "labels" must be an object of strings; found a number`,
		`{"text": "a", "name": true}`:       `field "name" must be a string; found true or false`,
	} {
		_, err := parseItem([]byte(line), defaults, "")
		require.Error(t, err, line)
		require.True(t, strings.HasPrefix(err.Error(), want), "%s: %v", line, err)
		require.NotContains(t, err.Error(), "Go value", line)
		require.NotContains(t, err.Error(), "Go struct", line)
	}
}

// TestReadLines: readLines hands over every line, then closes; a line
// longer than an item may be ends the reading with bufio.ErrTooLong.
func TestReadLines(t *testing.T) {
	t.Parallel()
	lines, errOf, stop := readLines(strings.NewReader("a\n\nb\nc"))
	defer stop()
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	require.Equal(t, []string{"a", "", "b", "c"}, got)
	require.NoError(t, errOf())

	lines, errOf, stop = readLines(strings.NewReader("ok\n" + strings.Repeat("x", maxItemLine+1) + "\nlost\n"))
	defer stop()
	got = got[:0]
	for l := range lines {
		got = append(got, l)
	}
	require.Equal(t, []string{"ok"}, got)
	require.ErrorIs(t, errOf(), bufio.ErrTooLong)
}

// TestShellCommand: the resume hint of an interrupted run submit is the
// command line as a POSIX shell reads it back.
func TestShellCommand(t *testing.T) {
	t.Parallel()
	require.Equal(t, `oncejob run submit 'my items.jsonl' --run 'it'\''s' --label=a:b ''`,
		shellCommand([]string{"oncejob", "run", "submit", "my items.jsonl", "--run", "it's", "--label=a:b", ""}))
}
