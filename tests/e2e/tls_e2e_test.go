package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/internal/testcert"
)

// tlsServer is a serve process with TLS on gRPC and HTTP, its settings
// from a config file (tls: cert:, key:, client-ca:), its certificate files
// in a directory of their own so a test can rotate them in place.
type tlsServer struct {
	addr, httpAddr            string
	certFile, keyFile, caFile string // the server's; caFile: the client CA, if any
}

// client is what a client presents: the CA it trusts and, for mutual TLS,
// its certificate.
type client struct {
	ca        string // PEM file; empty: the system's roots
	cert, key string // empty: none
	plaintext bool
	name      string
}

func startTLSServer(t *testing.T, srv testcert.Pair, clientCA *testcert.CA) *tlsServer {
	t.Helper()
	dir := t.TempDir()
	s := &tlsServer{addr: freeAddr(t), httpAddr: freeAddr(t), certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	srv.Install(t, s.certFile, s.keyFile)
	cfg := fmt.Sprintf("grpc-addr: %s\ntls:\n  cert: %s\n  key: %s\n", s.addr, s.certFile, s.keyFile)
	if clientCA != nil {
		s.caFile = filepath.Join(dir, "client-ca.pem")
		copyFile(t, clientCA.CertFile, s.caFile)
		cfg += "  client-ca: " + s.caFile + "\n"
	}
	// --http-addr on the command line: start() sets ONCEJOB_HTTP_ADDR,
	// which would win over the file.
	p := start(t, "serve-tls", nil, "serve", "--data-dir", t.TempDir(), "--config", writeFile(t, "oncejob.yaml", cfg), "--http-addr", s.httpAddr)
	t.Cleanup(p.stop)
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to+".new", b, 0o600))
	require.NoError(t, os.Rename(to+".new", to))
}

func (c client) tlsConfig(t *testing.T) *tls.Config {
	t.Helper()
	cfg, err := clientsdk.TLSConfig(c.ca, c.cert, c.key)
	require.NoError(t, err)
	return cfg
}

// waitTLSHealthy waits until the server answers health checks to c.
func waitTLSHealthy(t *testing.T, s *tlsServer, c client) {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(c.tlsConfig(t))))
	require.NoError(t, err)
	defer conn.Close()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}, 30*time.Second, 50*time.Millisecond, "the TLS server never became healthy")
}

// viaGrpcurl submits a job with grpcurl; it returns its output and whether
// it succeeded.
func viaGrpcurl(t *testing.T, s *tlsServer, c client, key string) (string, bool) {
	t.Helper()
	args := []string{"-max-time", "10"}
	switch {
	case c.plaintext:
		args = append(args, "-plaintext")
	case c.ca != "":
		args = append(args, "-cacert", c.ca)
	}
	if c.cert != "" {
		args = append(args, "-cert", c.cert, "-key", c.key)
	}
	args = append(args, "-H", "idempotency-key: "+key,
		"-d", `{"pipeline": "summarize", "document": {"text": "over TLS"}}`, s.addr, "oncejob.v1.JobService/SubmitJob")
	out, err := exec.Command(filepath.Join(binDir, "grpcurl"), args...).CombinedOutput()
	return string(out), err == nil && strings.Contains(string(out), `"id"`)
}

// viaGoSDK submits a job with the Go SDK, one attempt.
func viaGoSDK(t *testing.T, s *tlsServer, c client, key string) (string, bool) {
	t.Helper()
	opts := []clientsdk.Option{clientsdk.WithTimeout(10 * time.Second), clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{MaxAttempts: 1})}
	if !c.plaintext {
		opts = append(opts, clientsdk.WithTLS(c.tlsConfig(t)))
	}
	cl, err := clientsdk.Dial(s.addr, opts...)
	require.NoError(t, err)
	defer cl.Close()
	res, err := cl.Submit(context.Background(), &clientsdk.SubmitRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "over TLS"}}}, clientsdk.WithIdempotencyKey(key))
	if err != nil {
		return err.Error(), false
	}
	return res.Job.GetId(), res.Job.GetId() != ""
}

