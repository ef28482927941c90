// Package gateway is oncejob's HTTP/JSON face. Every call passes the gRPC
// server's interceptor chain — request id, logging, recovery, auth,
// validation, idempotency — so the contract cannot differ between the two:
// unary calls over a gRPC client connection (in process, see InProcess),
// watches through the server's Local streams (Streamer).
//
// The unary routes are grpc-gateway v2's, generated from the HTTP rules in
// proto/oncejob/v1/http.yaml. Headers map to metadata and back
// (headers.go); errors are RFC 9457 problem+json carrying the gRPC
// ErrorInfo reason, with the IETF Idempotency-Key draft's statuses
// (problem.go). The two watches are served here as Server-Sent Events or
// newline-delimited JSON (watch.go).
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	oncejobgw "github.com/oncejob/oncejob/gen/go/gateway/oncejob/v1"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/requestid"
)

// Config is what a Gateway needs. Zero fields take the defaults stated.
type Config struct {
	// Conn reaches the gRPC server, for the unary routes. Required.
	Conn grpc.ClientConnInterface
	// Streams runs the watches (server.Local of the same server). Required.
	Streams Streamer
	// MaxBodyBytes bounds a request body; a larger one is refused with 413
	// before anything is read into a request. Default 16 MiB + 1 MiB.
	MaxBodyBytes int64
	// MaxMessageBytes is the gRPC server's receive limit
	// (server.MaxMessageBytes); a body that decodes to a larger request is
	// refused with 413 too. Default: the server's default,
	// server.MaxMessageBytes(server.DefaultMaxDocumentBytes).
	MaxMessageBytes int
	// Heartbeat is how often a quiet watch stream sends a comment (SSE) or
	// an empty line (NDJSON), so proxies keep it open; default 15s.
	Heartbeat time.Duration
	// Authenticate, when set, checks a request's Authorization header
	// before its body is read, so a caller that would be refused costs no
	// read of its body (its error, a gRPC status, is the answer). The
	// gRPC server authenticates the call again, from its cache. Default:
	// none, the server alone decides.
	Authenticate func(ctx context.Context, authorization string) error
	// Memory is the process's memory budget: a request body draws its
	// bytes from it as they arrive, before they reach the decoder, and
	// gives them back when the request is answered; one
	// the budget cannot hold now is 429 MEMORY_BUDGET with Retry-After.
	// Default: none, unlimited. Every response but a watch's draws its
	// bytes from it too while they are written (response.go).
	Memory *membudget.Budget
	// WriteTimeout bounds the writing of a response, every one but a
	// watch's: a client that does not read it by then loses its
	// connection, and the response its bytes. Default
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultMaxBodyBytes is the default body limit: an 8 MiB document as
// base64 `data` (4/3) or as JSON-escaped `text` takes up to about twice its
// size, plus room for the rest of the request.
const DefaultMaxBodyBytes = 17 << 20

// MaxBodyBytesFor is the body limit for a server whose document limit is
// maxDocumentBytes: twice the document (JSON escaping or base64) plus 1 MiB.
func MaxBodyBytesFor(maxDocumentBytes int) int64 {
	return 2*int64(maxDocumentBytes) + 1<<20
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = server.MaxMessageBytes(server.DefaultMaxDocumentBytes)
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Gateway serves the HTTP/JSON API under /v1/ and a health check at
// /healthz. It implements http.Handler.
type Gateway struct {
	cfg       Config
	mux       *runtime.ServeMux
	client    oncejobv1.JobServiceClient
	marshaler runtime.Marshaler
	events    *eventCache
	signals   TestSignals
}

// eventCacheSize is how many job events' JSON the watches keep: a few
// hundred KiB.
const eventCacheSize = 4096

// marshaler is the JSON of requests and responses: proto field names
// (snake_case, as in the proto and every other client), unknown fields
// refused rather than silently dropped, zero values omitted.
var marshaler = &runtime.JSONPb{
	MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true},
	UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
}

// New returns a Gateway on cfg.Conn.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	cfg = cfg.WithDefaults()
	if cfg.Conn == nil || cfg.Streams == nil {
		return nil, errors.New("gateway: Config.Conn and Config.Streams are required")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxMessageBytes < 0 {
		return nil, errors.New("gateway: Config.MaxBodyBytes and MaxMessageBytes must not be negative")
	}
	cfg.Conn = sizedConn{ClientConnInterface: cfg.Conn, max: cfg.MaxMessageBytes}
	g := &Gateway{cfg: cfg, client: oncejobv1.NewJobServiceClient(cfg.Conn), marshaler: marshaler, events: newEventCache(eventCacheSize)}
	g.mux = runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, marshaler),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithOutgoingHeaderMatcher(outgoingHeader),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithErrorHandler(g.errorHandler),
		runtime.WithRoutingErrorHandler(g.routingErrorHandler),
		runtime.WithDisableHTTPMethodOverride(),
		runtime.WithHealthzEndpoint(healthpb.NewHealthClient(cfg.Conn)),
	)
	if err := oncejobgw.RegisterJobServiceHandlerClient(ctx, g.mux, g.client); err != nil {
		return nil, err
	}
	// A server whose store keeps no deliveries does not register the
	// service: its routes then answer UNIMPLEMENTED (501), as over gRPC.
	if err := oncejobgw.RegisterDeliveryServiceHandlerClient(ctx, g.mux, oncejobv1.NewDeliveryServiceClient(cfg.Conn)); err != nil {
		return nil, err
	}
	if err := oncejobgw.RegisterRunServiceHandlerClient(ctx, g.mux, oncejobv1.NewRunServiceClient(cfg.Conn)); err != nil {
		return nil, err
	}
	if err := oncejobgw.RegisterScheduleServiceHandlerClient(ctx, g.mux, oncejobv1.NewScheduleServiceClient(cfg.Conn)); err != nil {
		return nil, err
	}
	// After the generated routes: the mux tries the newest first, and GET
	// /v1/jobs/{job_id} would otherwise take "<id>:watch" as an id.
	if err := g.mux.HandlePath(http.MethodGet, "/v1/jobs/{job_id}:watch", g.watchJob); err != nil {
		return nil, err
	}
	if err := g.mux.HandlePath(http.MethodGet, "/v1/jobs:watch", g.watchJobs); err != nil {
		return nil, err
	}
	return g, nil
}

