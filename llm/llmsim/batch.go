package llmsim

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// The Files and Batches endpoints of OpenAI's Batch API, as far as a batch
// of chat completions needs them:
//
//	POST /v1/files                   upload (multipart: purpose=batch, file)
//	GET  /v1/files?purpose=&after=   list, newest first
//	GET  /v1/files/{id}              one file's object
//	GET  /v1/files/{id}/content      its bytes (input, output or error JSONL)
//	POST /v1/batches                 create (input_file_id, endpoint, completion_window, metadata)
//	GET  /v1/batches?after=&limit=   list, newest first
//	GET  /v1/batches/{id}            one batch
//	POST /v1/batches/{id}/cancel     cancel
//
// A batch moves validating -> in_progress -> finalizing -> completed over
// Config.BatchDelay, read lazily from Config.Now on every request that
// shows it (or failed at validation, expired, cancelling -> cancelled).
// Its lines are computed when it finishes, as online calls are, and billed
// then: each finished line once, counted in Stats.BatchBilledCalls and
// never in BilledCalls, as the provider bills batch calls at their own
// price. A batch line is not an idempotent call: the same custom_id in two
// batches is computed and billed twice, as at OpenAI, so a client that
// creates a second batch for the same calls shows in the counters.

// Batch limits, OpenAI's.
const (
	maxBatchLines     = 50_000
	maxUploadBytes    = 200 << 20
	maxMetadataPairs  = 16
	maxMetadataKey    = 64
	maxMetadataValue  = 512
	batchEndpoint     = "/v1/chat/completions"
	completionWindow  = "24h"
	batchWindowLength = 24 * time.Hour
)

// Batch statuses, OpenAI's.
const (
	BatchValidating = "validating"
	BatchFailed     = "failed"
	BatchInProgress = "in_progress"
	BatchFinalizing = "finalizing"
	BatchCompleted  = "completed"
	BatchExpired    = "expired"
	BatchCancelling = "cancelling"
	BatchCancelled  = "cancelled"
)

