// Package receiver applies oncejob's events once. The relay delivers every
// event at least once - a retry after a lost answer, a relay killed after
// the send, a republish the stream dedups too late - so a receiver must
// tell a second delivery from a first. This package does it the one way
// that holds under crashes: the caller's effect and an inbox row keyed by
// the event id commit in one transaction of the receiver's own database; a
// second delivery finds the row, runs nothing, and is answered as a success
// with the first one's receipt.
//
//	verifier, _ := receiver.NewVerifier(os.Getenv("WEBHOOK_SECRET"))
//	inbox := receiver.NewPgxInbox(pool, "", func(ctx context.Context, tx pgx.Tx, e *receiver.Event) (string, error) {
//		// the effect, in tx; return a receipt (e.g. the id of the row written)
//	})
//	http.Handle("/oncejob", receiver.NewHandler(verifier, inbox))
//
// Webhooks are verified per Standard Webhooks 1.0, exactly as its reference
// library verifies them (constant-time, a 5-minute tolerance, any of
// several secrets while one rotates: Verifier.Verify); JetStream
// messages are acknowledged only after the apply committed
// (JetStreamHandler).
package receiver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Tolerance is how far a webhook's timestamp may be from now, in whole
// seconds of now (as the Standard Webhooks library compares: a timestamp
// 300.9 s old is accepted, 301 s old is not).
const Tolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrMissingHeaders = errors.New("receiver: webhook-id, webhook-timestamp and webhook-signature are required")
	ErrStale          = errors.New("receiver: webhook-timestamp is more than 5 minutes from now")
	ErrSignature      = errors.New("receiver: no signature matches")
)

// Verifier checks Standard Webhooks signatures.
type Verifier struct {
	keys [][]byte
	// Now is the clock a webhook's timestamp is compared with (nil:
	// time.Now). Tests set it, so the tolerance is checked at its edges.
	Now func() time.Time
}

