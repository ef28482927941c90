package server_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// startTransport serves a server with transport t on loopback.
func startTransport(t *testing.T, tr server.Transport) string {
	t.Helper()
	s, err := server.New(server.Config{Store: storepgtest.NewTestStore(t), Transport: tr})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.GRPC.Serve(lis) }()
	t.Cleanup(s.GRPC.Stop)
	return lis.Addr().String()
}

// h2conn is a raw HTTP/2 connection that speaks frames, so a test can do
// what grpc-go's client refuses to (ping every few milliseconds) and see
// what the server sends (its SETTINGS, GOAWAY).
type h2conn struct {
	t        *testing.T
	conn     net.Conn
	fr       *http2.Framer
	settings map[http2.SettingID]uint32
}

func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = conn.Write([]byte(http2.ClientPreface))
	require.NoError(t, err)
	c := &h2conn{t: t, conn: conn, fr: http2.NewFramer(conn, conn), settings: map[http2.SettingID]uint32{}}
	require.NoError(t, c.fr.WriteSettings())
	// The server's first frame is its SETTINGS.
	f, err := c.fr.ReadFrame()
	require.NoError(t, err)
	sf, ok := f.(*http2.SettingsFrame)
	require.True(t, ok, "first frame %T", f)
	require.NoError(t, sf.ForeachSetting(func(s http2.Setting) error { c.settings[s.ID] = s.Val; return nil }))
	require.NoError(t, c.fr.WriteSettingsAck())
	return c
}

// goAway reads frames until a GOAWAY and returns it.
func (c *h2conn) goAway() *http2.GoAwayFrame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		require.NoError(c.t, err, "the connection ended without GOAWAY")
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g
		}
	}
}

// TestTransportMaxConcurrentStreams: the server announces its stream limit
// in its SETTINGS, so clients queue calls over it; the default is
// DefaultMaxConcurrentStreams.
func TestTransportMaxConcurrentStreams(t *testing.T) {
	t.Parallel()
	c := dialH2(t, startTransport(t, server.Transport{MaxConcurrentStreams: 7}))
	require.Equal(t, uint32(7), c.settings[http2.SettingMaxConcurrentStreams])
	d := dialH2(t, startTransport(t, server.Transport{}))
	require.Equal(t, uint32(server.DefaultMaxConcurrentStreams), d.settings[http2.SettingMaxConcurrentStreams])
}

// TestTransportKeepaliveEnforcement: a client that pings more often than
// KeepaliveMinTime is sent GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and
// disconnected (with the default 10s minimum).
func TestTransportKeepaliveEnforcement(t *testing.T) {
	t.Parallel()
	c := dialH2(t, startTransport(t, server.Transport{}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			if c.fr.WritePing(false, [8]byte{byte(i)}) != nil {
				return // the server closed the connection
			}
		}
	}()
	g := c.goAway()
	<-done
	require.Equal(t, http2.ErrCodeEnhanceYourCalm, g.ErrCode)
	require.Equal(t, "too_many_pings", string(g.DebugData()))
}

// TestTransportMaxConnectionIdle: a connection with no stream for
// MaxConnectionIdle is sent GOAWAY (NO_ERROR), so idle clients do not hold
// server resources forever.
func TestTransportMaxConnectionIdle(t *testing.T) {
	t.Parallel()
	c := dialH2(t, startTransport(t, server.Transport{MaxConnectionIdle: 200 * time.Millisecond}))
	g := c.goAway()
	require.Equal(t, http2.ErrCodeNo, g.ErrCode)
}

// TestTransportMaxConnectionAge: a connection older than MaxConnectionAge
// is sent GOAWAY, so clients reconnect (and spread over the replicas);
// with no call open it then closes.
func TestTransportMaxConnectionAge(t *testing.T) {
	t.Parallel()
	c := dialH2(t, startTransport(t, server.Transport{MaxConnectionAge: 200 * time.Millisecond, MaxConnectionAgeGrace: 100 * time.Millisecond}))
	g := c.goAway()
	require.Equal(t, http2.ErrCodeNo, g.ErrCode)
}