// simFile is an uploaded or produced file.
type simFile struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int    `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
	content   []byte
}

// simBatch is a batch and its progress; guarded by Server.mu.
type simBatch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *batchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        int64             `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    requestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`

	created time.Time
	lines   []batchLine
	expire  *BatchExpire // the expiry fault, when it fired on this batch
}

type batchErrors struct {
	Object string       `json:"object"`
	Data   []batchError `json:"data"`
}

type batchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    *int   `json:"line"`
}

type requestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// batchLine is one request of an input file.
type batchLine struct {
	customID string
	in       *chatInput
}

func (s *Server) handleBatchRoutes() {
	for _, prefix := range []string{"", "/v1"} {
		s.mux.HandleFunc("POST "+prefix+"/files", s.handleUpload)
		s.mux.HandleFunc("GET "+prefix+"/files", s.handleListFiles)
		s.mux.HandleFunc("GET "+prefix+"/files/{id}", s.handleGetFile)
		s.mux.HandleFunc("GET "+prefix+"/files/{id}/content", s.handleFileContent)
		s.mux.HandleFunc("DELETE "+prefix+"/files/{id}", s.handleDeleteFile)
		s.mux.HandleFunc("POST "+prefix+"/batches", s.handleCreateBatch)
		s.mux.HandleFunc("GET "+prefix+"/batches", s.handleListBatches)
		s.mux.HandleFunc("GET "+prefix+"/batches/{id}", s.handleGetBatch)
		s.mux.HandleFunc("POST "+prefix+"/batches/{id}/cancel", s.handleCancelBatch)
	}
}

func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxUploadBytes)
	if err := r.ParseMultipartForm(8 << 20); err != nil { //nolint:gosec // r.Body is bounded by MaxBytesReader above
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "multipart form: "+err.Error())
		return
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	if p := r.FormValue("purpose"); p != "batch" {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("purpose %q is not supported by the simulator: use \"batch\"", p))
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "file: "+err.Error())
		return
	}
	defer func() { _ = f.Close() }()
	content, err := io.ReadAll(f)
	if err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "file: "+err.Error())
		return
	}
	s.mu.Lock()
	file := s.addFile(hdr.Filename, "batch", content)
	s.stats.FilesUploaded++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, file)
}

// addFile stores a file; s.mu is held.
func (s *Server) addFile(name, purpose string, content []byte) *simFile {
	s.fileSeq++
	f := &simFile{
		ID: fmt.Sprintf("file-sim%06d", s.fileSeq), Object: "file", Bytes: len(content),
		CreatedAt: s.now().Unix(), Filename: name, Purpose: purpose, Status: "processed", content: content,
	}
	s.files[f.ID] = f
	s.fileOrder = append(s.fileOrder, f.ID)
	return f
}

func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) {
	limit, err := listLimit(r, 10_000)
	if err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	purpose := r.URL.Query().Get("purpose")
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []any
	for _, id := range slices.Backward(s.fileOrder) {
		if f := s.files[id]; purpose == "" || f.Purpose == purpose {
			all = append(all, f)
		}
	}
	writeList(w, all, r.URL.Query().Get("after"), limit, func(v any) string { return v.(*simFile).ID })
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) (*simFile, bool) {
	s.mu.Lock()
	f, ok := s.files[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, "", http.StatusNotFound, "not_found", "no file "+strconv.Quote(r.PathValue("id")))
	}
	return f, ok
}

func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.file(w, r); ok {
		writeJSON(w, http.StatusOK, f)
	}
}

// handleDeleteFile deletes a file, as OpenAI's DELETE /files/{id}: a batch
// created from it before keeps its lines, a create naming it afterwards is
// refused.
func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	_, ok := s.files[id]
	if ok {
		delete(s.files, id)
		s.fileOrder = slices.DeleteFunc(s.fileOrder, func(f string) bool { return f == id })
		s.stats.FilesDeleted++
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, "", http.StatusNotFound, "not_found", "no file "+strconv.Quote(id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "file", "deleted": true})
}

func (s *Server) handleFileContent(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.file(w, r); ok {
		w.Header().Set("Content-Type", "application/jsonl")
		_, _ = w.Write(f.content)
	}
}

func (s *Server) handleCreateBatch(w http.ResponseWriter, r *http.Request) {
	var in struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(&in); err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "request body: "+err.Error())
		return
	}
	if err := validateCreate(in.Endpoint, in.CompletionWindow, in.Metadata); err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	s.mu.Lock()
	f, ok := s.files[in.InputFileID]
	if !ok || f.Purpose != "batch" {
		s.mu.Unlock()
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", "input_file_id "+strconv.Quote(in.InputFileID)+" is no file of purpose batch")
		return
	}
	now := s.now()
	s.batchSeq++
	b := &simBatch{
		ID: fmt.Sprintf("batch_sim%06d", s.batchSeq), Object: "batch", Endpoint: in.Endpoint,
		InputFileID: f.ID, CompletionWindow: in.CompletionWindow, Status: BatchValidating,
		CreatedAt: now.Unix(), ExpiresAt: now.Add(batchWindowLength).Unix(),
		Metadata: in.Metadata, created: now,
	}
	if b.Metadata == nil {
		b.Metadata = map[string]string{}
	}
	b.lines, b.Errors = parseBatchFile(f.content)
	b.RequestCounts.Total = len(b.lines)
	if s.faults.batchExpire.fire(f.ID) {
		b.expire = s.faults.cfg.BatchExpire
	}
	lost := s.faults.batchCreateLost.fire(f.ID)
	s.batches[b.ID] = b
	s.batchOrder = append(s.batchOrder, b.ID)
	s.stats.BatchesCreated++
	out := *b
	s.mu.Unlock()
	if lost {
		s.log.Info("llmsim: fault batch_create_lost", "batch", b.ID)
		panic(http.ErrAbortHandler) // created, but the answer never arrives
	}
	writeJSON(w, http.StatusOK, &out)
}

func validateCreate(endpoint, window string, md map[string]string) error {
	var errs []error
	if endpoint != batchEndpoint {
		errs = append(errs, fmt.Errorf("endpoint %q is not supported by the simulator: use %q", endpoint, batchEndpoint))
	}
	if window != completionWindow {
		errs = append(errs, fmt.Errorf("completion_window must be %q", completionWindow))
	}
	if len(md) > maxMetadataPairs {
		errs = append(errs, fmt.Errorf("metadata has %d pairs, at most %d", len(md), maxMetadataPairs))
	}
	for k, v := range md {
		if len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			errs = append(errs, fmt.Errorf("metadata %q: keys up to %d and values up to %d characters", k, maxMetadataKey, maxMetadataValue))
		}
	}
	return errors.Join(errs...)
}

// parseBatchFile reads an input file's lines, or the errors that fail the
// batch at validation.
func parseBatchFile(content []byte) ([]batchLine, *batchErrors) {
	var lines []batchLine
	var errs []batchError
	seen := map[string]bool{}
	model := ""
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(nil, maxRequestBytes)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		lineNo := n
		fail := func(code, msg string) { errs = append(errs, batchError{Code: code, Message: msg, Line: &lineNo}) }
		var l struct {
			CustomID string          `json:"custom_id"`
			Method   string          `json:"method"`
			URL      string          `json:"url"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			fail("invalid_json_line", err.Error())
			continue
		}
		in, err := parseChat(l.Body)
		switch {
		case l.CustomID == "":
			fail("missing_required_parameter", "custom_id is required")
		case seen[l.CustomID]:
			fail("duplicate_custom_id", "custom_id "+strconv.Quote(l.CustomID)+" is used twice")
		case l.Method != http.MethodPost:
			fail("invalid_method", "method must be POST")
		case l.URL != batchEndpoint:
			fail("invalid_url", "url must be "+batchEndpoint)
		case err != nil:
			fail("invalid_request", err.Error())
		case model != "" && in.Model != model:
			fail("mismatched_model", "every line of a batch must name the same model")
		default:
			seen[l.CustomID], model = true, in.Model
			lines = append(lines, batchLine{customID: l.CustomID, in: in})
		}
	}
	switch {
	case sc.Err() != nil:
		errs = append(errs, batchError{Code: "invalid_file", Message: sc.Err().Error()})
	case len(lines)+len(errs) == 0:
		errs = append(errs, batchError{Code: "empty_file", Message: "the input file has no requests"})
	case len(lines) > maxBatchLines:
		errs = append(errs, batchError{Code: "too_many_requests", Message: fmt.Sprintf("at most %d requests per batch", maxBatchLines)})
	}
	if len(errs) > 0 {
		return nil, &batchErrors{Object: "list", Data: errs}
	}
	return lines, nil
}

