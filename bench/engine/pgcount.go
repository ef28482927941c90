package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// pgCounter is a TCP proxy in front of Postgres that counts messages of the
// frontend/backend protocol (PostgreSQL docs, "Message Flow"), both ways,
// forwarding every byte unchanged. A statement is one CommandComplete ('C')
// or ErrorResponse ('E') from the server: one per statement run, whether
// the client sent it as an Execute of the extended protocol (pgx, batched
// or not) or inside a simple Query of several statements. From the client:
// Query ('Q') and Execute ('E') messages, and round trips: one Sync ('S')
// or one Query. pg_stat_statements would count statements on the server,
// but it must be in shared_preload_libraries, which a shared server cannot
// be restarted for; the protocol gives the same count, and counts River's
// statements the same way as oncejob's. Clients must not use TLS
// (sslmode=disable).
type pgCounter struct {
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	queries  atomic.Int64 // 'Q'
	executes atomic.Int64 // 'E'
	syncs    atomic.Int64 // 'S'
	parses   atomic.Int64 // 'P'
	conns    atomic.Int64
	// From the server: CommandComplete ('C'), one per statement run, a
	// Query of several statements included; ErrorResponse ('E').
	completes atomic.Int64
	errs      atomic.Int64
}

// protoCounts is a snapshot of what the proxy counted.
type protoCounts struct {
	queries, executes, syncs, parses, conns int64
	completes, errs                         int64
}

// statements is every statement the server ran for the clients: one
// CommandComplete each, or an error.
func (c protoCounts) statements() int64 { return c.completes + c.errs }

// requests is what the clients sent to be run: Query and Execute
// messages (a Query may hold several statements).
func (c protoCounts) requests() int64 { return c.queries + c.executes }

// roundTrips is every time a client waited for the server: a Sync ends an
// extended-protocol pipeline, a Query is its own.
func (c protoCounts) roundTrips() int64 { return c.queries + c.syncs }

func startPGCounter(upstream string) (*pgCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &pgCounter{upstream: upstream, ln: ln}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr is where clients connect instead of upstream.
func (p *pgCounter) addr() string { return p.ln.Addr().String() }

func (p *pgCounter) counts() protoCounts {
	return protoCounts{p.queries.Load(), p.executes.Load(), p.syncs.Load(), p.parses.Load(), p.conns.Load(),
		p.completes.Load(), p.errs.Load()}
}

// close stops accepting; connections end when their clients close them.
func (p *pgCounter) close() {
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *pgCounter) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		go p.serve(c)
	}
}

func (p *pgCounter) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer server.Close()
	var answers atomic.Int32 // one-byte answers the server owes (SSL, GSS requests)
	go func() {
		// An error (a stream it cannot read) ends the connection.
		_ = p.backward(bufio.NewReaderSize(server, 64<<10), bufio.NewWriterSize(client, 64<<10), &answers)
		_ = client.Close()
		_ = server.Close()
	}()
	w := bufio.NewWriterSize(server, 64<<10)
	_ = p.forward(bufio.NewReaderSize(client, 64<<10), w, &answers)
}

// backward copies the server's messages to the client, counting
// CommandComplete and ErrorResponse. Before the startup the server answers
// an SSL or GSS encryption request with one untyped byte ('N': go on
// unencrypted); answers says how many such bytes are owed.
func (p *pgCounter) backward(r *bufio.Reader, w *bufio.Writer, answers *atomic.Int32) error {
	var hdr [5]byte
	for {
		t, err := r.ReadByte()
		if err != nil {
			return nil
		}
		if answers.Load() > 0 {
			answers.Add(-1)
			if err := w.WriteByte(t); err != nil {
				return nil
			}
			if err := w.Flush(); err != nil {
				return nil
			}
			if t != 'N' {
				return fmt.Errorf("server accepted encryption (%q): use sslmode=disable", t)
			}
			continue
		}
		hdr[0] = t
		if _, err := io.ReadFull(r, hdr[1:]); err != nil {
			return nil
		}
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		if n < 4 {
			return fmt.Errorf("server message %q of length %d", t, n)
		}
		switch t {
		case 'C':
			p.completes.Add(1)
		case 'E':
			p.errs.Add(1)
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return nil
		}
		if _, err := io.CopyN(w, r, int64(n-4)); err != nil {
			return nil
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return nil
			}
		}
	}
}

// Startup-phase request codes (untyped packets: length, code).
const (
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
	cancelRequestCode = 80877102
)

// forward copies the client's packets to w, counting them: first the
// untyped startup packets (an SSL or GSS encryption request, answered by
// the server with one byte before the real startup message; or a cancel
// request), then typed messages until EOF.
func (p *pgCounter) forward(r *bufio.Reader, w *bufio.Writer, answers *atomic.Int32) error {
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < 8 || n > 1<<20 {
			return fmt.Errorf("startup packet of %d bytes", n)
		}
		code := binary.BigEndian.Uint32(hdr[4:])
		if code == sslRequestCode || code == gssEncRequestCode {
			answers.Add(1) // before the server can answer it
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(w, r, int64(n-8)); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if code == sslRequestCode || code == gssEncRequestCode {
			continue // the server answers 'N' (not supported here), then the startup message follows
		}
		if code == cancelRequestCode {
			return nil
		}
		break
	}
	return p.forwardTyped(r, w)
}

// forwardTyped copies typed messages (one type byte, a length that counts
// itself) and counts them by type.
func (p *pgCounter) forwardTyped(r *bufio.Reader, w *bufio.Writer) error {
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		if n < 4 {
			return fmt.Errorf("message %q of length %d", hdr[0], n)
		}
		switch hdr[0] {
		case 'Q':
			p.queries.Add(1)
		case 'E':
			p.executes.Add(1)
		case 'S':
			p.syncs.Add(1)
		case 'P':
			p.parses.Add(1)
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(w, r, int64(n-4)); err != nil {
			return err
		}
		// A pipeline arrives in one read: send it on in one write.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}
