package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/oncejob/oncejob/store"
)

// ReceiptHeader is the response header a receiver may set to the id of what
// it applied; the relay journals it as the delivery's external reference.
const ReceiptHeader = "Webhook-Receipt"

// webhookSink is the level-1 sink: the receiver honours a key. Every attempt
// of an event carries the same webhook-id (the event id), the same body and
// Idempotency-Key, and is signed per Standard Webhooks 1.0 (the
// standard-webhooks Go library signs): v1,<base64 HMAC-SHA256 of
// id.timestamp.body>, one signature per secret while a secret rotates.
type webhookSink struct {
	url     string
	signers []*standardwebhooks.Webhook
	client  *http.Client
	now     func() time.Time
}

func newWebhookSink(c *WebhookConfig) (*webhookSink, error) {
	secrets := []Secret{c.Secret}
	if c.PreviousSecret != nil {
		secrets = append(secrets, *c.PreviousSecret)
	}
	s := &webhookSink{url: c.URL, now: time.Now}
	for i, ref := range secrets {
		value, err := ref.Resolve()
		if err != nil {
			return nil, fmt.Errorf("webhook secret %d (%s): %w", i+1, ref, err)
		}
		if !strings.HasPrefix(value, "whsec_") {
			return nil, fmt.Errorf("webhook secret %d (%s): want whsec_ and base64", i+1, ref)
		}
		signer, err := standardwebhooks.NewWebhook(value)
		if err != nil {
			return nil, fmt.Errorf("webhook secret %d (%s): not base64 after whsec_", i+1, ref)
		}
		s.signers = append(s.signers, signer)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	s.client = newHTTPClient(timeout, c.AllowPrivateNetwork)
	return s, nil
}

// Deliver implements Sink. 2xx delivered; 408, 429 and 5xx failed and
// retried (Retry-After honoured); 410 disables the sink; any other status
// dead-letters. No answer: failed when the request was never written,
// unknown once it was (the receiver may have applied it; the retry carries
// the same id and it dedups).
func (s *webhookSink) Deliver(ctx context.Context, d *store.Delivery) Result {
	ts := s.now()
	signatures := make([]string, len(s.signers))
	for i, signer := range s.signers {
		sig, err := signer.Sign(d.EventID, ts, d.Payload)
		if err != nil {
			return Result{Outcome: store.DeliveryOutcomeDeadLettered, Err: fmt.Errorf("sign: %w", err)}
		}
		signatures[i] = sig
	}
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(d.Payload))
	if err != nil {
		return Result{Outcome: store.DeliveryOutcomeDeadLettered, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "oncejob-relay")
	req.Header.Set(standardwebhooks.HeaderWebhookID, d.EventID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(signatures, " "))
	req.Header.Set("Idempotency-Key", d.EventID)

	resp, err := s.client.Do(req)
	if err != nil {
		var refused errPrivateNetwork
		switch {
		case errors.As(err, &refused):
			return Result{Outcome: store.DeliveryOutcomeDeadLettered, Err: refused}
		case wrote.Load():
			return Result{Outcome: store.DeliveryOutcomeUnknown, Err: fmt.Errorf("no answer after the request was sent: %w", err)}
		}
		return Result{Outcome: store.DeliveryOutcomeFailed, Err: fmt.Errorf("request not sent: %w", err)}
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return classify(resp, body)
}

// classify maps an HTTP answer to a result.
func classify(resp *http.Response, body []byte) Result {
	res := Result{HTTPStatus: resp.StatusCode}
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		res.Outcome = store.DeliveryOutcomeDelivered
		res.ExternalRef = resp.Header.Get(ReceiptHeader)
		return res
	case code == http.StatusGone:
		res.Outcome = store.DeliveryOutcomeSinkDisabled
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		res.Outcome = store.DeliveryOutcomeFailed
		res.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	default:
		res.Outcome = store.DeliveryOutcomeDeadLettered
	}
	res.Err = fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(string(body)))
	return res
}

// retryAfter reads Retry-After in seconds or as an HTTP date; 0 when absent
// or unreadable. It is capped at an hour: a receiver cannot park a delivery
// for longer than its budget could bear.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}

// Close implements Sink.
func (s *webhookSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
