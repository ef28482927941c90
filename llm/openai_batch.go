package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

var _ BatchProvider = (*OpenAIClient)(nil)

// BatchesSupported reports whether Config.Batches says the provider serves
// OpenAI's Files and Batches endpoints; BatchesOf refuses the client when
// it does not.
func (c *OpenAIClient) BatchesSupported() bool { return c.cfg.Batches }

// batchLineURL is the url of every line of an input file.
const batchLineURL = "/v1/chat/completions"

// batchLine is req's line of an input file, without its newline.
func batchLine(req *Request) ([]byte, error) {
	return json.Marshal(map[string]any{"custom_id": req.ProviderKey, "method": http.MethodPost, "url": batchLineURL, "body": newChatRequest(req)})
}

// BatchLineBytes is the size of req's line in an input file, its newline
// included: what a batch's byte bound counts.
func BatchLineBytes(req *Request) int64 {
	line, err := batchLine(req)
	if err != nil {
		return 0 // refused at the upload, with the reason
	}
	return int64(len(line)) + 1
}

// UploadBatchFile implements BatchProvider: POST {BaseURL}/files, purpose
// batch, one JSONL line per call whose custom_id is its provider key.
func (c *OpenAIClient) UploadBatchFile(ctx context.Context, name string, calls []*Request) (*BatchFile, error) {
	var jsonl bytes.Buffer
	for i, req := range calls {
		if req == nil {
			return nil, fmt.Errorf("llm: call %d is nil", i)
		}
		if err := validateRequest(req); err != nil {
			return nil, err
		}
		if req.ProviderKey == "" {
			return nil, &Error{Class: ClassInvalidRequest, Message: fmt.Sprintf("call %d has no provider key: a batch line's custom_id is its provider key", i)}
		}
		line, err := batchLine(req)
		if err != nil {
			return nil, &Error{Class: ClassInvalidRequest, Message: "encode call", Err: err}
		}
		jsonl.Write(line)
		jsonl.WriteByte('\n')
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "batch")
	part, err := mw.CreateFormFile("file", name)
	if err != nil {
		return nil, &Error{Class: ClassInvalidRequest, Message: "encode upload", Err: err}
	}
	_, _ = part.Write(jsonl.Bytes())
	if err := mw.Close(); err != nil {
		return nil, &Error{Class: ClassInvalidRequest, Message: "encode upload", Err: err}
	}
	var f fileObject
	if err := c.call(ctx, http.MethodPost, "/files", mw.FormDataContentType(), body.Bytes(), &f); err != nil {
		return nil, err
	}
	return f.file(), nil
}

// FindBatchFile implements BatchProvider: GET {BaseURL}/files?purpose=batch,
// newest first, page by page until a file older than since.
func (c *OpenAIClient) FindBatchFile(ctx context.Context, name string, since time.Time) (*BatchFile, error) {
	var found *BatchFile
	err := c.pages(ctx, "/files?purpose=batch&order=desc&limit=1000", func(raw json.RawMessage) (bool, error) {
		var f fileObject
		if err := json.Unmarshal(raw, &f); err != nil {
			return false, err
		}
		if time.Unix(f.CreatedAt, 0).Before(since.Truncate(time.Second)) {
			return false, nil
		}
		if f.Filename == name {
			found = f.file()
			return false, nil
		}
		return true, nil
	})
	if err == nil && found == nil {
		err = ErrNotFound
	}
	return found, err
}

// DeleteBatchFile implements BatchProvider: DELETE {BaseURL}/files/{id};
// a file not found is already gone.
func (c *OpenAIClient) DeleteBatchFile(ctx context.Context, id string) error {
	var out struct {
		Deleted bool `json:"deleted"`
	}
	err := c.call(ctx, http.MethodDelete, "/files/"+url.PathEscape(id), "", nil, &out)
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusNotFound {
		return nil
	}
	if err == nil && !out.Deleted {
		return &Error{Class: ClassUnavailable, Message: "DELETE /files/" + id + ": the provider did not delete the file"}
	}
	return err
}

