package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/store"
)

// chatSink is the level-3 sink: a chat webhook takes no key and has no
// natural unique field, so it is check-then-act on the sent_messages
// journal, keyed by (sink, content hash) with a TTL. The post is the last
// step; its reference is recorded right after it. What remains is the
// window between the post and that record: a crash there posts the message
// again on the retry. docs/architecture.md ("Chat sink") has its measured
// size.
type chatSink struct {
	name   string
	url    string
	ttl    time.Duration
	client *http.Client
	store  store.DeliveryStore
	// recorded, when set, is told how long each post's record took after
	// the chat answered (tests measure the window with it).
	recorded func(window time.Duration)
}

func newChatSink(name string, c *ChatConfig, st store.DeliveryStore) (*chatSink, error) {
	u, err := c.URL.Resolve()
	if err != nil {
		return nil, fmt.Errorf("chat url (%s): %w", c.URL, err)
	}
	s := &chatSink{name: name, url: u, ttl: c.DedupTTL, store: st}
	if s.ttl == 0 {
		s.ttl = 24 * time.Hour
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	s.client = newHTTPClient(timeout, c.AllowPrivateNetwork)
	return s, nil
}

// Deliver implements Sink.
func (s *chatSink) Deliver(ctx context.Context, d *store.Delivery) Result {
	text, err := chatText(d)
	if err != nil {
		return Result{Outcome: store.DeliveryOutcomeDeadLettered, Err: err}
	}
	sum := sha256.Sum256([]byte(s.name + "\x00" + text))
	hash := hex.EncodeToString(sum[:])

	sent, err := s.store.SentMessageGet(ctx, &store.SentMessageGetParams{Sink: s.name, ContentHash: hash, SentAfter: time.Now().Add(-s.ttl)})
	switch {
	case err == nil:
		return Result{Outcome: store.DeliveryOutcomeDelivered, ExternalRef: sent.ExternalRef, Duplicate: true}
	case !errors.Is(err, store.ErrNotFound):
		return Result{Outcome: store.DeliveryOutcomeFailed, Err: fmt.Errorf("sent messages: %w", err)}
	}

	res, answered := s.post(ctx, text)
	if res.Outcome != store.DeliveryOutcomeDelivered {
		return res
	}
	failpoint.Inject(failpoint.ChatAfterPost)
	// The record gets its own context: the post happened, so the record
	// must be attempted even if the caller is going away.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = s.store.SentMessageRecord(rctx, &store.SentMessageRecordParams{Message: store.SentMessage{
		Sink: s.name, ContentHash: hash, EventID: d.EventID, ExternalRef: res.ExternalRef,
	}})
	if s.recorded != nil && err == nil {
		s.recorded(time.Since(answered))
	}
	if err != nil {
		// Delivered all the same; only the protection of a retry is lost.
		res.Err = fmt.Errorf("posted, but the sent message was not recorded: %w", err)
	}
	return res
}

// post sends the message; answered is when the chat's answer arrived.
func (s *chatSink) post(ctx context.Context, text string) (Result, time.Time) {
	body, _ := json.Marshal(map[string]string{"text": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return Result{Outcome: store.DeliveryOutcomeDeadLettered, Err: err}, time.Time{}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		var refused errPrivateNetwork
		if errors.As(err, &refused) {
			return Result{Outcome: store.DeliveryOutcomeDeadLettered, Err: refused}, time.Time{}
		}
		// A chat has no key: a lost answer is retried like a failure, and
		// may post twice. That is the level-3 promise.
		return Result{Outcome: store.DeliveryOutcomeFailed, Err: err}, time.Time{}
	}
	defer func() { _ = resp.Body.Close() }()
	answered := time.Now()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	res := classify(resp, data)
	if res.Outcome == store.DeliveryOutcomeDelivered {
		res.ExternalRef = chatReference(resp, data)
	}
	return res, answered
}

// chatReference is the message id the chat returned: Slack's "ts" or an
// "id" in a JSON answer, else the answer's text ("ok").
func chatReference(resp *http.Response, data []byte) string {
	var answer struct {
		TS string `json:"ts"`
		ID string `json:"id"`
	}
	if json.Unmarshal(data, &answer) == nil {
		if answer.TS != "" {
			return answer.TS
		}
		if answer.ID != "" {
			return answer.ID
		}
	}
	return strings.TrimSpace(string(data))
}

// chatText is the message of an event: what happened, the job, its
// pipeline, its last error, and the command that acts on it.
func chatText(d *store.Delivery) (string, error) {
	var env Envelope
	if err := json.Unmarshal(d.Payload, &env); err != nil {
		return "", fmt.Errorf("event payload: %w", err)
	}
	job := env.Data.JobID
	var b strings.Builder
	fmt.Fprintf(&b, "oncejob: job %s (tenant %s, pipeline %s v%d) is %s", job, env.Data.Tenant, env.Data.Pipeline, env.Data.PipelineVersion, strings.ToUpper(env.Data.Status))
	if e := env.Data.Error; e != nil {
		fmt.Fprintf(&b, "\nLast error: %s: %s", e.Code, e.Message)
	}
	switch env.Type {
	case "job.dead_lettered", "job.failed":
		fmt.Fprintf(&b, "\nReplay it: oncejob replay %s", job)
	case "job.outcome_unknown":
		fmt.Fprintf(&b, "\nSettle it: oncejob resolve %s --retry (or --fail)", job)
	case "job.awaiting_approval":
		fmt.Fprintf(&b, "\nReview its planned output, then: oncejob approve %s (or --reject)", job)
	}
	fmt.Fprintf(&b, "\nEvent %s", env.ID)
	return b.String(), nil
}

// Close implements Sink.
func (s *chatSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
