package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
)

// The watches are served here rather than by grpc-gateway's generated
// streaming, which has neither SSE framing, nor event ids, nor heartbeats.
// They call the same gRPC streams (so auth, validation, tenancy and the
// watch semantics are the server's), and frame each response:
//
//   - Server-Sent Events when the client accepts text/event-stream (as
//     EventSource does): `id` is the event's seq (WatchJob) or the change's
//     cursor (WatchJobs), `data` the response as JSON, so a reconnect with
//     Last-Event-ID resumes after it, on any replica; an `end` event when
//     WatchJob ends, a `problem` event (RFC 9457 JSON) when a stream fails
//     after it started, a comment every Heartbeat;
//   - otherwise newline-delimited JSON, grpc-gateway's stream format: one
//     {"result": response} per line, {"error": problem} last on a failure,
//     an empty line every Heartbeat.
//
// A request that fails before the watch is established (authentication,
// validation, another tenant's job) gets its status and a problem body,
// not a stream: the server marks its headers once the watch is established
// (server.EstablishedHeader), and the gateway starts the stream then.
//
// The watch runs in the HTTP handler's goroutine through server.Local: the
// server's own stream interceptor chain and handler, with responses passed
// as values. So a watch holds one goroutine and no in-process connection,
// and a burst of events costs one JSON encoding per event (eventCache) and
// one write per watcher.

// Streamer runs a server-streaming RPC of the gRPC server in the caller's
// goroutine, through the server's interceptor chain (server.Local). ctx
// carries the call's incoming metadata; onHeader gets the response headers
// once; onMsg each response. It returns the call's status error.
type Streamer interface {
	Stream(ctx context.Context, method string, req proto.Message, onHeader func(metadata.MD), onMsg func(proto.Message) error) error
}

// watchJob serves GET /v1/jobs/{job_id}:watch.
func (g *Gateway) watchJob(w http.ResponseWriter, r *http.Request, path map[string]string) {
	req := &oncejobv1.WatchJobRequest{}
	if p := populate(req, r, utilities.NewDoubleArray([][]string{{"job_id"}})); p != nil {
		g.writeProblem(w, r, p)
		return
	}
	req.JobId = path["job_id"]
	if last := r.Header.Get(lastEventIDHeader); last != "" {
		seq, err := strconv.ParseInt(last, 10, 32)
		if err != nil || seq < 0 {
			g.writeProblem(w, r, badHeader(lastEventIDHeader, "must be the seq of an event this watch sent"))
			return
		}
		req.AfterSeq = int32(seq)
	}
	g.serveWatch(w, r, oncejobv1.JobService_WatchJob_FullMethodName, req, func(m proto.Message) (string, []byte, error) {
		e := m.(*oncejobv1.WatchJobResponse).GetEvent()
		id := strconv.Itoa(int(e.GetSeq()))
		data, err := g.events.get(e.GetJobId()+"/"+id, func() ([]byte, error) { return g.marshaler.Marshal(m) })
		return id, data, err
	})
}

// watchJobs serves GET /v1/jobs:watch.
func (g *Gateway) watchJobs(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	req := &oncejobv1.WatchJobsRequest{}
	if p := populate(req, r, &utilities.DoubleArray{}); p != nil {
		g.writeProblem(w, r, p)
		return
	}
	if last := r.Header.Get(lastEventIDHeader); last != "" {
		req.AfterCursor = last // the server validates it as it does after_cursor
	}
	// Not cached: a change carries its job as each watcher read it.
	g.serveWatch(w, r, oncejobv1.JobService_WatchJobs_FullMethodName, req, func(m proto.Message) (string, []byte, error) {
		data, err := g.marshaler.Marshal(m)
		return m.(*oncejobv1.WatchJobsResponse).GetCursor(), data, err
	})
}

func populate(req proto.Message, r *http.Request, filter *utilities.DoubleArray) *problem {
	if err := runtime.PopulateQueryParameters(req, r.URL.Query(), filter); err != nil {
		return problemFromStatus(status.New(codes.InvalidArgument, "query: "+err.Error()))
	}
	return nil
}

func badHeader(header, why string) *problem {
	p := problemFromStatus(status.New(codes.InvalidArgument, header+" "+why))
	p.FieldViolations = []fieldViolation{{Field: "header." + header, Description: why}}
	return p
}