// pythonSubmit is the Python SDK's side: a submit with the credentials
// named by its arguments; it prints OK <job id> or ERR <error>.
const pythonSubmit = `
import sys
sys.path.insert(0, sys.argv[1])
import oncejob
addr, key, mode, ca, cert, pkey = sys.argv[2:8]
read = lambda p: open(p, "rb").read() if p else None
kw = {}
if mode == "tls":
    kw = dict(tls=True, root_certificates=read(ca), certificate_chain=read(cert), private_key=read(pkey))
try:
    with oncejob.Client(addr, timeout=10, retry=oncejob.RetryPolicy(max_attempts=1), **kw) as c:
        r = c.submit("summarize", "over TLS", key=key)
        print("OK", r.job.id)
except Exception as e:
    print("ERR", type(e).__name__, e)
`

// viaPython submits a job with the Python SDK (Debian's python3).
func viaPython(t *testing.T, s *tlsServer, c client, key string) (string, bool) {
	t.Helper()
	sdk, err := filepath.Abs("../../clientsdk/python")
	require.NoError(t, err)
	mode := "tls"
	if c.plaintext {
		mode = "plaintext"
	}
	cmd := exec.Command(python, "-c", pythonSubmit, sdk, s.addr, key, mode, c.ca, c.cert, c.key)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out), strings.HasPrefix(string(out), "OK ")
}

// viaCurl asks the HTTP face for the server's readiness and a job list.
func viaCurl(t *testing.T, s *tlsServer, c client, _ string) (string, bool) {
	t.Helper()
	scheme := "https"
	if c.plaintext {
		scheme = "http"
	}
	args := []string{"--silent", "--show-error", "--fail", "--max-time", "10"}
	if c.ca != "" {
		args = append(args, "--cacert", c.ca)
	}
	if c.cert != "" {
		args = append(args, "--cert", c.cert, "--key", c.key)
	}
	out, err := exec.Command("curl", append(args, scheme+"://"+s.httpAddr+"/v1/jobs")...).CombinedOutput()
	return string(out), err == nil && strings.Contains(string(out), `"jobs"`)
}

// viaCLI submits a job with the oncejob CLI, its connection settings in
// the environment (ONCEJOB_CA_FILE, ...) as an operator's shell would hold
// them.
func viaCLI(t *testing.T, s *tlsServer, c client, key string) (string, bool) {
	t.Helper()
	env := []string{"ONCEJOB_ADDR=" + s.addr}
	if !c.plaintext {
		env = append(env, "ONCEJOB_TLS=true", "ONCEJOB_CA_FILE="+c.ca, "ONCEJOB_CERT_FILE="+c.cert, "ONCEJOB_KEY_FILE="+c.key)
	}
	cmd := exec.Command(filepath.Join(binDir, "oncejob"), "submit", writeFile(t, "doc.txt", "over TLS"), "--key", key, "--json", "--timeout", "15s")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil && strings.Contains(string(out), `"id"`)
}

type via func(t *testing.T, s *tlsServer, c client, key string) (string, bool)

var clients = []struct {
	name string
	do   via
}{
	{"grpcurl", viaGrpcurl}, {"go-sdk", viaGoSDK}, {"python-sdk", viaPython}, {"curl", viaCurl}, {"cli", viaCLI},
}

// expect runs every client with c and requires each to connect (ok) or be
// refused.
func expect(t *testing.T, s *tlsServer, c client, ok bool) {
	t.Helper()
	for i, cl := range clients {
		out, got := cl.do(t, s, c, fmt.Sprintf("tls-%s-%s-%d-%d", c.name, cl.name, i, time.Now().UnixNano()))
		if ok {
			require.True(t, got, "%s with %s must connect: %s", cl.name, c.name, out)
		} else {
			require.False(t, got, "%s with %s must be refused: %s", cl.name, c.name, out)
			t.Logf("%s with %s refused: %s", cl.name, c.name, strings.TrimSpace(tail(out, 300)))
		}
	}
}

func requireTLSTools(t *testing.T) {
	t.Helper()
	requirePython(t)
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is required under CI=true (apt-get install -y curl)")
		}
		t.Skip("SKIP: curl not found; install it with: apt-get install -y curl")
	}
}

