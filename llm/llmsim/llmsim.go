// Package llmsim is a deterministic LLM provider for tests and the dev
// server. It speaks the OpenAI Chat Completions protocol, so the production
// client talks to it unchanged, and it behaves like a provider that honours
// idempotency keys:
//
//   - The completion is a function of the request (model, messages,
//     temperature, response format, max tokens): the same input gives the
//     same content on any simulator. See MarkerInvalidRequest and
//     MarkerInvalidOutput for documents that misbehave on purpose.
//   - The first call finished under an Idempotency-Key is billed and
//     stored; a later call with the key gets the stored answer with
//     "Idempotent-Replayed: true" and is billed nothing. Concurrent calls
//     with one key wait for each other rather than get 409: the first is
//     billed, the others are answered from the store. The same key with
//     another request body is refused with 422.
//   - Billing is counted and readable (Stats), and calls are found by key.
//   - Faults are injected on a count-based schedule (Faults).
//   - Rate limits are enforced as hosted providers enforce them (Limits):
//     429 with Retry-After, and OpenAI's x-ratelimit-* headers on every
//     answer.
//
// Endpoints, each served both at the root and under /v1 so that a client
// knowing only the API base URL reaches all of them:
//
//	POST /v1/chat/completions       the provider
//	GET  /oncejob/calls/{key}       the stored completion of key, or 404
//	GET  /oncejob/stats             Stats as JSON
//	POST /oncejob/stats/peak        restart PeakInFlight at the calls in flight now; Stats as JSON
//	POST /oncejob/reset             forget calls and counters, re-arm Config.Faults
//	GET  /oncejob/faults            the armed Faults
//	POST /oncejob/faults            replace the Faults (JSON) and restart their counts
//	GET  /oncejob/limits            the Limits in force
//	POST /oncejob/limits            replace the Limits (JSON, window "1s"); buckets start full
//	/v1/files, /v1/batches          OpenAI's Batch API (batch.go)
package llmsim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"time"
)

// LookupPath is where calls are looked up by key, relative to the API base
// URL: the value for llm.Config.LookupPath.
const LookupPath = "/oncejob/calls"

// Config configures a simulator.
type Config struct {
	// Faults are armed at start and again on every reset. Default: none.
	Faults Faults
	// Logger receives a debug line per call and an info line per fault
	// fired. Default: discard.
	Logger *slog.Logger
	// BatchDelay is how long a batch takes from creation to completed:
	// validating for its first tenth, in progress to nine tenths, then
	// finalizing. Default 0: done at the first look after its creation.
	BatchDelay time.Duration
	// Now is the clock batches age by. Default: time.Now.
	Now func() time.Time
	// Limits are the provider's rate limits (limits.go). Default: none.
	Limits Limits
}

// Stats counts what the simulator received and billed since start or the
// last reset.
type Stats struct {
	// Requests is the number of chat completion requests received.
	Requests int64 `json:"requests"`
	// BilledCalls is the number of completions computed and billed.
	BilledCalls            int64 `json:"billed_calls"`
	BilledPromptTokens     int64 `json:"billed_prompt_tokens"`
	BilledCompletionTokens int64 `json:"billed_completion_tokens"`
	// ReplayedCalls is the number answered from the idempotency store.
	ReplayedCalls int64 `json:"replayed_calls"`
	// CallsByKey is the number of billed calls per Idempotency-Key: 1 for
	// every key that was billed, as keys are honoured.
	CallsByKey map[string]int64 `json:"calls_by_key"`
	// RequestsByKey is the number of requests received per key, faults
	// and replays included.
	RequestsByKey map[string]int64 `json:"requests_by_key"`
	// RateLimited is the number of 429s answered, by Limits and by the
	// rate_limit fault; RateLimitedBy splits them by cause: "requests",
	// "tokens", "in_flight" or "fault".
	RateLimited   int64            `json:"rate_limited"`
	RateLimitedBy map[string]int64 `json:"rate_limited_by"`
	// MaxInFlight is the most chat completion calls the simulator was
	// answering at once (admitted by Limits, their latency included).
	MaxInFlight int `json:"max_in_flight"`
	// InFlight is the chat completion calls being answered now.
	InFlight int `json:"in_flight"`
	// PeakInFlight is MaxInFlight since the last POST /oncejob/stats/peak
	// (RestartPeak): a test sees a level the calls reached between two of
	// its reads.
	PeakInFlight int `json:"peak_in_flight"`

	// FilesUploaded counts POST /v1/files.
	FilesUploaded int64 `json:"files_uploaded"`
	// FilesDeleted counts DELETE /v1/files/{id} of a file there.
	FilesDeleted int64 `json:"files_deleted"`
	// BatchesCreated counts the batches created (POST /v1/batches that
	// passed its checks, its answer lost or not).
	BatchesCreated   int64 `json:"batches_created"`
	BatchesCancelled int64 `json:"batches_cancelled"`
	BatchesExpired   int64 `json:"batches_expired"`
	// BatchBilledCalls is the number of batch lines computed and billed at
	// the batch price; BilledCalls counts online calls only.
	BatchBilledCalls            int64 `json:"batch_billed_calls"`
	BatchBilledPromptTokens     int64 `json:"batch_billed_prompt_tokens"`
	BatchBilledCompletionTokens int64 `json:"batch_billed_completion_tokens"`
	// BatchCallsByKey is the number of billed batch lines per custom_id:
	// more than 1 when two batches carried the same call.
	BatchCallsByKey map[string]int64 `json:"batch_calls_by_key"`
}

