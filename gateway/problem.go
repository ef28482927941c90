package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/idempotency"
)

// problemContentType is RFC 9457's media type.
const problemContentType = "application/problem+json"

// problem is an RFC 9457 problem details object. Beside the standard
// members it carries what the gRPC status carries, so an HTTP client can
// act on the same reason codes as a gRPC one.
type problem struct {
	// Type names the kind of problem: "urn:oncejob:problem:<reason>" for
	// errors with an ErrorInfo reason, else "about:blank" (the title is then
	// the HTTP status text).
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`

	// Code is the gRPC status code's name, e.g. "INVALID_ARGUMENT".
	Code string `json:"code"`
	// Reason, Domain and Metadata are the google.rpc.ErrorInfo.
	Reason   string            `json:"reason,omitempty"`
	Domain   string            `json:"domain,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// FieldViolations is the google.rpc.BadRequest.
	FieldViolations []fieldViolation `json:"field_violations,omitempty"`
	// RetryAfterSeconds is also sent as the Retry-After header (429, 503).
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
	RequestID         string `json:"request_id,omitempty"`
}

type fieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// Reasons of problems the gateway makes itself, before the gRPC server.
const (
	reasonBodyTooLarge         = "REQUEST_BODY_TOO_LARGE"
	reasonNoRoute              = "NO_ROUTE"
	reasonUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
)

// problemFromStatus maps a gRPC status to a problem. The HTTP status is
// grpc-gateway's mapping (RFC 9110 semantics of the gRPC codes) with the
// IETF Idempotency-Key draft's on top: a key reused with another request is
// 422, a missing or malformed key 400 (INVALID_ARGUMENT already). A
// FAILED_PRECONDITION (the job's status does not allow the request) is 409
// Conflict: the request conflicts with the resource's current state.
func problemFromStatus(st *status.Status) *problem {
	p := &problem{
		Type:   "about:blank",
		Status: runtime.HTTPStatusFromCode(st.Code()),
		Detail: st.Message(),
		Code:   codeName(st.Code()),
	}
	retryAfter := 0
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			p.Reason, p.Domain, p.Metadata = d.GetReason(), d.GetDomain(), d.GetMetadata()
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				p.FieldViolations = append(p.FieldViolations, fieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		case *errdetails.RetryInfo:
			retryAfter = int(math.Ceil(d.GetRetryDelay().AsDuration().Seconds()))
		}
	}
	switch {
	case p.Reason == idempotency.ReasonKeyReused:
		p.Status = http.StatusUnprocessableEntity
	case st.Code() == codes.FailedPrecondition:
		p.Status = http.StatusConflict
	}
	if p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable {
		p.RetryAfterSeconds = max(retryAfter, 1)
	}
	p.Title = http.StatusText(p.Status)
	if p.Reason != "" {
		p.Type = "urn:oncejob:problem:" + p.Reason
	}
	return p
}

func codeName(c codes.Code) string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return "UNKNOWN"
}

// codeNames are the canonical names of google.rpc.Code (codes.Code's
// String is CamelCase).
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

func bodyTooLarge(limit int64, why string) *problem {
	return &problem{
		Type:   "urn:oncejob:problem:" + reasonBodyTooLarge,
		Title:  http.StatusText(http.StatusRequestEntityTooLarge),
		Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("%s; the limit is %d bytes (twice --max-document-bytes plus 1 MiB)", why, limit),
		Code:   codeName(codes.InvalidArgument),
		Reason: reasonBodyTooLarge, Domain: idempotency.ErrorDomain,
		Metadata: map[string]string{"limit_bytes": strconv.FormatInt(limit, 10)},
	}
}

// reasonBodyTimeout is the reason of a body that did not arrive in time.
const reasonBodyTimeout = "REQUEST_BODY_TIMEOUT"

// bodyTimeout is the 408 of a body that did not arrive within the
// server's request read timeout (serve --request-read-timeout).
func bodyTimeout() *problem {
	return &problem{
		Type:   "urn:oncejob:problem:" + reasonBodyTimeout,
		Title:  http.StatusText(http.StatusRequestTimeout),
		Status: http.StatusRequestTimeout,
		Detail: "the request body did not arrive within the server's request read timeout; send it again, faster",
		Code:   codeName(codes.DeadlineExceeded),
		Reason: reasonBodyTimeout, Domain: idempotency.ErrorDomain,
	}
}

// writeProblem sends p as the response, with the request id and, for 429
// and 503, Retry-After; 401 says how to authenticate.
func (g *Gateway) writeProblem(w http.ResponseWriter, r *http.Request, p *problem) {
	p.RequestID = w.Header().Get(requestIDHeader)
	h := w.Header()
	h.Set("Content-Type", problemContentType)
	h.Del("Trailer")
	if p.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfterSeconds))
	}
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="oncejob"`)
	}
	body, err := json.Marshal(p)
	if err != nil {
		g.cfg.Logger.ErrorContext(r.Context(), "gateway: marshal problem", "error", err)
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// errorHandler is the mux's: every gRPC error becomes a problem.
func (g *Gateway) errorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if p, ok := messageTooLarge(err); ok {
		g.writeProblem(w, r, p)
		return
	}
	g.writeProblem(w, r, problemFromStatus(explainDecodeError(status.Convert(err))))
}

// routingErrorHandler answers a path or method the API does not have.
func (g *Gateway) routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	code := codes.NotFound
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		code = codes.Unimplemented
	case http.StatusBadRequest:
		code = codes.InvalidArgument
	}
	p := &problem{
		Type: "urn:oncejob:problem:" + reasonNoRoute, Title: http.StatusText(httpStatus), Status: httpStatus,
		Detail: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path),
		Code:   codeName(code), Reason: reasonNoRoute, Domain: idempotency.ErrorDomain,
	}
	g.writeProblem(w, r, p)
}