// CreateBatch implements BatchProvider: POST {BaseURL}/batches with a 24 h
// window.
func (c *OpenAIClient) CreateBatch(ctx context.Context, fileID string, metadata map[string]string) (*Batch, error) {
	body, err := json.Marshal(map[string]any{"input_file_id": fileID, "endpoint": batchLineURL, "completion_window": "24h", "metadata": metadata})
	if err != nil {
		return nil, &Error{Class: ClassInvalidRequest, Message: "encode batch", Err: err}
	}
	var b batchObject
	if err := c.call(ctx, http.MethodPost, "/batches", "application/json", body, &b); err != nil {
		return nil, err
	}
	return b.batch(), nil
}

// FindBatch implements BatchProvider: GET {BaseURL}/batches?after=..., newest
// first, page by page until a batch older than since.
func (c *OpenAIClient) FindBatch(ctx context.Context, key, value string, since time.Time) (*Batch, error) {
	var found *Batch
	err := c.pages(ctx, "/batches?limit=100", func(raw json.RawMessage) (bool, error) {
		var b batchObject
		if err := json.Unmarshal(raw, &b); err != nil {
			return false, err
		}
		if time.Unix(b.CreatedAt, 0).Before(since.Truncate(time.Second)) {
			return false, nil
		}
		if v, ok := b.Metadata[key]; ok && v == value {
			found = b.batch()
			return false, nil
		}
		return true, nil
	})
	if err == nil && found == nil {
		err = ErrNotFound
	}
	return found, err
}

// GetBatch implements BatchProvider.
func (c *OpenAIClient) GetBatch(ctx context.Context, id string) (*Batch, error) {
	var b batchObject
	if err := c.call(ctx, http.MethodGet, "/batches/"+url.PathEscape(id), "", nil, &b); err != nil {
		return nil, err
	}
	return b.batch(), nil
}

// CancelBatch implements BatchProvider. A 409 (the batch has finished) is
// answered with the batch as it is.
func (c *OpenAIClient) CancelBatch(ctx context.Context, id string) (*Batch, error) {
	var b batchObject
	err := c.call(ctx, http.MethodPost, "/batches/"+url.PathEscape(id)+"/cancel", "", nil, &b)
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusConflict {
		return c.GetBatch(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	return b.batch(), nil
}

// BatchResults implements BatchProvider: GET {BaseURL}/files/{id}/content of
// the output and error files.
func (c *OpenAIClient) BatchResults(ctx context.Context, b *Batch) ([]BatchResult, error) {
	var out []BatchResult
	for _, id := range []string{b.OutputFileID, b.ErrorFileID} {
		if id == "" {
			continue
		}
		data, err := c.content(ctx, id)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, maxBodyBytes)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			r, err := parseResultLine(sc.Bytes())
			if err != nil {
				return nil, &Error{Class: ClassUnavailable, Message: "file " + id + ": a line is no batch result", Err: err}
			}
			out = append(out, r)
		}
		if err := sc.Err(); err != nil {
			return nil, &Error{Class: ClassUnavailable, Message: "file " + id, Err: err}
		}
	}
	return out, nil
}

