package pgproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Codes of the startup-phase requests that are answered by one bare byte.
const (
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
)

// maxMessage bounds one message; a bigger length means the stream is not
// what the reader thinks it is.
const maxMessage = 1 << 30

// message is one protocol message, as read, to forward unchanged.
type message struct {
	bytes []byte
	typ   byte // 0 for a startup-phase message
	// startup messages: the request code (protocol version or special code)
	startup bool
	code    uint32
	// sslAnswer is the server's one-byte answer to SSLRequest/GSSENCRequest.
	sslAnswer byte
	body      []byte
	// arrived is when the bytes of the message came off the socket.
	arrived time.Time
}

// reader splits one direction of a connection into messages. The client's
// first messages have no type byte (the startup phase); the server's
// messages always do, except its bare answer to an SSL or GSS request.
type reader struct {
	r          *bufio.Reader
	startup    bool          // client side, before the StartupMessage
	pendingSSL *atomic.Int32 // server side: bare answers expected
	arrived    time.Time     // of the last bytes read from the socket
}

func newReader(r io.Reader, client bool) *reader {
	return &reader{r: bufio.NewReaderSize(r, 32<<10), startup: client}
}

// next returns the next message. Its arrival time is when its first bytes
// were read from the socket, or, for a message already buffered, when the
// read that brought it returned.
func (r *reader) next() (m message, err error) {
	fresh := r.r.Buffered() == 0
	defer func() {
		if fresh {
			r.arrived = time.Now()
		}
		m.arrived = r.arrived
	}()
	if r.pendingSSL != nil && r.pendingSSL.Load() > 0 {
		b, err := r.r.ReadByte()
		if err != nil {
			return message{}, err
		}
		r.pendingSSL.Add(-1)
		return message{bytes: []byte{b}, sslAnswer: b}, nil
	}
	if r.startup {
		head := make([]byte, 8)
		if _, err := io.ReadFull(r.r, head); err != nil {
			return message{}, err
		}
		n := binary.BigEndian.Uint32(head[:4])
		if n < 8 || n > maxMessage {
			return message{}, errors.New("pgproxy: bad startup message length")
		}
		buf := make([]byte, n)
		copy(buf, head)
		if _, err := io.ReadFull(r.r, buf[8:]); err != nil {
			return message{}, err
		}
		code := binary.BigEndian.Uint32(head[4:])
		if code != sslRequestCode && code != gssEncRequestCode {
			r.startup = false // the StartupMessage (or a CancelRequest) ends it
		}
		return message{bytes: buf, startup: true, code: code}, nil
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(r.r, head); err != nil {
		return message{}, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > maxMessage {
		return message{}, errors.New("pgproxy: bad message length")
	}
	buf := make([]byte, 1+n)
	copy(buf, head)
	if _, err := io.ReadFull(r.r, buf[5:]); err != nil {
		return message{}, err
	}
	return message{bytes: buf, typ: head[0], body: buf[5:]}, nil
}

// statement reads a client message for the SQL it executes: Bind executes
// a statement prepared earlier on the connection (kept in stmts by its
// Parse), Query executes its text. Parse and Close only update stmts.
func statement(m message, stmts map[string]string) (sql string, executes bool) {
	switch m.typ {
	case 'P':
		var p pgproto3.Parse
		if p.Decode(m.body) == nil {
			stmts[p.Name] = p.Query
		}
	case 'C':
		var c pgproto3.Close
		if c.Decode(m.body) == nil && c.ObjectType == 'S' {
			delete(stmts, c.Name)
		}
	case 'B':
		var b pgproto3.Bind
		if b.Decode(m.body) == nil {
			return stmts[b.PreparedStatement], true
		}
	case 'Q':
		var q pgproto3.Query
		if q.Decode(m.body) == nil {
			return q.String, true
		}
	}
	return "", false
}
