// Package pgproxy is a loopback TCP proxy that a test puts between a service
// and its PostgreSQL server to break the connections between them: cut them
// all, refuse new ones, stall or slow all traffic, or act on the one
// connection that carries a named statement at the moment it carries it —
// cut it before the statement runs, cut it after the statement ran but
// before its answer arrives, hold the statement back, or hold its commit.
//
// It understands just enough of the PostgreSQL wire protocol (message
// framing, Parse, Bind, Query, Sync, ReadyForQuery) to know which statement
// a connection executes: sqlc names every query ("-- name: JobClaim :many"),
// and pgx prepares a statement once per connection and then binds it by
// name, so the proxy remembers each connection's prepared statements. It
// needs plaintext connections: it cuts one that negotiates TLS (use
// sslmode=disable, or a server without TLS).
//
// Why not Shopify/toxiproxy, used in-process? Its toxics see one direction of
// one connection as a stream of chunks, with no identity of the connection
// and configuration only through JSON: "cut this connection after the
// server answered the statement it just sent" needs both directions of one
// connection and the protocol's framing, which is most of this package. The
// plain faults (cut all, refuse, stall, latency) are a few lines each here.
package pgproxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from its loopback address to upstream.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	conns   map[*conn]struct{}
	refuse  bool
	stalled chan struct{} // non-nil while stalled; closed on release
	latency time.Duration
	faults  []*Injection
	closed  chan struct{}
	wg      sync.WaitGroup
}

// Start listens on 127.0.0.1 (a free port) and forwards each connection to
// upstream (host:port).
func Start(upstream string) (*Proxy, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: map[*conn]struct{}{}, closed: make(chan struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port; connect to it instead of upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, cuts every connection, ends every stall and waits
// for the proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return
	default:
	}
	close(p.closed)
	p.mu.Unlock()
	_ = p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			_ = client.Close()
			continue
		}
		server, err := p.dial()
		if err != nil {
			_ = client.Close() // upstream down: the client sees its connection closed
			continue
		}
		c := newConn(p, client, server)
		p.mu.Lock()
		select {
		case <-p.closed:
			p.mu.Unlock()
			c.cut()
			return
		default:
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(c.upstream)
		p.wg.Go(c.downstream)
	}
}

// dial connects to upstream; on loopback a refusal is immediate.
func (p *Proxy) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return (&net.Dialer{}).DialContext(ctx, "tcp", p.upstream)
}

// CutAll closes every open connection at once, as a network failure or a
// server-side kill would; it returns how many it cut. New connections are
// still accepted.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.cut()
	}
	return len(conns)
}

// Refuse makes the proxy close every new connection at once (on) or
// forward them again (off): the database is unreachable. Open connections
// are left alone; cut them with CutAll.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Stall holds all traffic, both ways, on every connection, open or new,
// until release is called: a network partition that drops nothing, so the
// connections resume where they were (unless an end gives up first).
func (p *Proxy) Stall() (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
	ch := p.stalled
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.stalled == ch {
				close(ch)
				p.stalled = nil
			}
		})
	}
}

// SetLatency delays every message, both ways, by d after it arrived (0
// turns it off): messages that arrive together leave together, so a round
// trip costs 2d whatever the number of messages in it.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// errClosed ends a wait when the proxy or the connection closes.
var errClosed = errors.New("pgproxy: closed")

// pass waits out a stall and the latency before a message is forwarded.
func (p *Proxy) pass(c *conn, m message) error {
	p.mu.Lock()
	stalled, latency := p.stalled, p.latency
	p.mu.Unlock()
	if stalled != nil {
		select {
		case <-stalled:
		case <-c.done:
			return errClosed
		}
	}
	if wait := latency - time.Since(m.arrived); wait > 0 {
		return c.sleep(wait)
	}
	return nil
}

func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
