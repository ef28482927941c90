package clientsdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/oncejob/oncejob/jobkey"
)

// WorkID returns the idempotency key of one unit of work: the lower-case hex
// sha256 of
//
//	kind + ":" + decimal(version) + ":" + canonical JSON of payload
//
// where the canonical JSON is the server's own (jobkey.Canonical: object
// keys sorted by their UTF-8 bytes, string values trimmed, numbers in one
// normal form; the algorithm is written out in the jobkey package) of the
// payload as JSON, after removing the members the drop pointers name.
//
// The same work always gets the same key, in any process and any language
// (the Python SDK's work_id reproduces it bit for bit; the shared vectors in
// clientsdk/testdata prove it), so a retry after a crash is still a replay
// and never a second job.
//
// kind names what the work is ("invoice.extract"): 1-128 characters from
// A-Z a-z 0-9 . _ / -. version (>= 1) is the caller's version of what
// counts as the same work: bump it to re-key on purpose.
//
// payload is anything encoding/json marshals (a json.RawMessage is taken as
// JSON text, so number spellings such as 1.0 and 1e0 are kept until
// canonicalisation folds them). drop lists RFC 6901 JSON Pointers of
// volatile members, such as "/received_at" or "/meta/trace_id", removed
// before hashing; a pointer that names nothing is ignored, and an array
// index removes that element.
//
// Refused, in Go and Python alike (docs/keys.md): a lone surrogate escape
// or invalid UTF-8 in a name or string, and arrays and objects nested
// deeper than MaxWorkIDDepth.
func WorkID(kind string, version int, payload any, drop ...string) (string, error) {
	pre, err := workIDPreimage(kind, version, payload, drop)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(pre)
	return hex.EncodeToString(sum[:]), nil
}

// workIDPreimage returns what WorkID hashes: "kind:version:" and the
// canonical JSON of the payload without the dropped members.
func workIDPreimage(kind string, version int, payload any, drop []string) ([]byte, error) {
	if err := validKind(kind); err != nil {
		return nil, err
	}
	if version < 1 {
		return nil, fmt.Errorf("oncejob: WorkID version must be >= 1, got %d", version)
	}
	v, err := jsonValue(payload)
	if err != nil {
		return nil, err
	}
	for _, p := range drop {
		tokens, err := parsePointer(p)
		if err != nil {
			return nil, err
		}
		v = removeAt(v, tokens)
	}
	canonical, err := jobkey.Canonical(v)
	if err != nil {
		return nil, fmt.Errorf("oncejob: WorkID payload: %w", err)
	}
	return append([]byte(kind+":"+strconv.Itoa(version)+":"), canonical...), nil
}

func validKind(kind string) error {
	if len(kind) == 0 || len(kind) > 128 {
		return fmt.Errorf("oncejob: WorkID kind must be 1-128 characters, got %d", len(kind))
	}
	for _, c := range []byte(kind) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._/-", c) >= 0
		if !ok {
			return fmt.Errorf("oncejob: WorkID kind %q: only A-Z a-z 0-9 . _ / - are allowed", kind)
		}
	}
	return nil
}

// jsonValue returns payload as the tree encoding/json decodes JSON into,
// numbers as json.Number: what the server would see had it been sent.
func jsonValue(payload any) (any, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("oncejob: WorkID payload: %w", err)
	}
	// encoding/json writes invalid UTF-8 in a Go string as the escape
	// \ufffd and a real U+FFFD as itself, so in the text it marshalled
	// from a Go value that escape - a real escape, not the same six
	// characters after an escaped backslash, as in "C:\\ufffd.txt" - is
	// invalid UTF-8. JSON text given as such says what it means.
	_, raw := payload.(json.RawMessage)
	b, mark := markInvalidText(b, !raw)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("oncejob: WorkID payload: %w", err)
	}
	if err := checkValue(v, mark, 0); err != nil {
		return nil, fmt.Errorf("oncejob: WorkID payload: %w", err)
	}
	return v, nil
}

// MaxWorkIDDepth is how deeply arrays and objects may nest in a WorkID
// payload: deeper is refused, in every language, rather than crash one of
// them (docs/keys.md).
const MaxWorkIDDepth = 128

