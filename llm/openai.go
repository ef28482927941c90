package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// TimeoutDefault is the default of Config.Timeout, and of the command's
// --llm-timeout.
const TimeoutDefault = 60 * time.Second

// Config configures an OpenAIClient.
type Config struct {
	// BaseURL is the API root that "/chat/completions" is appended to, for
	// example "https://api.openai.com/v1", "http://127.0.0.1:11434/v1"
	// (Ollama) or the simulator's URL. Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// HTTPClient sends the calls. Default: a client of its own over a clone
	// of http.DefaultTransport. A Timeout of its own should exceed Timeout.
	HTTPClient *http.Client
	// Timeout bounds one call, from dialling to the last byte of the
	// answer. Default: TimeoutDefault.
	Timeout time.Duration
	// LookupPath, appended to BaseURL, is where calls are looked up by
	// provider key: GET {BaseURL}{LookupPath}/{key} answering 200 with the
	// stored completion or 404. The simulator serves it at "/oncejob/calls"
	// (llmsim.LookupPath). OpenAI and the common servers have no such
	// endpoint: leave it empty and Lookup returns ErrLookupUnsupported. Set
	// it only for a provider that has it, as a 404 means "never billed".
	LookupPath string
	// Batches says the provider serves OpenAI's Files and Batches
	// endpoints under BaseURL (OpenAI and the simulator do; vLLM, llama.cpp
	// and Ollama do not). Without it the batch methods return
	// ErrBatchUnsupported and BatchesOf refuses the client.
	Batches bool
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.Timeout == 0 {
		c.Timeout = TimeoutDefault
	}
	return c
}

func (c Config) validate() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("llm: BaseURL %q must be an absolute http(s) URL", c.BaseURL)
	}
	if c.Timeout < 0 {
		return errors.New("llm: Timeout must not be negative")
	}
	if c.LookupPath != "" && !strings.HasPrefix(c.LookupPath, "/") {
		return fmt.Errorf("llm: LookupPath %q must start with /", c.LookupPath)
	}
	return nil
}

// OpenAIClient implements Provider over the OpenAI Chat Completions HTTP
// protocol. It sends Request.ProviderKey as the Idempotency-Key header and
// never retries on its own.
type OpenAIClient struct {
	cfg  Config
	base string // BaseURL without its trailing slash
}

var _ Provider = (*OpenAIClient)(nil)

// NewOpenAI returns a client for cfg.
func NewOpenAI(cfg Config) (*OpenAIClient, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &OpenAIClient{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/")}, nil
}

// maxBodyBytes bounds what is read of any answer.
const maxBodyBytes = 32 << 20

// Generate implements Provider.
//
// Classification: 429 is rate limited (Retry-After in seconds or as an HTTP
// date, or OpenAI's retry-after-ms), except OpenAI's "insufficient_quota",
// which no retry fixes and so is an invalid request; 5xx, 408, 409 (the key
// is still in flight) and 425 are unavailable; other 4xx are invalid
// requests. Without an answer, what decides is whether the request had been
// written to the connection (httptrace WroteRequest): before, the call is
// unavailable; after, the outcome is unknown. A 2xx whose body is not a
// completion is an unknown outcome too: the provider said it finished, so it
// may have billed, and a lookup or a retry under the same key may still
// recover the answer.
func (c *OpenAIClient) Generate(ctx context.Context, req *Request) (*Response, error) {
	if req == nil {
		return nil, errors.New("llm: nil Request")
	}
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	body, err := json.Marshal(newChatRequest(req))
	if err != nil {
		return nil, &Error{Class: ClassInvalidRequest, Message: "encode request", Err: err}
	}

	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Class: ClassInvalidRequest, Message: "build request", Err: err}
	}
	c.setHeaders(httpReq)
	httpReq.Header.Set("Content-Type", "application/json")
	if req.ProviderKey != "" {
		httpReq.Header.Set("Idempotency-Key", req.ProviderKey)
	}

	resp, err := c.cfg.HTTPClient.Do(httpReq)
	if err != nil {
		if wrote.Load() {
			return nil, &Error{Class: ClassOutcomeUnknown, Message: "no answer after the request was sent", Err: err}
		}
		return nil, &Error{Class: ClassUnavailable, Message: "request not sent", Err: err}
	}
	defer func() { _ = resp.Body.Close() }() // read to the end by readBody
	data, readErr := readBody(resp)
	if !success(resp.StatusCode) {
		return nil, statusError(resp, data)
	}
	if readErr != nil {
		return nil, &Error{Class: ClassOutcomeUnknown, StatusCode: resp.StatusCode, Message: "answer cut off", Err: readErr}
	}
	out, err := parseCompletion(resp, data)
	if err != nil {
		return nil, &Error{Class: ClassOutcomeUnknown, StatusCode: resp.StatusCode, Message: "answer is not a chat completion", Err: err}
	}
	return out, nil
}

// CanLookup implements Provider: calls can be looked up when
// Config.LookupPath is set.
func (c *OpenAIClient) CanLookup() bool { return c.cfg.LookupPath != "" }