// NewVerifier takes the sink's secrets (whsec_ + base64). During a rotation
// pass both, new first: a request signed with either is accepted.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("receiver: at least one secret is required")
	}
	v := &Verifier{}
	for i, s := range secrets {
		if !strings.HasPrefix(s, "whsec_") {
			return nil, fmt.Errorf("receiver: secret %d: want whsec_ and base64", i+1)
		}
		if _, err := standardwebhooks.NewWebhook(s); err != nil {
			return nil, fmt.Errorf("receiver: secret %d: %w", i+1, err)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil {
			return nil, fmt.Errorf("receiver: secret %d: %w", i+1, err)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// Verify checks a request's signature headers against its body exactly as
// the Standard Webhooks reference library (npm standardwebhooks) does in
// its own runtime, so that a request is accepted here if and only if it is
// there (clientsdk/testdata/webhooks/vectors.json, signed and judged by
// it; docs/architecture.md, "Receivers"):
//
//   - a header sent on several lines is its lines joined by ", ", as
//     Node's http server combines them (RFC 9110 §5.3); empty is missing;
//   - the timestamp is read as JavaScript's parseInt(s, 10) reads it: a
//     sign and the leading digits, the rest ignored ("<now>.0" is now), no
//     digits at all refused as a missing header;
//   - it must lie within Tolerance of now in whole seconds, and the
//     signed content is "id.<that integer>.body";
//   - the signature header is split at each space, and any piece equal to
//     "v1," and the base64 HMAC-SHA256 of any secret (compared in constant
//     time) verifies it.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	id, ts, sig := headerValue(h, standardwebhooks.HeaderWebhookID), headerValue(h, standardwebhooks.HeaderWebhookTimestamp), headerValue(h, standardwebhooks.HeaderWebhookSignature)
	if id == "" || ts == "" || sig == "" {
		return ErrMissingHeaders
	}
	secs, ok := parseIntJS(ts)
	if !ok {
		return ErrMissingHeaders
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tolerance := int64(Tolerance / time.Second)
	nowSecs := now().Unix()
	if secs < nowSecs-tolerance || secs > nowSecs+tolerance {
		return ErrStale
	}
	signed := []byte(id + "." + strconv.FormatInt(secs, 10) + ".")
	signed = append(signed, body...)
	candidates := strings.Split(sig, " ")
	for _, key := range v.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(signed)
		want := []byte("v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		match := 0
		for _, c := range candidates {
			match |= subtle.ConstantTimeCompare([]byte(c), want)
		}
		if match == 1 {
			return nil
		}
	}
	return ErrSignature
}

// headerValue is a header's lines joined by ", ", as Node's http server
// hands them to the library.
func headerValue(h http.Header, name string) string {
	return strings.Join(h.Values(name), ", ")
}

// parseIntJS reads s as JavaScript's parseInt(s, 10): leading white space
// (of a header's bytes as Node reads them, one Latin-1 character a byte),
// a sign, then the ASCII digits up to the first other character; false
// without a digit. A number past int64 is clamped: it is stale either way.
func parseIntJS(s string) (int64, bool) {
	for s != "" && (s[0] >= '\t' && s[0] <= '\r' || s[0] == ' ' || s[0] == 0xa0) {
		s = s[1:]
	}
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(s[:n], 10, 64)
	if err != nil {
		v = math.MaxInt64
	}
	if neg {
		v = -v
	}
	return v, true
}

// Event is an oncejob event: envelope version 1.
type Event struct {
	Version int    `json:"version"`
	Type    string `json:"type"` // job.succeeded, job.failed, ...
	ID      string `json:"id"`   // stable per (job, type, generation): the inbox key
	Time    string `json:"time"`
	Data    struct {
		JobID            string          `json:"job_id"`
		Tenant           string          `json:"tenant"`
		Pipeline         string          `json:"pipeline"`
		PipelineVersion  int32           `json:"pipeline_version"`
		PromptVersion    string          `json:"prompt_version"`
		ModelProfile     string          `json:"model_profile"`
		DedupKey         string          `json:"dedup_key"`
		DeduplicatedFrom *string         `json:"deduplicated_from"`
		Generation       int             `json:"generation"`
		Status           string          `json:"status"`
		Stage            string          `json:"stage"`
		Attempt          int32           `json:"attempt"`
		Output           json.RawMessage `json:"output"` // job.succeeded only
		Error            *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			CostMicros       int64 `json:"cost_micros"`
			LLMCalls         int32 `json:"llm_calls"`
		} `json:"usage"`
	} `json:"data"`
}

// ParseEvent reads an envelope.
func ParseEvent(body []byte) (*Event, error) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("receiver: event: %w", err)
	}
	if e.Version != 1 || e.ID == "" || e.Type == "" {
		return nil, fmt.Errorf("receiver: event: want envelope version 1 with id and type, got version %d", e.Version)
	}
	return &e, nil
}

// Applier runs an event's effect once per event id. applied is false when
// the event had been applied before (nothing ran now); receipt is the
// effect's reference, the same on every delivery.
type Applier interface {
	Apply(ctx context.Context, e *Event) (receipt string, applied bool, err error)
}

// ReceiptHeader carries the receipt back to the relay, which journals it as
// the delivery's external reference.
const ReceiptHeader = "Webhook-Receipt"

// maxBody bounds a request body.
const maxBody = 16 << 20

// NewHandler serves webhook deliveries: verify (401 when it fails), parse
// (400), apply once (500 when the effect fails, so the relay retries), and
// 200 with the receipt - also for an event applied before, so the relay
// stops sending it.
func NewHandler(v *Verifier, a Applier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := v.Verify(r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		e, err := ParseEvent(body)
		if err != nil || e.ID != headerValue(r.Header, standardwebhooks.HeaderWebhookID) {
			http.Error(w, "not an oncejob event, or its id is not the webhook-id", http.StatusBadRequest)
			return
		}
		receipt, applied, err := a.Apply(r.Context(), e)
		if err != nil {
			http.Error(w, "apply: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set(ReceiptHeader, receipt)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"applied": applied, "receipt": receipt})
	})
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}