// TestTLS: serve with --tls-cert and --tls-key (from the config file):
// grpcurl, the Go SDK, the Python SDK, curl and the CLI connect when they trust the
// server's CA, and are refused in plaintext and when they trust only the
// system's roots. Then the certificate files are replaced by ones of
// another CA, and the next connections present the new certificate, with
// no restart: clients trusting the old CA are refused, those trusting the
// new one connect, while a connection made before goes on.
func TestTLS(t *testing.T) {
	t.Parallel()
	requireTLSTools(t)
	ca := testcert.NewCA(t, "oncejob test CA")
	s := startTLSServer(t, ca.Server(t, "oncejob"), nil)
	trusting := client{name: "the server's CA", ca: ca.CertFile}
	waitTLSHealthy(t, s, trusting)

	expect(t, s, trusting, true)
	expect(t, s, client{name: "plaintext", plaintext: true}, false)
	expect(t, s, client{name: "the system's roots"}, false)

	// A connection open before the rotation keeps the certificate it was
	// made with.
	open, err := clientsdk.Dial(s.addr, clientsdk.WithTLS(trusting.tlsConfig(t)), clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{MaxAttempts: 1}))
	require.NoError(t, err)
	defer open.Close()
	_, err = open.Get(context.Background(), "00000000-0000-4000-8000-000000000000")
	require.ErrorContains(t, err, "NotFound")

	rotated := testcert.NewCA(t, "oncejob rotated CA")
	rotated.Server(t, "oncejob-rotated").Install(t, s.certFile, s.keyFile)
	expect(t, s, client{name: "the rotated CA", ca: rotated.CertFile}, true)
	expect(t, s, client{name: "the old CA after rotation", ca: ca.CertFile}, false)
	_, err = open.Get(context.Background(), "00000000-0000-4000-8000-000000000000")
	require.ErrorContains(t, err, "NotFound", "the connection made before the rotation still works")
}

// TestMutualTLS: with --tls-client-ca the server requires a client
// certificate of that CA on gRPC and HTTP: each client connects with one,
// and is refused without one and with one of another CA. Replacing the
// client CA file changes which clients get in, with no restart.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	requireTLSTools(t)
	ca := testcert.NewCA(t, "oncejob test CA")
	clientsCA, otherCA := testcert.NewCA(t, "oncejob clients"), testcert.NewCA(t, "other clients")
	s := startTLSServer(t, ca.Server(t, "oncejob"), clientsCA)
	member, stranger := clientsCA.Client(t, "billing"), otherCA.Client(t, "stranger")
	withCert := client{name: "a client certificate", ca: ca.CertFile, cert: member.CertFile, key: member.KeyFile}
	waitTLSHealthy(t, s, withCert)

	expect(t, s, withCert, true)
	expect(t, s, client{name: "no client certificate", ca: ca.CertFile}, false)
	expect(t, s, client{name: "a certificate of another CA", ca: ca.CertFile, cert: stranger.CertFile, key: stranger.KeyFile}, false)
	expect(t, s, client{name: "plaintext", plaintext: true}, false)

	copyFile(t, otherCA.CertFile, s.caFile)
	strangerNow := client{name: "the other CA's client after rotation", ca: ca.CertFile, cert: stranger.CertFile, key: stranger.KeyFile}
	expect(t, s, strangerNow, true)
	expect(t, s, client{name: "the old CA's client after rotation", ca: ca.CertFile, cert: member.CertFile, key: member.KeyFile}, false)
}

// TestServeConnectionLimitsFromConfig: the gRPC limits set in the config
// file reach the server: its HTTP/2 SETTINGS announce the stream limit,
// and a client pinging more often than the keepalive minimum is sent
// GOAWAY ENHANCE_YOUR_CALM.
func TestServeConnectionLimitsFromConfig(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	cfg := writeFile(t, "oncejob.yaml", "grpc:\n  addr: "+addr+"\n  max-concurrent-streams: 7\n  keepalive:\n    min-time: 1m\n")
	p := start(t, "serve-limits", nil, "serve", "--data-dir", t.TempDir(), "--config", cfg)
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)

	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = conn.Write([]byte(http2.ClientPreface))
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	require.NoError(t, fr.WriteSettings())
	f, err := fr.ReadFrame()
	require.NoError(t, err)
	settings, ok := f.(*http2.SettingsFrame)
	require.True(t, ok, "first frame %T", f)
	streams, ok := settings.Value(http2.SettingMaxConcurrentStreams)
	require.True(t, ok)
	require.Equal(t, uint32(7), streams)
	require.NoError(t, fr.WriteSettingsAck())
	go func() {
		for i := range 10 {
			if fr.WritePing(false, [8]byte{byte(i)}) != nil {
				return
			}
		}
	}()
	for {
		f, err := fr.ReadFrame()
		require.NoError(t, err, "the connection ended without GOAWAY")
		if g, ok := f.(*http2.GoAwayFrame); ok {
			require.Equal(t, http2.ErrCodeEnhanceYourCalm, g.ErrCode)
			require.Equal(t, "too_many_pings", string(g.DebugData()))
			return
		}
	}
}