// Server is the simulator as an http.Handler.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	closing chan struct{}
	close   sync.Once

	mu     sync.Mutex
	faults armedFaults
	calls  map[string]*storedCall // finished calls by key
	stats  Stats
	seq    int64 // numbers requests, for request ids of answers that bill nothing
	limits *limiter

	files      map[string]*simFile
	fileOrder  []string // oldest first
	batches    map[string]*simBatch
	batchOrder []string // oldest first
	// fileSeq and batchSeq number ids; a reset keeps them, so an id is
	// never given twice by one simulator.
	fileSeq, batchSeq int
}

// storedCall is a billed completion as it was sent.
type storedCall struct {
	digest    [32]byte
	body      []byte
	requestID string
}

// New returns a simulator. It fails only if cfg.Faults are invalid.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if _, err := arm(cfg.Faults, cfg.Now()); err != nil {
		return nil, err
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), closing: make(chan struct{})}
	s.Reset()
	for _, prefix := range []string{"", "/v1"} {
		s.mux.HandleFunc("POST "+prefix+"/chat/completions", s.handleChat)
		s.mux.HandleFunc("GET "+prefix+LookupPath+"/{key}", s.handleLookup)
		s.mux.HandleFunc("GET "+prefix+"/oncejob/stats", s.handleStats)
		s.mux.HandleFunc("POST "+prefix+"/oncejob/stats/peak", s.handlePeak)
		s.mux.HandleFunc("POST "+prefix+"/oncejob/reset", s.handleReset)
		s.mux.HandleFunc("GET "+prefix+"/oncejob/faults", s.handleGetFaults)
		s.mux.HandleFunc("POST "+prefix+"/oncejob/faults", s.handleSetFaults)
		s.mux.HandleFunc("GET "+prefix+"/oncejob/limits", s.handleGetLimits)
		s.mux.HandleFunc("POST "+prefix+"/oncejob/limits", s.handleSetLimits)
	}
	s.handleBatchRoutes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close releases every held call (hang, bill_then_timeout) by dropping its
// connection, so an http.Server can shut down. The handler answers no more
// held calls afterwards.
func (s *Server) Close() { s.close.Do(func() { close(s.closing) }) }

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.InFlight = s.limits.inFlight
	st.CallsByKey = maps.Clone(s.stats.CallsByKey)
	st.RequestsByKey = maps.Clone(s.stats.RequestsByKey)
	st.BatchCallsByKey = maps.Clone(s.stats.BatchCallsByKey)
	st.RateLimitedBy = maps.Clone(s.stats.RateLimitedBy)
	return st
}

// SetFaults replaces the armed faults; their counts start from zero.
func (s *Server) SetFaults(f Faults) error {
	a, err := arm(f, s.cfg.Now())
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.faults = a
	s.mu.Unlock()
	return nil
}

// Faults returns the armed faults.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.cfg
}

// Reset forgets every stored call, file, batch and counter and re-arms Config.Faults,
// as a fresh simulator would. Meant for between runs: calls in flight
// finish against the new state.
func (s *Server) Reset() {
	a, _ := arm(s.cfg.Faults, s.cfg.Now()) // validated by New
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = a
	s.limits = newLimiter(s.cfg.Limits, s.cfg.Now())
	s.calls = map[string]*storedCall{}
	s.stats = Stats{CallsByKey: map[string]int64{}, RequestsByKey: map[string]int64{}, BatchCallsByKey: map[string]int64{}, RateLimitedBy: map[string]int64{}}
	s.files, s.fileOrder = map[string]*simFile{}, nil
	s.batches, s.batchOrder = map[string]*simBatch{}, nil
}

