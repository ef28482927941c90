package jobkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"strings"
)

// Key prefixes. Bump the version when what a key covers changes, so old and
// new keys never compare equal by accident.
const (
	DedupPrefix       = "dedup:v1:"
	FingerprintPrefix = "fp:v1:"
)

// Computation is everything that decides a job's result: two submissions
// with equal Computations are one computation and are paid for once.
type Computation struct {
	Tenant          string
	DocumentSHA256  string // hex sha256 of the document bytes
	MediaType       string // as returned by NormalizeMediaType
	Pipeline        string
	PipelineVersion int32
	PromptVersion   string
	ModelProfile    string         // resolved, never empty
	Params          map[string]any // the computation's parameters
	// CanonicalParams, when not nil, is Canonical of Params (an empty
	// object for nil), which the caller has already: it is used instead
	// of Params.
	CanonicalParams []byte
}

// DedupKey returns "dedup:v1:" and the hex sha256 of the canonical JSON of c:
// the object of its fields under the names below, written member by member
// in their sorted order, as Canonical writes such a map.
func DedupKey(c Computation) (string, error) {
	params, err := canonicalParams(c.CanonicalParams, c.Params)
	if err != nil {
		return "", err
	}
	buf := newFieldBuffer(len(params) + 256 + len(c.Tenant) + len(c.PromptVersion) + len(c.ModelProfile))
	buf.str("{\"document_sha256\":", c.DocumentSHA256)
	buf.str(",\"media_type\":", c.MediaType)
	buf.str(",\"model_profile\":", c.ModelProfile)
	buf.raw(",\"params\":", params)
	buf.str(",\"pipeline\":", c.Pipeline)
	buf.raw(",\"pipeline_version\":", []byte(formatNumber(float64(c.PipelineVersion))))
	buf.str(",\"prompt_version\":", c.PromptVersion)
	buf.str(",\"tenant\":", c.Tenant)
	return buf.hash(DedupPrefix), nil
}

// Request is the content of one submission as the client sent it, without
// transport fields: labels, metadata and the idempotency key itself are not
// part of it.
type Request struct {
	Pipeline       string
	DocumentSHA256 string
	MediaType      string // as returned by NormalizeMediaType
	DocumentName   string
	ModelProfile   string // as sent, possibly empty
	Params         map[string]any
	// CanonicalParams is as Computation's.
	CanonicalParams []byte
}

// Fingerprint returns "fp:v1:" and the hex sha256 of the canonical JSON of r
// (written as DedupKey writes its object). A replay of an idempotency key
// must carry the same fingerprint.
func Fingerprint(r Request) (string, error) {
	params, err := canonicalParams(r.CanonicalParams, r.Params)
	if err != nil {
		return "", err
	}
	buf := newFieldBuffer(len(params) + 192 + len(r.DocumentName) + len(r.ModelProfile) + len(r.Pipeline))
	buf.str("{\"document_name\":", r.DocumentName)
	buf.str(",\"document_sha256\":", r.DocumentSHA256)
	buf.str(",\"media_type\":", r.MediaType)
	buf.str(",\"model_profile\":", r.ModelProfile)
	buf.raw(",\"params\":", params)
	buf.str(",\"pipeline\":", r.Pipeline)
	return buf.hash(FingerprintPrefix), nil
}

// canonicalParams is given when not nil, else Canonical of params (an
// empty object for nil).
func canonicalParams(given []byte, params map[string]any) ([]byte, error) {
	if given != nil {
		return given, nil
	}
	return Canonical(orEmpty(params))
}

// fieldBuffer writes the canonical JSON of an object whose member names
// are known and written in sorted order by the caller.
type fieldBuffer struct{ b bytes.Buffer }

func newFieldBuffer(size int) *fieldBuffer {
	f := &fieldBuffer{}
	f.b.Grow(size)
	return f
}

// str writes prefix (the separator and the member's name, quoted, and the
// colon) and the string value v as Canonical writes it: trimmed, quoted.
func (f *fieldBuffer) str(prefix, v string) {
	f.b.WriteString(prefix)
	writeString(&f.b, strings.TrimSpace(v))
}

// raw writes prefix and a value already in canonical form.
func (f *fieldBuffer) raw(prefix string, v []byte) {
	f.b.WriteString(prefix)
	f.b.Write(v)
}

// hash closes the object and returns prefix and the hex sha256 of it.
func (f *fieldBuffer) hash(prefix string) string {
	f.b.WriteByte('}')
	sum := sha256.Sum256(f.b.Bytes())
	out := make([]byte, len(prefix)+hex.EncodedLen(len(sum)))
	copy(out, prefix)
	hex.Encode(out[len(prefix):], sum[:])
	return string(out)
}

// RequestFingerprint returns the fingerprint of a request given as its
// fields (no transport fields): "fp:v1:" and the hex sha256 of their
// canonical JSON. Operator RPCs use it.
func RequestFingerprint(fields map[string]any) (string, error) {
	return hashed(FingerprintPrefix, fields)
}

// DocumentSHA256 returns the hex sha256 of a document's bytes, its content
// address.
func DocumentSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// NormalizeMediaType lowercases the type and parameter names and orders the
// parameters, so "Text/HTML; Charset=utf-8" and "text/html; charset=utf-8"
// are one media type. Empty means "text/plain". It fails on a malformed
// media type.
func NormalizeMediaType(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "text/plain", nil
	}
	mt, params, err := mime.ParseMediaType(s)
	if err != nil {
		return "", err
	}
	return mime.FormatMediaType(mt, params), nil
}

func hashed(prefix string, v map[string]any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return prefix + hex.EncodeToString(sum[:]), nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