// checkValue refuses a payload WorkID cannot hash the same in every
// language: arrays and objects nested deeper than MaxWorkIDDepth, and a
// name or string holding mark, where the JSON text had a lone surrogate or
// invalid UTF-8 (not Unicode scalar values: a Go string cannot carry them,
// Python's str would). It looks at the value as decoded, so a member that
// a later duplicate name replaces counts for nothing, as in Python.
func checkValue(v any, mark rune, depth int) error {
	switch x := v.(type) {
	case string:
		if mark != 0 && strings.ContainsRune(x, mark) {
			return errNotUnicode
		}
	case map[string]any:
		if depth++; depth > MaxWorkIDDepth {
			return fmt.Errorf("arrays and objects nest deeper than %d", MaxWorkIDDepth)
		}
		for k, e := range x {
			if err := checkValue(k, mark, depth); err != nil {
				return err
			}
			if err := checkValue(e, mark, depth); err != nil {
				return err
			}
		}
	case []any:
		if depth++; depth > MaxWorkIDDepth {
			return fmt.Errorf("arrays and objects nest deeper than %d", MaxWorkIDDepth)
		}
		for _, e := range x {
			if err := checkValue(e, mark, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

var errNotUnicode = fmt.Errorf("a string holds a lone surrogate or invalid UTF-8: not valid Unicode")

// markInvalidText returns valid JSON text b with every lone surrogate
// escape and every byte of invalid UTF-8 replaced by mark, a private-use
// character found nowhere else in b (encoding/json would silently decode
// them to U+FFFD), or b and 0 when it has neither. With marshalled, b is
// what encoding/json wrote for a Go value and its \ufffd escapes, which
// stand for invalid UTF-8 there, are replaced too.
func markInvalidText(b []byte, marshalled bool) ([]byte, rune) {
	type span struct{ from, to int }
	var bad []span
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				bad = append(bad, span{i, i + 1})
			}
			i += size
			continue
		}
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && b[i+1] == 'u':
			r := hexRune(b[i+2 : i+6])
			if marshalled && string(b[i+2:i+6]) == "fffd" {
				bad = append(bad, span{i, i + 6})
			} else if utf16.IsSurrogate(r) {
				if r < 0xDC00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if low := hexRune(b[i+8 : i+12]); low >= 0xDC00 && low <= 0xDFFF {
						i += 12
						continue
					}
				}
				bad = append(bad, span{i, i + 6})
			}
			i += 6
			continue
		case c == '\\' && inString:
			i += 2
			continue
		}
		i++
	}
	if len(bad) == 0 {
		return b, 0
	}
	mark := rune(0xF0000)
	for ; containsRune(b, mark); mark++ {
	}
	var out bytes.Buffer
	last := 0
	for _, s := range bad {
		out.Write(b[last:s.from])
		out.WriteRune(mark)
		last = s.to
	}
	out.Write(b[last:])
	return out.Bytes(), mark
}

// containsRune reports whether JSON text b holds r, as itself or as an
// escaped surrogate pair.
func containsRune(b []byte, r rune) bool {
	if bytes.Contains(b, []byte(string(r))) {
		return true
	}
	hi, lo := utf16.EncodeRune(r)
	return bytes.Contains(bytes.ToLower(b), []byte(fmt.Sprintf(`\u%04x\u%04x`, hi, lo)))
}

// hexRune reads the four hex digits of a \u escape in valid JSON text.
func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		r = r<<4 | rune(unhex(c))
	}
	return r
}

// parsePointer splits an RFC 6901 JSON Pointer into its unescaped tokens.
// The empty pointer (the whole document) is refused: dropping everything is
// never what a caller means.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("oncejob: drop pointer %q must start with '/' (RFC 6901)", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("oncejob: drop pointer %q: '~' must be followed by 0 or 1", p)
			}
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// removeAt returns v without the member or element the tokens name, or v
// unchanged when they name nothing.
func removeAt(v any, tokens []string) any {
	switch x := v.(type) {
	case map[string]any:
		e, ok := x[tokens[0]]
		if !ok {
			return v
		}
		if len(tokens) == 1 {
			delete(x, tokens[0])
		} else {
			x[tokens[0]] = removeAt(e, tokens[1:])
		}
	case []any:
		i, ok := arrayIndex(tokens[0], len(x))
		if !ok {
			return v
		}
		if len(tokens) == 1 {
			return append(x[:i:i], x[i+1:]...)
		}
		x[i] = removeAt(x[i], tokens[1:])
	}
	return v
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a
// leading zero, within the array.
func arrayIndex(t string, n int) (int, bool) {
	if t == "" || (len(t) > 1 && t[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(t) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(t)
	if err != nil || i >= n {
		return 0, false
	}
	return i, true
}
