package gateway

import (
	"net/http"
	"time"

	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/testsignal"
)

// DefaultWriteTimeout is serve's --http-write-timeout.
const DefaultWriteTimeout = 30 * time.Second

// heldResponse is the writer of every response but a watch's: the bytes
// of each write are drawn from the memory budget until the client has
// taken them, and the response must be written within the write timeout,
// so a client that asks for large pages and does not read them holds
// neither the bytes nor the connection for longer (issue #31, finding 8;
// docs/operations.md, "Memory budget"). The status is held back until the
// first write, so a body the budget cannot hold is answered 429
// MEMORY_BUDGET instead.
type heldResponse struct {
	http.ResponseWriter
	g       *Gateway
	r       *http.Request
	code    int  // the status to send with the first write; 0: 200
	started bool // the status went out
	stream  bool // a watch: written through as it comes, without a deadline
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (w *heldResponse) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *heldResponse) WriteHeader(code int) {
	if w.stream || w.started || code < 200 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.code == 0 {
		w.code = code
	}
}

// Flush sends what was written; a response not started sends its status.
func (w *heldResponse) Flush() {
	w.start()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *heldResponse) Write(p []byte) (int, error) {
	if w.stream {
		return w.ResponseWriter.Write(p)
	}
	n := int64(len(p))
	if err := w.g.cfg.Memory.Acquire("an HTTP response", n); err != nil {
		if !w.started {
			w.started = true // the problem goes out unheld: it is small
			w.Header().Del("Content-Length")
			w.g.writeProblem(w.ResponseWriter, w.r, problemFromStatus(status.Convert(err)))
		}
		return 0, err
	}
	if !w.started {
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.g.cfg.WriteTimeout))
	}
	w.start()
	w.g.signals.ResponseWriting.Signal(n)
	written, err := w.ResponseWriter.Write(p)
	w.g.cfg.Memory.Release(n)
	w.g.signals.ResponseWritten.Signal(err)
	return written, err
}

// start sends the status held back, once.
func (w *heldResponse) start() {
	if w.started || w.stream {
		return
	}
	w.started = true
	if w.code != 0 {
		w.ResponseWriter.WriteHeader(w.code)
	}
}

// streaming exempts a watch's response: its frames are small and it lasts
// as long as its client stays.
func streaming(w http.ResponseWriter) {
	if h, ok := w.(*heldResponse); ok {
		h.start()
		h.stream = true
	}
}

// TestSignals are the moments of a gateway a test can wait for (see
// package testsignal).
type TestSignals struct {
	// ResponseWriting: a response's write of this many bytes, drawn from
	// the budget, starts.
	ResponseWriting testsignal.Signal[int64]
	// ResponseWritten: that write ended (nil: the client took the bytes)
	// and its bytes went back to the budget.
	ResponseWritten testsignal.Signal[error]
}

// TestSignals returns the gateway's test signals.
func (g *Gateway) TestSignals() *TestSignals { return &g.signals }
