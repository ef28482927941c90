package jobkey

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestWriteStringIsEncodingJSONs checks writeString's shortcut against
// encoding/json, which defines the canonical form: every byte alone, and
// strings around the shortcut's edges.
func TestWriteStringIsEncodingJSONs(t *testing.T) {
	t.Parallel()
	cases := []string{"", "plain key 42", "sha:0123abcdef", `quo"te`, `back\slash`, "tab\there", "new\nline",
		"<html>&amp;", "\u2028\u2029", "é", "\xff\xfe", "~\x7f", " leading and trailing "}
	for b := range 256 {
		cases = append(cases, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"z")
	}
	for _, s := range cases {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		writeString(&got, s)
		if got.String()+"\n" != want.String() {
			t.Errorf("writeString(%q) = %s, encoding/json: %s", s, got.String(), want.String())
		}
	}
}