// serveWatch runs the watch method and answers: its status and a problem
// when it fails before it is established, else its responses in the
// format the client accepts, until the watch ends, fails or the client
// goes away. encode gives a response's event id and its JSON.
func (g *Gateway) serveWatch(w http.ResponseWriter, r *http.Request, method string, req proto.Message, encode func(proto.Message) (string, []byte, error)) {
	// The request's headers become the call's metadata exactly as for the
	// generated routes, then arrive as a gRPC client's would.
	ctx, err := runtime.AnnotateContext(r.Context(), g.mux, r, method)
	if err != nil {
		g.writeProblem(w, r, problemFromStatus(status.Convert(err)))
		return
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = metadata.NewIncomingContext(ctx, md)

	requestID := w.Header().Get(requestIDHeader)
	var f *framer
	defer func() {
		if f != nil {
			f.close()
		}
	}()
	err = g.cfg.Streams.Stream(ctx, method, req,
		func(h metadata.MD) {
			// A watch that fails before it is established sends headers
			// too (with its status), never this one.
			if len(h.Get(server.EstablishedHeader)) > 0 {
				f = newFramer(w, r, g.cfg.Heartbeat)
			}
		},
		func(m proto.Message) error {
			if f == nil {
				return status.Error(codes.Internal, "the watch sent an event before it was established")
			}
			id, data, err := encode(m)
			if err != nil {
				return err
			}
			return f.message(id, data) // an error: the client is gone, and the watch ends
		})
	switch {
	case f == nil:
		g.writeProblem(w, r, problemFromStatus(status.Convert(err)))
	case err == nil:
		f.end()
	case r.Context().Err() == nil:
		p := problemFromStatus(status.Convert(err))
		p.RequestID = requestID
		f.problem(p)
	}
}

// framer writes one stream format, each write flushed, and a heartbeat
// after every quiet interval. Its methods are safe for concurrent use with
// the heartbeat's timer until close.
type framer struct {
	mu     sync.Mutex
	closed bool
	w      http.ResponseWriter
	rc     *http.ResponseController
	sse    bool
	quiet  time.Duration
	timer  *time.Timer
}

// newFramer sends the response's headers and starts the heartbeat.
func newFramer(w http.ResponseWriter, r *http.Request, heartbeat time.Duration) *framer {
	streaming(w)
	f := &framer{w: w, rc: http.NewResponseController(w), sse: acceptsSSE(r), quiet: heartbeat}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start()
	f.timer = time.AfterFunc(heartbeat, f.heartbeat)
	return f
}

// acceptsSSE reports whether the client asked for Server-Sent Events.
func acceptsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

func (f *framer) start() {
	h := f.w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	if f.sse {
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		f.w.WriteHeader(http.StatusOK)
		// Reconnect after a second rather than the browser's default three.
		_ = f.writeLocked([]byte("retry: 1000\n\n"))
		return
	}
	h.Set("Content-Type", "application/x-ndjson")
	f.w.WriteHeader(http.StatusOK)
	_ = f.writeLocked(nil)
}

// close stops the heartbeat and every write: the ResponseWriter is not to
// be used once the handler returns.
func (f *framer) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.timer.Stop()
}

// write sends b and flushes; the stream was not quiet, so the heartbeat
// waits a full interval again.
func (f *framer) write(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	f.timer.Reset(f.quiet)
	return f.writeLocked(b)
}

var errClosed = errors.New("gateway: stream closed")

func (f *framer) writeLocked(b []byte) error {
	if len(b) > 0 {
		// G705 (XSS): the stream is text/event-stream or
		// application/x-ndjson, sent with nosniff, its data JSON from
		// protojson or encoding/json: no browser renders it as HTML.
		if _, err := f.w.Write(b); err != nil { //nolint:gosec // G705: see above
			return err
		}
	}
	return f.rc.Flush()
}

// message sends one response, data its JSON (which protojson writes on
// one line).
func (f *framer) message(id string, data []byte) error {
	line := make([]byte, 0, len(data)+len(id)+16)
	if f.sse {
		line = append(line, "id: "...)
		line = append(line, id...)
		line = append(line, "\ndata: "...)
		line = append(line, data...)
		line = append(line, "\n\n"...)
	} else {
		line = append(line, `{"result":`...)
		line = append(line, data...)
		line = append(line, "}\n"...)
	}
	return f.write(line)
}

func (f *framer) end() {
	if f.sse {
		_ = f.write([]byte("event: end\ndata: {}\n\n"))
	}
}

func (f *framer) problem(p *problem) {
	data, err := json.Marshal(p)
	if err != nil {
		return
	}
	if f.sse {
		_ = f.write(append(append([]byte("event: problem\ndata: "), data...), "\n\n"...))
	} else {
		_ = f.write(append(append([]byte(`{"error":`), data...), "}\n"...))
	}
}

// heartbeat runs on the timer.
func (f *framer) heartbeat() {
	if f.sse {
		_ = f.write([]byte(": heartbeat\n\n"))
	} else {
		_ = f.write([]byte("\n"))
	}
}