const maxRequestBytes = 8 << 20

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	reqID := s.countRequest(key)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		writeError(w, reqID, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	in, err := parseChat(body)
	if err != nil {
		writeError(w, reqID, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if in.contains(MarkerInvalidRequest) {
		writeError(w, reqID, http.StatusBadRequest, "invalid_request_error", "simulated invalid request ("+MarkerInvalidRequest+")")
		return
	}
	if !s.admit(w, in, reqID) {
		return
	}
	defer s.release()
	if !s.injectFaults(w, r, key, reqID) {
		return
	}
	call, replayed, hold, err := s.answer(key, in)
	if err != nil {
		writeError(w, reqID, http.StatusUnprocessableEntity, "idempotency_error", err.Error())
		return
	}
	if hold != nil {
		s.log.Info("llmsim: fault bill_then_timeout", "key", key, "request_id", call.requestID)
		if !s.wait(r.Context(), time.Duration(hold.Delay)) {
			panic(http.ErrAbortHandler)
		}
	}
	s.limitHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", call.requestID)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	_, _ = w.Write(call.body)
}

func (s *Server) countRequest(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.stats.Requests++
	if key != "" {
		s.stats.RequestsByKey[key]++
	}
	return fmt.Sprintf("req_sim_%d", s.seq)
}

// injectFaults applies the faults met before a call is computed, in the
// order of the Faults fields. It reports whether the call goes on.
func (s *Server) injectFaults(w http.ResponseWriter, r *http.Request, key, reqID string) bool {
	s.mu.Lock()
	f := &s.faults
	var rateLimited bool
	if rl := f.cfg.RateLimit; rl != nil && rl.For > 0 {
		rateLimited = s.cfg.Now().Before(f.armedAt.Add(time.Duration(rl.For))) && (f.rateLimit.re == nil || f.rateLimit.re.MatchString(key))
	} else {
		rateLimited = f.rateLimit.fire(key)
	}
	unavailable := !rateLimited && f.unavailable.fire(key)
	hang := !rateLimited && !unavailable && f.hang.fire(key)
	cfg := f.cfg
	s.mu.Unlock()

	switch {
	case rateLimited:
		s.log.Info("llmsim: fault rate_limit", "key", key)
		s.countRateLimited("fault")
		if d := time.Duration(cfg.RateLimit.RetryAfter); d > 0 {
			setRetryAfter(w.Header(), d)
		}
		s.limitHeaders(w.Header())
		writeError(w, reqID, http.StatusTooManyRequests, "rate_limit_exceeded", "simulated rate limit")
		return false
	case unavailable:
		s.log.Info("llmsim: fault unavailable", "key", key)
		status := cmp.Or(cfg.Unavailable.Status, http.StatusServiceUnavailable)
		writeError(w, reqID, status, "server_error", "simulated outage")
		return false
	case hang:
		s.log.Info("llmsim: fault hang", "key", key)
		s.wait(r.Context(), 0)
		panic(http.ErrAbortHandler) // drop the connection: no answer at all
	}
	if cfg.Latency > 0 && !s.wait(r.Context(), time.Duration(cfg.Latency)) {
		panic(http.ErrAbortHandler)
	}
	return true
}

// admit passes a call through the Limits, or answers it 429. An admitted
// call holds its slot until release.
func (s *Server) admit(w http.ResponseWriter, in *chatInput, reqID string) bool {
	var tokens int64
	if s.cfg.Limits.Tokens > 0 {
		c := in.complete()
		tokens = c.promptTokens + c.completionTokens
	}
	s.mu.Lock()
	now := s.cfg.Now()
	reason, retryAfter := s.limits.admit(tokens, now)
	if reason == "" {
		s.stats.MaxInFlight = max(s.stats.MaxInFlight, s.limits.inFlight)
		s.stats.PeakInFlight = max(s.stats.PeakInFlight, s.limits.inFlight)
	} else {
		s.stats.RateLimited++
		s.stats.RateLimitedBy[reason]++
	}
	s.limits.headers(w.Header(), now)
	s.mu.Unlock()
	if reason == "" {
		return true
	}
	setRetryAfter(w.Header(), retryAfter)
	writeError(w, reqID, http.StatusTooManyRequests, "rate_limit_exceeded", "simulated provider limit: "+reason)
	return false
}

// release ends an admitted call. A reset meanwhile started a new limiter,
// which never counted it.
func (s *Server) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limits.inFlight > 0 {
		s.limits.inFlight--
	}
}

func (s *Server) countRateLimited(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.RateLimited++
	s.stats.RateLimitedBy[reason]++
}

// limitHeaders sets the x-ratelimit-* headers as of now.
func (s *Server) limitHeaders(h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits.headers(h, s.cfg.Now())
}

// SetLimits replaces the Limits; the buckets start full.
func (s *Server) SetLimits(l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	inFlight := s.limits.inFlight
	s.cfg.Limits = l
	s.limits = newLimiter(l, s.cfg.Now())
	s.limits.inFlight = inFlight
	return nil
}

// CurrentLimits returns the Limits in force.
func (s *Server) CurrentLimits() Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits.cfg
}

