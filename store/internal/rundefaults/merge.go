// Package rundefaults gives the jobs of a run their run's params and labels
// when a store reads them (docs/architecture.md, "Runs": a run's defaults
// are stored once, on its row; each item's job row holds its own params and
// labels and the run's id). Both stores use it: Merge writes the JSON text
// of the merged params exactly as the store would have returned a job row
// that held them, and Cache keeps the defaults of the runs a process has
// read (a run's defaults never change).
package rundefaults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Style is how a store's JSON objects read back: the text the store would
// return for a column that held the merged params.
type Style int

const (
	// Jsonb is Postgres's jsonb output: members sorted by the length of
	// their names then by their bytes, written `{"a": 1, "bb": 2}`.
	Jsonb Style = iota
	// Canonical is jobkey.Canonical's text, which the embedded store keeps
	// as it was given: members sorted by the bytes of their names, written
	// `{"a":1,"bb":2}`.
	Canonical
)

// member is one top-level member of an object's text: its name and its
// value's text as written.
type member struct {
	name  string
	value json.RawMessage
}

// Merge is the JSON text of the object base with over's members put over
// its own, the rule SubmitJobs applies to a run's params and an item's (an
// item's member wins, whatever its value: jobspec.WithRunDefaults). Both
// are objects as the store returns them in style; each value's text is
// kept as it is, so the result is the text the store returns for the
// merged object. An empty side returns the other unchanged (shared, not
// copied: read only).
func Merge(style Style, base, over []byte) ([]byte, error) {
	if emptyObject(base) {
		return over, nil
	}
	parsed, err := members(base, nil)
	if err != nil {
		return nil, fmt.Errorf("run params: %w", err)
	}
	return mergeParsed(style, base, parsed, over)
}

// mergeParsed is Merge with base's members parsed (a Cache parses a run's
// once, not once a job).
func mergeParsed(style Style, base []byte, parsed []member, over []byte) ([]byte, error) {
	if len(parsed) == 0 {
		return over, nil
	}
	if emptyObject(over) {
		return base, nil
	}
	merged, err := overlay(slices.Clone(parsed), over)
	if err != nil {
		return nil, fmt.Errorf("job params: %w", err)
	}
	slices.SortFunc(merged, style.compare)
	out := bytes.NewBuffer(make([]byte, 0, len(base)+len(over)))
	out.WriteByte('{')
	for i, m := range merged {
		if i > 0 {
			out.WriteString(style.separator())
		}
		style.writeName(out, m.name)
		out.WriteString(style.colon())
		out.Write(m.value)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// overlay puts the members of the object text over on base's: each
// replaces base's member of its name, or is added.
func overlay(base []member, over []byte) ([]member, error) {
	index := make(map[string]int, len(base))
	for i, m := range base {
		index[m.name] = i
	}
	own, err := members(over, nil)
	if err != nil {
		return nil, err
	}
	for _, m := range own {
		if i, ok := index[m.name]; ok {
			base[i].value = m.value
			continue
		}
		base = append(base, m)
	}
	return base, nil
}

// emptyObject reports whether text is an object of no members (or
// nothing: a column that was never written).
func emptyObject(text []byte) bool {
	t := bytes.TrimSpace(text)
	return len(t) == 0 || bytes.Equal(t, []byte("{}"))
}

// members appends the top-level members of the object text to out, in
// the order written.
func members(text []byte, out []member) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("not a JSON object")
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		out = append(out, member{name: name, value: value})
	}
	return out, nil
}

func (s Style) compare(a, b member) int {
	if s == Jsonb && len(a.name) != len(b.name) {
		return len(a.name) - len(b.name)
	}
	return strings.Compare(a.name, b.name)
}

func (s Style) separator() string {
	if s == Jsonb {
		return ", "
	}
	return ","
}

func (s Style) colon() string {
	if s == Jsonb {
		return ": "
	}
	return ":"
}

// writeName writes a member's name as the style quotes it: Postgres's
// escape_json (\b \f \n \r \t \" \\, any other byte below 0x20 as \u00xx,
// everything else as itself), or encoding/json's quoting without HTML
// escaping (jobkey.Canonical's).
func (s Style) writeName(out *bytes.Buffer, name string) {
	if s == Canonical {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(name)        // a string always encodes
		out.Truncate(out.Len() - 1) // Encode appends a newline
		return
	}
	out.WriteByte('"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		default:
			if c < 0x20 {
				fmt.Fprintf(out, `\u%04x`, c)
			} else {
				out.WriteByte(c)
			}
		}
	}
	out.WriteByte('"')
}