// Lookup implements Provider through Config.LookupPath. A lookup has no
// effect at the provider, so a lost answer is unavailable, never unknown.
func (c *OpenAIClient) Lookup(ctx context.Context, providerKey string) (*Response, error) {
	if c.cfg.LookupPath == "" {
		return nil, ErrLookupUnsupported
	}
	if err := validateProviderKey(providerKey); err != nil || providerKey == "" {
		return nil, &Error{Class: ClassInvalidRequest, Message: "provider key must be 1-255 printable ASCII characters"}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	u := c.base + c.cfg.LookupPath + "/" + url.PathEscape(providerKey)
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &Error{Class: ClassInvalidRequest, Message: "build lookup", Err: err}
	}
	c.setHeaders(httpReq)
	resp, err := c.cfg.HTTPClient.Do(httpReq)
	if err != nil {
		return nil, &Error{Class: ClassUnavailable, Message: "lookup failed", Err: err}
	}
	defer func() { _ = resp.Body.Close() }() // read to the end by readBody
	data, readErr := readBody(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, ErrNotFound
	case !success(resp.StatusCode):
		return nil, statusError(resp, data)
	case readErr != nil:
		return nil, &Error{Class: ClassUnavailable, StatusCode: resp.StatusCode, Message: "lookup answer cut off", Err: readErr}
	}
	out, err := parseCompletion(resp, data)
	if err != nil {
		return nil, &Error{Class: ClassUnavailable, StatusCode: resp.StatusCode, Message: "lookup answer is not a chat completion", Err: err}
	}
	return out, nil
}

func (c *OpenAIClient) setHeaders(r *http.Request) {
	r.Header.Set("Accept", "application/json")
	r.Header.Set("User-Agent", "oncejob")
	if c.cfg.APIKey != "" {
		r.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
}

func validateRequest(req *Request) error {
	var problems []string
	if strings.TrimSpace(req.Model) == "" {
		problems = append(problems, "model is required")
	}
	if len(req.Messages) == 0 {
		problems = append(problems, "at least one message is required")
	}
	if len(req.ResponseFormat) > 0 && !json.Valid(req.ResponseFormat) {
		problems = append(problems, "response format is not valid JSON")
	}
	if err := validateProviderKey(req.ProviderKey); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return &Error{Class: ClassInvalidRequest, Message: strings.Join(problems, "; ")}
	}
	return nil
}

// validateProviderKey accepts the empty key (no key) and 1-255 printable
// ASCII characters, the rule of every oncejob key (docs/architecture.md, "Keys"), which also
// keeps it a valid header value.
func validateProviderKey(key string) error {
	if len(key) > 255 {
		return errors.New("provider key is longer than 255 characters")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return errors.New("provider key must be printable ASCII")
		}
	}
	return nil
}

type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	Temperature    float64         `json:"temperature"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func newChatRequest(req *Request) chatRequest {
	msgs := make([]chatMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = chatMessage(m)
	}
	return chatRequest{
		Model:          req.Model,
		Messages:       msgs,
		Temperature:    req.Temperature,
		ResponseFormat: req.ResponseFormat,
		MaxTokens:      req.MaxTokens,
	}
}

type chatCompletion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

func parseCompletion(resp *http.Response, data []byte) (*Response, error) {
	var cc chatCompletion
	if err := json.Unmarshal(data, &cc); err != nil {
		return nil, err
	}
	if len(cc.Choices) == 0 {
		return nil, errors.New("no choices")
	}
	out := &Response{
		PromptTokens:      cc.Usage.PromptTokens,
		CompletionTokens:  cc.Usage.CompletionTokens,
		ProviderRequestID: resp.Header.Get("X-Request-Id"),
		Model:             cc.Model,
		FinishReason:      cc.Choices[0].FinishReason,
		Replayed:          resp.Header.Get("Idempotent-Replayed") == "true",
		RateLimits:        parseRateLimits(resp.Header),
	}
	if out.ProviderRequestID == "" {
		out.ProviderRequestID = cc.ID
	}
	if content := cc.Choices[0].Message.Content; content != nil {
		out.Content = *content
	}
	return out, nil
}

func success(status int) bool { return status >= 200 && status < 300 }

func readBody(resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err == nil && len(data) > maxBodyBytes {
		err = fmt.Errorf("answer exceeds %d bytes", maxBodyBytes)
	}
	return data, err
}

// statusError classifies a non-2xx answer.
func statusError(resp *http.Response, body []byte) *Error {
	msg, code := errorMessage(resp, body)
	e := &Error{StatusCode: resp.StatusCode, Message: msg, RateLimits: parseRateLimits(resp.Header)}
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests && code == "insufficient_quota":
		e.Class = ClassInvalidRequest
	case s == http.StatusTooManyRequests:
		e.Class = ClassRateLimited
		e.RetryAfter = retryAfter(resp.Header, time.Now())
	case s >= 500, s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooEarly:
		e.Class = ClassUnavailable
		e.RetryAfter = retryAfter(resp.Header, time.Now())
	case s >= 400:
		e.Class = ClassInvalidRequest
	default: // 1xx or 3xx left unfollowed: not an answer to act on
		e.Class = ClassUnavailable
	}
	return e
}

// errorMessage returns the message and code of an OpenAI error body
// {"error":{"message":..., "code":...}}, or a short excerpt of any other
// body.
func errorMessage(resp *http.Response, body []byte) (msg, code string) {
	var envelope struct {
		Error struct {
			Message string          `json:"message"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &envelope) == nil && envelope.Error.Message != "" {
		_ = json.Unmarshal(envelope.Error.Code, &code) // codes are strings, numbers or null
		return truncate(envelope.Error.Message), code
	}
	if text := strings.TrimSpace(string(body)); text != "" {
		return truncate(text), ""
	}
	return http.StatusText(resp.StatusCode), ""
}

func truncate(s string) string {
	const maxLen = 500
	if len(s) <= maxLen {
		return s
	}
	return s[:maxLen] + "…"
}

// retryAfter reads the provider's wait hint: retry-after-ms (OpenAI,
// milliseconds) first, then Retry-After as seconds or an HTTP date. Zero
// when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 && ms < 1e12 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs > 0 && secs < 1e9 {
			return time.Duration(secs * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now))
	}
	return 0
}
