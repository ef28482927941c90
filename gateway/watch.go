package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
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
// (server.EstablishedHeader), and the gateway waits for them before
// answering.

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
	ctx, cancel, p := g.callContext(r, oncejobv1.JobService_WatchJob_FullMethodName)
	if p != nil {
		g.writeProblem(w, r, p)
		return
	}
	defer cancel()
	stream, err := g.client.WatchJob(ctx, req)
	serveStream(g, w, r, ctx, stream, err, func(m *oncejobv1.WatchJobResponse) string {
		return strconv.Itoa(int(m.GetEvent().GetSeq()))
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
	ctx, cancel, p := g.callContext(r, oncejobv1.JobService_WatchJobs_FullMethodName)
	if p != nil {
		g.writeProblem(w, r, p)
		return
	}
	defer cancel()
	stream, err := g.client.WatchJobs(ctx, req)
	serveStream(g, w, r, ctx, stream, err, (*oncejobv1.WatchJobsResponse).GetCursor)
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

// callContext is the outgoing context of a call: the request's headers as
// metadata, exactly as for the generated routes. cancel ends the call.
func (g *Gateway) callContext(r *http.Request, method string) (context.Context, context.CancelFunc, *problem) {
	ctx, err := runtime.AnnotateContext(r.Context(), g.mux, r, method)
	if err != nil {
		return nil, nil, problemFromStatus(status.Convert(err))
	}
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, nil
}

// clientStream is the receiving side of a server-streaming call.
type clientStream[T proto.Message] interface {
	Header() (metadata.MD, error)
	Recv() (T, error)
}

// serveStream answers with the stream's status when it fails before it is
// established, else streams its responses in the format the client
// accepts, until the stream ends, fails, or the client goes away.
func serveStream[T proto.Message](g *Gateway, w http.ResponseWriter, r *http.Request, ctx context.Context, stream clientStream[T], err error, eventID func(T) string) {
	if err != nil {
		g.writeProblem(w, r, problemFromStatus(status.Convert(err)))
		return
	}
	// A watch that failed before it was established (its status comes
	// from Recv) sends no established header.
	if md, _ := stream.Header(); len(md.Get(server.EstablishedHeader)) == 0 {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			err = status.Error(codes.Internal, "the watch ended before it started")
		}
		g.writeProblem(w, r, problemFromStatus(status.Convert(err)))
		return
	}

	f := newFramer(w, r, g.marshaler)
	f.start()
	msgs := make(chan T, 16)
	ended := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				ended <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	heartbeat := time.NewTicker(g.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		var werr error
		select {
		case m := <-msgs:
			werr = f.message(eventID(m), m)
			if werr == nil && len(msgs) == 0 {
				werr = f.flush() // once per burst
			}
		case err := <-ended:
			for len(msgs) > 0 { // what was received before the end
				m := <-msgs
				if werr = f.message(eventID(m), m); werr != nil {
					return
				}
			}
			if errors.Is(err, io.EOF) {
				f.end()
			} else if ctx.Err() == nil {
				p := problemFromStatus(status.Convert(err))
				p.RequestID = w.Header().Get(requestIDHeader)
				f.problem(p)
			}
			_ = f.flush()
			return
		case <-heartbeat.C:
			werr = f.heartbeat()
		case <-ctx.Done():
			return
		}
		if werr != nil {
			return // the client is gone; cancel ends the call
		}
	}
}

// framer writes one stream format.
type framer struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	sse       bool
	marshaler runtime.Marshaler
	line      []byte
}

func newFramer(w http.ResponseWriter, r *http.Request, m runtime.Marshaler) *framer {
	return &framer{w: w, rc: http.NewResponseController(w), sse: acceptsSSE(r), marshaler: m}
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
		_, _ = io.WriteString(f.w, "retry: 1000\n\n")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
		f.w.WriteHeader(http.StatusOK)
	}
	_ = f.flush()
}

func (f *framer) message(id string, m proto.Message) error {
	data, err := f.marshaler.Marshal(m)
	if err != nil {
		return err
	}
	f.line = f.line[:0]
	if f.sse {
		f.line = append(f.line, "id: "...)
		f.line = append(f.line, id...)
		f.line = append(f.line, "\ndata: "...)
		f.line = append(f.line, data...) // protojson writes no newlines
		f.line = append(f.line, "\n\n"...)
	} else {
		f.line = append(f.line, `{"result":`...)
		f.line = append(f.line, data...)
		f.line = append(f.line, "}\n"...)
	}
	_, err = f.w.Write(f.line)
	return err
}

func (f *framer) end() {
	if f.sse {
		_, _ = io.WriteString(f.w, "event: end\ndata: {}\n\n")
	}
}

func (f *framer) problem(p *problem) {
	data, err := json.Marshal(p)
	if err != nil {
		return
	}
	if f.sse {
		_, _ = f.w.Write(append(append([]byte("event: problem\ndata: "), data...), "\n\n"...))
	} else {
		_, _ = f.w.Write(append(append([]byte(`{"error":`), data...), "}\n"...))
	}
}

func (f *framer) heartbeat() error {
	var err error
	if f.sse {
		_, err = io.WriteString(f.w, ": heartbeat\n\n")
	} else {
		_, err = io.WriteString(f.w, "\n")
	}
	if err != nil {
		return err
	}
	return f.flush()
}

func (f *framer) flush() error { return f.rc.Flush() }
