package jobkey

import (
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
}

// DedupKey returns "dedup:v1:" and the hex sha256 of the canonical JSON of c.
func DedupKey(c Computation) (string, error) {
	return hashed(DedupPrefix, map[string]any{
		"tenant":           c.Tenant,
		"document_sha256":  c.DocumentSHA256,
		"media_type":       c.MediaType,
		"pipeline":         c.Pipeline,
		"pipeline_version": c.PipelineVersion,
		"prompt_version":   c.PromptVersion,
		"model_profile":    c.ModelProfile,
		"params":           orEmpty(c.Params),
	})
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
}

// Fingerprint returns "fp:v1:" and the hex sha256 of the canonical JSON of r.
// A replay of an idempotency key must carry the same fingerprint.
func Fingerprint(r Request) (string, error) {
	return hashed(FingerprintPrefix, map[string]any{
		"pipeline":        r.Pipeline,
		"document_sha256": r.DocumentSHA256,
		"media_type":      r.MediaType,
		"document_name":   r.DocumentName,
		"model_profile":   r.ModelProfile,
		"params":          orEmpty(r.Params),
	})
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
