package pgproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one proxied connection: a goroutine per direction, each reading
// whole protocol messages and forwarding them one by one.
type conn struct {
	p              *Proxy
	client, server net.Conn
	done           chan struct{}
	cutOnce        sync.Once

	// sslAnswers counts SSLRequest/GSSENCRequest messages sent upstream
	// whose one-byte answer has not come back yet: that answer is the only
	// backend message without a header.
	sslAnswers atomic.Int32
	// dropAnswer is set by a CutAfter fault: the downstream side drops
	// everything and cuts the connection at the next ReadyForQuery, i.e.
	// once the statement has run to its end.
	dropAnswer atomic.Pointer[Injection]
}

func newConn(p *Proxy, client, server net.Conn) *conn {
	return &conn{p: p, client: client, server: server, done: make(chan struct{})}
}

// cut closes both sides at once.
func (c *conn) cut() {
	c.cutOnce.Do(func() {
		close(c.done)
		for _, nc := range []net.Conn{c.client, c.server} {
			if tcp, ok := nc.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0) // a reset, as a dropped network gives
			}
			_ = nc.Close()
		}
		c.p.forget(c)
	})
}

// sleep waits d unless the connection is cut first.
func (c *conn) sleep(d time.Duration) error { return c.stall(d, nil) }

// stall waits d unless released is closed (Injection.Release) or the
// connection is cut first.
func (c *conn) stall(d time.Duration, released <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-released:
		return nil
	case <-c.done:
		return errClosed
	}
}

// upstream forwards the client's messages to the server, and acts on the
// faults that match the statements they execute.
func (c *conn) upstream() {
	defer c.cut()
	r := newReader(c.client, true)
	stmts := map[string]string{} // prepared statement name -> SQL
	var holdSync *Injection      // a StallCommit waiting for its Sync
	for {
		m, err := r.next()
		if err != nil {
			return
		}
		switch {
		case m.startup && (m.code == sslRequestCode || m.code == gssEncRequestCode):
			c.sslAnswers.Add(1)
		case m.typ == 'S' && holdSync != nil:
			in := holdSync
			holdSync = nil
			if err := c.stall(in.fault.Duration, in.released); err != nil {
				return
			}
		case m.typ == 'P' || m.typ == 'B' || m.typ == 'Q' || m.typ == 'C':
			sql, executes := statement(m, stmts)
			if !executes {
				break
			}
			in := c.p.match(sql)
			if in == nil {
				break
			}
			switch in.fault.Action {
			case CutBefore:
				in.fire()
				return
			case CutAfter:
				c.dropAnswer.Store(in)
			case StallBefore:
				in.fire()
				if err := c.stall(in.fault.Duration, in.released); err != nil {
					return
				}
			case StallCommit:
				in.fire()
				if m.typ == 'Q' { // a simple query commits at its own end
					if err := c.stall(in.fault.Duration, in.released); err != nil {
						return
					}
				} else {
					holdSync = in
				}
			case Partition:
				in.fire()
				release := c.p.Stall()
				go func() {
					defer release()
					_ = c.stall(in.fault.Duration, in.released)
				}()
			}
		}
		if err := c.p.pass(c, m); err != nil {
			return
		}
		if _, err := c.server.Write(m.bytes); err != nil {
			return
		}
	}
}

// downstream forwards the server's messages to the client, dropping the
// answer a CutAfter fault is waiting for.
func (c *conn) downstream() {
	defer c.cut()
	r := newReader(c.server, false)
	r.pendingSSL = &c.sslAnswers
	for {
		m, err := r.next()
		if err != nil {
			return
		}
		if m.sslAnswer == 'S' || m.sslAnswer == 'G' {
			return // encrypted from here on: the proxy would be blind
		}
		if in := c.dropAnswer.Load(); in != nil {
			if m.typ == 'Z' { // ReadyForQuery: the statement ran to its end
				in.fire()
				return
			}
			continue
		}
		if err := c.p.pass(c, m); err != nil {
			return
		}
		if _, err := c.client.Write(m.bytes); err != nil {
			return
		}
	}
}