func (s *Server) handleGetBatch(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.batches[r.PathValue("id")]
	var out simBatch
	if ok {
		s.advance(b)
		out = *b
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, "", http.StatusNotFound, "not_found", "no batch "+strconv.Quote(r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, &out)
}

func (s *Server) handleListBatches(w http.ResponseWriter, r *http.Request) {
	limit, err := listLimit(r, 100)
	if err != nil {
		writeError(w, "", http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	s.mu.Lock()
	all := make([]any, 0, len(s.batchOrder))
	for _, id := range slices.Backward(s.batchOrder) {
		b := s.batches[id]
		s.advance(b)
		c := *b
		all = append(all, &c)
	}
	s.mu.Unlock()
	writeList(w, all, r.URL.Query().Get("after"), limit, func(v any) string { return v.(*simBatch).ID })
}

func (s *Server) handleCancelBatch(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, ok := s.batches[r.PathValue("id")]
	var out simBatch
	var conflict bool
	if ok {
		s.advance(b)
		switch b.Status {
		case BatchValidating, BatchInProgress, BatchFinalizing:
			b.Status, b.CancellingAt = BatchCancelling, s.stamp()
			s.stats.BatchesCancelled++
		case BatchCancelling, BatchCancelled:
		default:
			conflict = true
		}
		out = *b
	}
	s.mu.Unlock()
	switch {
	case !ok:
		writeError(w, "", http.StatusNotFound, "not_found", "no batch "+strconv.Quote(r.PathValue("id")))
	case conflict:
		writeError(w, "", http.StatusConflict, "invalid_request_error", "batch "+out.ID+" is "+out.Status+" and cannot be cancelled")
	default:
		writeJSON(w, http.StatusOK, &out)
	}
}

// advance moves b to the status its age gives; s.mu is held. A cancelling
// batch is cancelled at the next look, its lines unprocessed and unbilled.
func (s *Server) advance(b *simBatch) {
	now := s.now()
	age, delay := now.Sub(b.created), s.cfg.BatchDelay
	switch b.Status {
	case BatchCancelling:
		b.Status, b.CancelledAt = BatchCancelled, s.stamp()
		return
	case BatchValidating:
		if b.Errors != nil {
			b.Status, b.FailedAt = BatchFailed, s.stamp()
			return
		}
		if age < delay/10 {
			return
		}
		b.Status, b.InProgressAt = BatchInProgress, s.stamp()
		fallthrough
	case BatchInProgress:
		if age < delay*9/10 {
			return
		}
		b.Status, b.FinalizingAt = BatchFinalizing, s.stamp()
		fallthrough
	case BatchFinalizing:
		if age < delay {
			return
		}
		s.finish(b)
	}
}

// finish runs b's lines and writes its output and error files; s.mu is
// held. Each line meets the faults: an expired batch leaves its lines past
// BatchExpire.Completed unrun, BatchLineFail makes a line a 500.
func (s *Server) finish(b *simBatch) {
	done := len(b.lines)
	if b.expire != nil {
		done = int(float64(len(b.lines)) * b.expire.Completed)
	}
	var output, errorsOut bytes.Buffer
	for i, l := range b.lines {
		sum := sha256.Sum256([]byte(b.ID + "\x00" + l.customID))
		id := hex.EncodeToString(sum[:12])
		entry := map[string]any{"id": "batch_req_" + id, "custom_id": l.customID, "error": nil}
		switch {
		case i >= done:
			entry["response"] = nil
			entry["error"] = map[string]any{"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
			b.RequestCounts.Failed++
			writeLine(&errorsOut, entry)
		case s.faults.batchLineFail.fire(l.customID):
			entry["response"] = lineResponse(http.StatusInternalServerError, id, errorBody("server_error", "simulated failed batch line"))
			b.RequestCounts.Failed++
			writeLine(&errorsOut, entry)
		case l.in.contains(MarkerInvalidRequest):
			entry["response"] = lineResponse(http.StatusBadRequest, id, errorBody("invalid_request_error", "simulated invalid request ("+MarkerInvalidRequest+")"))
			b.RequestCounts.Failed++
			writeLine(&errorsOut, entry)
		default:
			body, c := completionBody(id, l.in)
			s.stats.BatchBilledCalls++
			s.stats.BatchBilledPromptTokens += c.promptTokens
			s.stats.BatchBilledCompletionTokens += c.completionTokens
			s.stats.BatchCallsByKey[l.customID]++
			entry["response"] = lineResponse(http.StatusOK, id, json.RawMessage(body))
			b.RequestCounts.Completed++
			writeLine(&output, entry)
		}
	}
	if output.Len() > 0 {
		f := s.addFile(b.ID+"_output.jsonl", "batch_output", output.Bytes())
		b.OutputFileID = &f.ID
	}
	if errorsOut.Len() > 0 {
		f := s.addFile(b.ID+"_error.jsonl", "batch_output", errorsOut.Bytes())
		b.ErrorFileID = &f.ID
	}
	if b.expire != nil {
		b.Status, b.ExpiredAt = BatchExpired, s.stamp()
		s.stats.BatchesExpired++
		return
	}
	b.Status, b.CompletedAt = BatchCompleted, s.stamp()
}

func lineResponse(status int, id string, body any) map[string]any {
	return map[string]any{"status_code": status, "request_id": "req_" + id, "body": body}
}

func errorBody(typ, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": typ}}
}

func writeLine(buf *bytes.Buffer, v any) {
	data, _ := json.Marshal(v)
	buf.Write(data)
	buf.WriteByte('\n')
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

func (s *Server) stamp() *int64 {
	t := s.now().Unix()
	return &t
}

func listLimit(r *http.Request, maxLimit int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return min(20, maxLimit), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, fmt.Errorf("limit must be 1-%d", maxLimit)
	}
	return n, nil
}

// writeList writes OpenAI's cursor page: the items after the one whose id
// is after (from the first when empty), at most limit of them.
func writeList(w http.ResponseWriter, all []any, after string, limit int, id func(any) string) {
	start := 0
	if after != "" {
		i := slices.IndexFunc(all, func(v any) bool { return id(v) == after })
		if i < 0 {
			writeError(w, "", http.StatusBadRequest, "invalid_request_error", "after: no object "+strconv.Quote(after))
			return
		}
		start = i + 1
	}
	page := all[start:min(start+limit, len(all))]
	out := map[string]any{"object": "list", "data": page, "has_more": start+len(page) < len(all), "first_id": nil, "last_id": nil}
	if len(page) > 0 {
		out["first_id"], out["last_id"] = id(page[0]), id(page[len(page)-1])
	}
	if page == nil {
		out["data"] = []any{}
	}
	writeJSON(w, http.StatusOK, out)
}