// ServeHTTP gives every request an X-Request-Id (the client's when valid,
// as the gRPC server would keep it, else a new one, sent on to the server
// so both log the same id), bounds its body and its response, and serves
// it.
func (g *Gateway) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &heldResponse{ResponseWriter: rw, g: g, r: r}
	defer w.start() // a response with no body still sends its status
	id := r.Header.Get(requestIDHeader)
	if !requestid.Valid(id) {
		id = uuid.NewString()
		r.Header.Set(requestIDHeader, id)
	}
	w.Header().Set(requestIDHeader, id)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if p := invalidURLText(r); p != nil {
		g.writeProblem(w, r, p)
		return
	}
	// Over HTTP/2 a request without a body still has a Body (empty, with
	// ContentLength 0): only a body that may hold something must be JSON.
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if p := requireJSON(r); p != nil {
			g.writeProblem(w, r, p)
			return
		}
		if g.cfg.Authenticate != nil {
			if err := g.cfg.Authenticate(r.Context(), r.Header.Get("Authorization")); err != nil {
				g.writeProblem(w, r, problemFromStatus(status.Convert(err)))
				return
			}
		}
		// Drawn as it arrives, not by its Content-Length: a body that
		// trickles holds what came, so slow bodies cannot take the budget
		// from every other caller (issue #31, TestResourceSoak).
		hold := g.cfg.Memory.Hold("a request body")
		defer hold.Release() // after the call: the body is held until then
		r.Body = heldBody{ReadCloser: r.Body, hold: hold}
		body, p := g.readBody(w, r)
		if p == nil {
			p = invalidJSONBody(body)
		}
		if p != nil {
			g.writeProblem(w, r, p)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	g.mux.ServeHTTP(w, r)
}

// requireJSON refuses a body that is not application/json with 415. Beside
// saying what the API reads, it keeps other sites' pages out: a browser
// sends a cross-site POST without asking first only with a form's or
// text/plain's media type, and a server without keys (dev mode) would
// otherwise act on it.
func requireJSON(r *http.Request) *problem {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == "application/json" {
		return nil
	}
	return &problem{
		Type:   "urn:oncejob:problem:" + reasonUnsupportedMediaType,
		Title:  http.StatusText(http.StatusUnsupportedMediaType),
		Status: http.StatusUnsupportedMediaType,
		Detail: "a request body must be JSON, sent with Content-Type: application/json",
		Code:   codeName(codes.InvalidArgument), Reason: reasonUnsupportedMediaType, Domain: idempotency.ErrorDomain,
	}
}

// readBody reads the whole body, refusing one over the limit: by its
// Content-Length before reading anything, else once the limit is passed.
// Nothing reaches the gRPC server, so nothing is written.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *problem) {
	if r.ContentLength > g.cfg.MaxBodyBytes {
		return nil, bodyTooLarge(g.cfg.MaxBodyBytes, fmt.Sprintf("the body is %d bytes", r.ContentLength))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, bodyTooLarge(g.cfg.MaxBodyBytes, "the body is larger")
	case errors.As(err, new(overBudget)):
		return nil, problemFromStatus(status.Convert(errors.Unwrap(err)))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, bodyTimeout()
	case err != nil:
		return nil, problemFromStatus(status.New(codes.InvalidArgument, "cannot read the request body: "+err.Error()))
	}
	return body, nil
}

// heldBody draws a body of unknown length from the memory budget as it is
// read, before its bytes reach the caller.
type heldBody struct {
	io.ReadCloser
	hold *membudget.Hold
}

// overBudget is the budget's refusal of a body's next bytes.
type overBudget struct{ err error }

func (e overBudget) Error() string { return e.err.Error() }
func (e overBudget) Unwrap() error { return e.err }

func (b heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if gerr := b.hold.Grow(int64(n)); gerr != nil {
			return 0, overBudget{gerr}
		}
	}
	return n, err
}