func (s *Server) handleGetLimits(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, limitsJSON(s.CurrentLimits()))
}

func (s *Server) handleSetLimits(w http.ResponseWriter, r *http.Request) {
	var l struct {
		Requests int64    `json:"requests"`
		Tokens   int64    `json:"tokens"`
		InFlight int      `json:"in_flight"`
		Window   Duration `json:"window"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "limits: "+err.Error())
		return
	}
	lim := Limits{Requests: l.Requests, Tokens: l.Tokens, InFlight: l.InFlight, Window: time.Duration(l.Window)}
	if err := s.SetLimits(lim); err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, limitsJSON(s.CurrentLimits()))
}

// limitsJSON writes Limits with its window as a duration string.
func limitsJSON(l Limits) any {
	return map[string]any{"requests": l.Requests, "tokens": l.Tokens, "in_flight": l.InFlight, "window": Duration(l.WithDefaults().Window)}
}

var errKeyReused = errors.New("the Idempotency-Key was used with a different request body")

// answer returns the stored call of key, or computes, bills and stores one.
// The computation is instant and runs under s.mu, so of concurrent calls
// with one key the first is billed and the others, having waited on the
// lock, are answered from the store. hold is the bill_then_timeout fault
// when it fired on this computation.
func (s *Server) answer(key string, in *chatInput) (call *storedCall, replayed bool, hold *BillThenTimeout, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.calls[key]; ok && key != "" {
		if c.digest != in.digest {
			return nil, false, nil, errKeyReused
		}
		s.stats.ReplayedCalls++
		s.log.Debug("llmsim: replayed", "key", key, "request_id", c.requestID)
		return c, true, nil, nil
	}
	call = s.bill(key, in)
	if key != "" {
		s.calls[key] = call
	}
	if s.faults.billThenTimeout.fire(key) {
		hold = s.faults.cfg.BillThenTimeout
	}
	return call, false, hold, nil
}

// bill computes the completion and counts it; s.mu is held.
func (s *Server) bill(key string, in *chatInput) *storedCall {
	s.stats.BilledCalls++
	// A keyed call's ids depend only on key and input, so they are the
	// same on any simulator; an unkeyed call's also on its place in the run.
	idSeed := "key:" + key
	if key == "" {
		idSeed = fmt.Sprintf("seq:%d", s.stats.BilledCalls)
	}
	sum := sha256.Sum256(append([]byte(idSeed+"\x00"), in.digest[:]...))
	id := hex.EncodeToString(sum[:12])

	body, c := completionBody(id, in)
	s.stats.BilledPromptTokens += c.promptTokens
	s.stats.BilledCompletionTokens += c.completionTokens
	if key != "" {
		s.stats.CallsByKey[key]++
	}
	s.log.Debug("llmsim: billed", "key", key, "request_id", "req_"+id)
	return &storedCall{digest: in.digest, body: body, requestID: "req_" + id}
}

// completionBody computes the completion of in and writes it as a chat
// completion object whose id ends in id.
func completionBody(id string, in *chatInput) ([]byte, completion) {
	c := in.complete()
	body, _ := json.Marshal(map[string]any{
		"id":      "chatcmpl-sim-" + id,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   in.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": c.content},
			"finish_reason": c.finishReason,
		}},
		"usage": map[string]any{
			"prompt_tokens":     c.promptTokens,
			"completion_tokens": c.completionTokens,
			"total_tokens":      c.promptTokens + c.completionTokens,
		},
	})
	return body, c
}

// wait holds a call for d, or until the client goes away or the simulator
// closes when d is zero. It reports whether d passed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	var elapsed <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		elapsed = t.C
	}
	select {
	case <-elapsed:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	c, ok := s.calls[key]
	s.mu.Unlock()
	if !ok {
		writeError(w, "", http.StatusNotFound, "not_found", "no finished call under this key")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", c.requestID)
	_, _ = w.Write(c.body)
}

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) handlePeak(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.RestartPeak())
}

// RestartPeak returns the counters and restarts PeakInFlight at the calls
// in flight now.
func (s *Server) RestartPeak() Stats {
	st := s.Stats()
	s.mu.Lock()
	s.stats.PeakInFlight = s.limits.inFlight
	s.mu.Unlock()
	return st
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "faults: "+err.Error())
		return
	}
	if err := s.SetFaults(f); err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "faults: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes an error in OpenAI's shape.
func writeError(w http.ResponseWriter, reqID string, status int, typ, msg string) {
	if reqID != "" {
		w.Header().Set("X-Request-Id", reqID)
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": typ}})
}
