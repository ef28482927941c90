package clientsdk_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// The findings of issue 19, one test each, answered as docs/keys.md says.
// clientsdk/python/tests/test_keys_spec.py asserts the same in Python.

func normalized(t *testing.T, raw string) string {
	t.Helper()
	got, err := clientsdk.NormalizeURL(raw)
	require.NoError(t, err, raw)
	again, err := clientsdk.NormalizeURL(got)
	require.NoError(t, err, got)
	require.Equal(t, got, again, "NormalizeURL is idempotent on %q", raw)
	return got
}

func TestKeysEncodedSlashNeverDecoded(t *testing.T) {
	t.Parallel()
	// Go's net/url decoded %2F when the path also held a space: two pages
	// became one item.
	require.Equal(t, "https://example.com/a%2Fb%20c", normalized(t, "https://example.com/a%2Fb c"))
	require.Equal(t, "https://example.com/a/b%20c", normalized(t, "https://example.com/a/b c"))
	require.Equal(t, "https://example.com/a%2Fb", normalized(t, "https://example.com/a%2fb"))
	require.Equal(t, "https://example.com/a%252F", normalized(t, "https://example.com/a%252F"))
}

func TestKeysQueryParameterNeverDropped(t *testing.T) {
	t.Parallel()
	// ';' is data, not a separator.
	require.Equal(t, "https://example.com/p?a=1%3Bb%3D2&c=3", normalized(t, "https://example.com/p?a=1;b=2&c=3"))
	// A '%' that starts no escape stands for itself.
	require.Equal(t, "https://example.com/p?a=%25zz&b=1", normalized(t, "https://example.com/p?a=%zz&b=1"))
	require.Equal(t, "https://example.com/p?a=%25&b=%252", normalized(t, "https://example.com/p?b=%2&a=%"))
	// A name without '=' and an empty name are pairs too; only empty
	// segments and tracking parameters go.
	require.Equal(t, "https://example.com/p?=1&a=", normalized(t, "https://example.com/p?a&&=1&utm_source=x&"))
}

func TestKeysHostHasOneForm(t *testing.T) {
	t.Parallel()
	want := "https://xn--bcher-kva.example/"
	for _, raw := range []string{
		"https://Bücher.example/", "https://BÜCHER.EXAMPLE/", "https://xn--bcher-kva.example/",
		"https://XN--BCHER-KVA.example/", "https://B%C3%BCcher.example/", "https://bu\u0308cher.example/",
		"https://bücher\u3002example/", "https://bücher.example:443/",
	} {
		require.Equal(t, want, normalized(t, raw), raw)
	}
	require.Equal(t, "https://xn--fa-hia.de/", normalized(t, "https://faß.de/"), "non-transitional: ß stays")
	require.Equal(t, "https://example.com/", normalized(t, "https://ex%41mple.com/"))
	require.Equal(t, "https://[::ffff:1.2.3.4]/", normalized(t, "https://[0:0:0:0:0:FFFF:0102:0304]:443/"))
	for _, bad := range []string{"https://☃.example/", "https://a\u200db.example/", "https://-ü.example/", "https://ex%zzample.com/",
		"https://[::1%25eth0]/", "https://ü_x.example/", "https://example.com:65536/"} {
		_, err := clientsdk.NormalizeURL(bad)
		require.Error(t, err, bad)
	}
}

func TestKeysControlCharactersRefused(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"https://exa\tmple.com/", "https://example.com/a\nb", "\x01https://example.com/",
		"https://example.com/a\rb", "https://example.com/a\x00", "https://example.com/a\x7f", "https://example.com/\u0085",
		"https://example.com/?a=\x1f", "https://example.com/\xff"} {
		_, err := clientsdk.NormalizeURL(bad)
		require.Error(t, err, "%q", bad)
	}
	// Surrounding ASCII white space is how URLs arrive from files.
	require.Equal(t, "https://example.com/", normalized(t, "\t https://example.com \r\n"))
}

func TestKeysBracketsInPathEncoded(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"https://example.com/a[1]", "https://example.com/a%5B1%5D", "https://example.com/a%5b1%5d"} {
		require.Equal(t, "https://example.com/a%5B1%5D", normalized(t, raw), raw)
	}
}

func TestKeysDeepNestingRefused(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{clientsdk.MaxWorkIDDepth + 1, 1000, 10000} {
		text := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		_, err := clientsdk.WorkID("k", 1, json.RawMessage(text))
		require.Error(t, err, depth) // past 10,000 encoding/json's own bound says so
		var v any = "x"
		for range depth {
			v = []any{v}
		}
		_, err = clientsdk.WorkID("k", 1, v)
		require.Error(t, err, depth)
	}
	text := strings.Repeat("[", clientsdk.MaxWorkIDDepth) + strings.Repeat("]", clientsdk.MaxWorkIDDepth)
	_, err := clientsdk.WorkID("k", 1, json.RawMessage(text))
	require.NoError(t, err)
}

