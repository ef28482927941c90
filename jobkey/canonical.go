// Package jobkey computes the keys the server derives from a request
// (docs/architecture.md, "Keys"): the request fingerprint and the dedup key. Both hash a canonical
// JSON form (sorted keys, trimmed strings, normalised numbers, no volatile
// fields) and carry a versioned prefix, so a change of logic re-keys on
// purpose rather than by accident.
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
// deterministic; HTML escaping is turned off so the form is plain JSON.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
}
