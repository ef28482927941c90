// Package jobkey computes the keys the server derives from a request
// (docs/architecture.md, "Keys"): the request fingerprint and the dedup key. Both hash a canonical
// JSON form (sorted keys, trimmed strings, normalised numbers, no volatile
// fields) and carry a versioned prefix, so a change of logic re-keys on
// purpose rather than by accident.
//
// # Canonical JSON
//
// Canonical is also what clients hash (clientsdk.WorkID, and the Python
// SDK's work_id, which reproduces it bit for bit), so its output is fixed
// and written here exactly. The encoding of a JSON value, as UTF-8, with no
// white space between tokens:
//
//   - null, true, false: as such.
//   - An object: "{", its members sorted by the bytes of their names'
//     UTF-8, each as its name (a string, never trimmed), ":" and its value,
//     separated by ",", then "}". A name given twice in JSON text keeps its
//     last value (as encoding/json decodes it).
//   - An array: "[", its elements in order, separated by ",", then "]".
//   - A string: trimmed of leading and trailing Unicode White_Space (Go's
//     strings.TrimSpace: U+0009-U+000D, U+0020, U+0085, U+00A0, U+1680,
//     U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; not U+200B,
//     U+FEFF or U+001C-U+001F), then quoted as encoding/json quotes without
//     HTML escaping: \" and \\, \b \f \n \r \t, any other character
//     below U+0020 and U+2028, U+2029 as \u00xx, \u2028, \u2029 (lower-case
//     hex), every other character as itself. Invalid UTF-8 in a Go string
//     is written \ufffd; in JSON text, invalid UTF-8 and a lone surrogate
//     escape decode to U+FFFD, written as itself (WorkID refuses both
//     before it gets here: docs/keys.md). No
//     Unicode normalisation: "é" and "e\u0301" differ.
//   - A number: parsed to the nearest IEEE 754 double (integers too, so
//     2^53+1 is 2^53; overflow, NaN and infinities are refused); zero of
//     either sign is "0"; an integral value below 2^53 in magnitude is its
//     integer in plain decimal; any other value is
//     strconv.FormatFloat(f, 'g', -1, 64): the shortest decimal digits that
//     round-trip, in exponent form d.ddde±XX (at least two exponent digits)
//     when the decimal exponent is below -4 or at least 6, plain otherwise
//     (123456.5, 1.2345675e+06, 0.0001, 1e-05, 1e+21).
package jobkey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Canonical returns the canonical JSON encoding of v, a tree of the types
// encoding/json decodes into (map[string]any, []any, string, float64,
// json.Number, bool, nil) plus the Go integer types. Object keys are sorted
// by bytes, string values are trimmed of surrounding white space, numbers
// are written in their shortest form with integers in plain notation, and
// -0 is 0. Two values have the same encoding exactly when they are equal
// after Normalize.
func Canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Normalize returns v as Canonical sees it: strings trimmed, numbers as
// float64 with -0 as 0. It is the equality Canonical preserves.
func Normalize(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool:
		return x, nil
	case string:
		return strings.TrimSpace(x), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := Normalize(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := Normalize(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	f, err := toFloat(v)
	if err != nil {
		return nil, err
	}
	if f == 0 {
		f = 0 // folds -0
	}
	return f, nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		writeString(buf, strings.TrimSpace(x))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		f, err := toFloat(v)
		if err != nil {
			return err
		}
		buf.WriteString(formatNumber(f))
	}
	return nil
}

func toFloat(v any) (float64, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, fmt.Errorf("jobkey: number %q: %w", x, err)
		}
	default:
		return 0, fmt.Errorf("jobkey: cannot canonicalise %T", v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("jobkey: number %v has no JSON form", f)
	}
	return f, nil
}

// formatNumber writes integral values below 2^53 in plain notation and every
// other value in the shortest form that round-trips, so 1, 1.0 and 1e0 are
// one number.
func formatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// writeString writes s as a JSON string. encoding/json's escaping is
// deterministic; HTML escaping is turned off so the form is plain JSON. A
// string of printable ASCII without quote or backslash, which is what keys,
// hashes and names nearly always are, is its own escaped form and is written
// as it is: the encoder costs more than the hash it feeds.
func writeString(buf *bytes.Buffer, s string) {
	if plainJSONString(s) {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
}

// plainJSONString reports whether encoding/json writes s between quotes
// unchanged.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