func TestKeysLoneSurrogatesRefused(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`{"s":"x\ud800y"}`, `{"\udc00":1}`, `["\ud83d\u0041"]`, `"\ude00\ud83d"`, "[\"\xff\"]"} {
		_, err := clientsdk.WorkID("k", 1, json.RawMessage(text))
		require.ErrorContains(t, err, "not valid Unicode", text)
	}
	// A Go string cannot hold a surrogate; its counterpart is invalid UTF-8.
	_, err := clientsdk.WorkID("k", 1, map[string]any{"s": "x\xffy"})
	require.Error(t, err)
	_, err = clientsdk.WorkID("k", 1, map[string]any{"x\xed\xa0\x80": 1})
	require.Error(t, err)
	// A pair is its character; U+FFFD itself is a character like any other.
	pair, err := clientsdk.WorkID("k", 1, json.RawMessage(`"\ud83d\ude00"`))
	require.NoError(t, err)
	emoji, err := clientsdk.WorkID("k", 1, "😀")
	require.NoError(t, err)
	require.Equal(t, emoji, pair)
	_, err = clientsdk.WorkID("k", 1, map[string]any{"s": "\ufffd"})
	require.NoError(t, err)
	// Only the value counts: a member a later duplicate replaces is gone.
	_, err = clientsdk.WorkID("k", 1, json.RawMessage(`{"a":"\ud800","a":1}`))
	require.NoError(t, err)
}

func TestKeysSubmitKeyRefusesTextThatIsNotUnicode(t *testing.T) {
	t.Parallel()
	req := func(text string) *oncejobv1.SubmitJobRequest {
		return &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: text}}}
	}
	_, err := clientsdk.SubmitKey(req("caf\xe9"))
	require.ErrorContains(t, err, "not valid UTF-8")
	_, err = clientsdk.SubmitKey(req("café"))
	require.NoError(t, err)
}

// Issue 30, finding 6: the six characters \ufffd in a Go string are text,
// not the escape encoding/json writes for invalid UTF-8, so a file named
// C:\ufffd.txt has a key, the same as its JSON text's, and so does a
// submission of it without a key of its own.
func TestKeysEscapedBackslashUFFFDIsText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`C:\ufffd.txt`, `\ufffd`, `\\ufffd`, `a\ufffd` + "\ufffd", `\\\ufffd`} {
		fromValue, err := clientsdk.WorkID("k", 1, map[string]any{"file": s, s: 1})
		require.NoError(t, err, s)
		text, err := json.Marshal(map[string]any{"file": s, s: 1})
		require.NoError(t, err)
		fromText, err := clientsdk.WorkID("k", 1, json.RawMessage(text))
		require.NoError(t, err, s)
		require.Equal(t, fromText, fromValue, s)
	}
	_, err := clientsdk.SubmitKey(&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{
		Name: `C:\ufffd.txt`, Content: &oncejobv1.Document_Text{Text: `see C:\ufffd.txt`},
	}})
	require.NoError(t, err)
	// Invalid UTF-8 in a Go string is still refused, beside the text too.
	for _, s := range []string{"x\xffy", `\ufffd` + "\xff", "\xff" + `\\ufffd`} {
		_, err := clientsdk.WorkID("k", 1, map[string]any{"s": s})
		require.ErrorContains(t, err, "not valid Unicode", "%q", s)
	}
}

// Issue 30, finding 7, as docs/keys.md now decides it: a non-ASCII label
// that maps to "xn--..." is refused unless it maps to the A-label of a
// valid U-label (Go decoded "xn--é-" as "é"); the marks of IDNA2008's
// IgnorableBlocks are refused (Go accepted 59 of them); a joiner is
// allowed right after a virama and nowhere else; ẞ maps to "ss" as UTS #46
// maps it, while ß stays. Python: test_keys_spec.py.
func TestKeysIDNAEdges(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://xn--bcher-kva.example/", normalized(t, "https://ｘｎ－－bcher-kva.example/"))
	require.Equal(t, "https://xn--11b2ezcw70k.example/", normalized(t, "https://क्\u200dष.example/"))
	require.Equal(t, "https://xn--11b2ezcs70k.example/", normalized(t, "https://क्\u200cष.example/"))
	require.NotEqual(t, normalized(t, "https://क्\u200dष.example/"), normalized(t, "https://क्ष.example/"), "a joiner is part of the name")
	require.Equal(t, "https://fass.de/", normalized(t, "https://faẞ.de/"))
	require.Equal(t, "https://xn--fa-hia.de/", normalized(t, "https://faß.de/"))
	for _, bad := range []string{
		"https://xn--é-.com/", "https://XN--é.com/", "https://xn--bücher.example/", "https://xn--－x0y.example/", "https://ｘｎ－－zz.example/",
		"https://a\u200db.example/", "https://\u200dक.example/", "https://क\u200d.example/", "https://ب\u200cب.example/", "https://ب\u200c٢.example/",
	} {
		_, err := clientsdk.NormalizeURL(bad)
		require.Error(t, err, "%q", bad)
	}
	marks := 0
	for _, block := range [][2]rune{{0x20D0, 0x20FF}, {0x1D100, 0x1D1FF}, {0x1D200, 0x1D24F}} {
		for r := block[0]; r <= block[1]; r++ {
			if !unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me) {
				continue
			}
			marks++
			_, err := clientsdk.NormalizeURL("https://a" + string(r) + ".example/")
			require.Error(t, err, "%U", r)
		}
	}
	require.GreaterOrEqual(t, marks, 59)
}