func parseResultLine(line []byte) (BatchResult, error) {
	var l struct {
		CustomID string `json:"custom_id"`
		Response *struct {
			StatusCode int             `json:"status_code"`
			RequestID  string          `json:"request_id"`
			Body       json.RawMessage `json:"body"`
		} `json:"response"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return BatchResult{}, err
	}
	if l.CustomID == "" {
		return BatchResult{}, errors.New("no custom_id")
	}
	r := BatchResult{CustomID: l.CustomID}
	switch {
	case l.Response != nil && success(l.Response.StatusCode):
		resp := &http.Response{StatusCode: l.Response.StatusCode, Header: http.Header{}}
		resp.Header.Set("X-Request-Id", l.Response.RequestID)
		out, err := parseCompletion(resp, l.Response.Body)
		if err != nil {
			return BatchResult{}, err
		}
		r.Response = out
	case l.Response != nil:
		resp := &http.Response{StatusCode: l.Response.StatusCode, Header: http.Header{}}
		r.Err = statusError(resp, l.Response.Body)
	case l.Error != nil && l.Error.Code == "batch_expired":
		r.Err = &Error{Class: ClassUnavailable, Message: l.Error.Message}
		r.Expired = true
	case l.Error != nil:
		r.Err = &Error{Class: ClassUnavailable, Message: l.Error.Code + ": " + l.Error.Message}
	default:
		return BatchResult{}, errors.New("neither response nor error")
	}
	return r, nil
}

// pages walks an OpenAI list newest first; each item goes to fn until fn
// reports false or the list ends.
func (c *OpenAIClient) pages(ctx context.Context, path string, fn func(json.RawMessage) (bool, error)) error {
	after := ""
	for {
		p := path
		if after != "" {
			p += "&after=" + url.QueryEscape(after)
		}
		var page struct {
			Data    []json.RawMessage `json:"data"`
			HasMore bool              `json:"has_more"`
			LastID  string            `json:"last_id"`
		}
		if err := c.call(ctx, http.MethodGet, p, "", nil, &page); err != nil {
			return err
		}
		for _, raw := range page.Data {
			more, err := fn(raw)
			if err != nil {
				return &Error{Class: ClassUnavailable, Message: "list " + path, Err: err}
			}
			if !more {
				return nil
			}
		}
		if !page.HasMore || page.LastID == "" || page.LastID == after {
			return nil
		}
		after = page.LastID
	}
}

func (c *OpenAIClient) content(ctx context.Context, fileID string) ([]byte, error) {
	var raw rawBody
	if err := c.call(ctx, http.MethodGet, "/files/"+url.PathEscape(fileID)+"/content", "", nil, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// rawBody takes an answer as it is.
type rawBody []byte

// call sends one request of the batch API and decodes its answer into out.
// A GET's lost answer is unavailable (it changed nothing); a POST's is an
// unknown outcome once the request was written, as for Generate. A 404 on
// the list of batches or files means the server has no batch API.
func (c *OpenAIClient) call(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	if !c.cfg.Batches {
		return ErrBatchUnsupported
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
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return &Error{Class: ClassInvalidRequest, Message: "build request", Err: err}
	}
	c.setHeaders(req)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		if method != http.MethodGet && wrote.Load() {
			return &Error{Class: ClassOutcomeUnknown, Message: method + " " + path + ": no answer after the request was sent", Err: err}
		}
		return &Error{Class: ClassUnavailable, Message: method + " " + path + ": request failed", Err: err}
	}
	defer func() { _ = resp.Body.Close() }() // read to the end by readBody
	data, readErr := readBody(resp)
	if !success(resp.StatusCode) {
		return statusError(resp, data)
	}
	unknown := ClassUnavailable
	if method != http.MethodGet {
		unknown = ClassOutcomeUnknown
	}
	if readErr != nil {
		return &Error{Class: unknown, StatusCode: resp.StatusCode, Message: method + " " + path + ": answer cut off", Err: readErr}
	}
	if raw, ok := out.(*rawBody); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Class: unknown, StatusCode: resp.StatusCode, Message: method + " " + path + ": unreadable answer", Err: err}
	}
	return nil
}

type fileObject struct {
	ID        string `json:"id"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
}

func (f *fileObject) file() *BatchFile {
	return &BatchFile{ID: f.ID, Filename: f.Filename, Bytes: f.Bytes}
}

type batchObject struct {
	ID            string            `json:"id"`
	Status        string            `json:"status"`
	InputFileID   string            `json:"input_file_id"`
	OutputFileID  *string           `json:"output_file_id"`
	ErrorFileID   *string           `json:"error_file_id"`
	CreatedAt     int64             `json:"created_at"`
	ExpiresAt     int64             `json:"expires_at"`
	Metadata      map[string]string `json:"metadata"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Errors *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    *int   `json:"line"`
		} `json:"data"`
	} `json:"errors"`
}

func (o *batchObject) batch() *Batch {
	b := &Batch{
		ID: o.ID, Status: o.Status, InputFileID: o.InputFileID, Metadata: o.Metadata,
		Total: o.RequestCounts.Total, Completed: o.RequestCounts.Completed, Failed: o.RequestCounts.Failed,
		CreatedAt: time.Unix(o.CreatedAt, 0), ExpiresAt: time.Unix(o.ExpiresAt, 0),
	}
	if o.OutputFileID != nil {
		b.OutputFileID = *o.OutputFileID
	}
	if o.ErrorFileID != nil {
		b.ErrorFileID = *o.ErrorFileID
	}
	if o.Errors != nil {
		for _, e := range o.Errors.Data {
			msg := e.Code + ": " + e.Message
			if e.Line != nil {
				msg = "line " + strconv.Itoa(*e.Line) + ": " + msg
			}
			b.Errors = append(b.Errors, msg)
		}
	}
	return b
}
