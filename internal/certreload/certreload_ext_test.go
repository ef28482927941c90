package certreload_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/internal/certreload"
	"github.com/oncejob/oncejob/internal/testcert"
)

// serveTLS accepts connections with cfg and completes their handshakes
// until the test ends.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}()
		}
	}()
	return lis.Addr().String()
}

func dial(addr string, ca *testcert.CA, client *testcert.Pair) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if client != nil {
		cert, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// TLS 1.3: a refused client certificate shows on the first read.
	if _, err := conn.Read(make([]byte, 1)); err != nil && !isEOF(err) {
		return nil, err
	}
	return conn.ConnectionState().PeerCertificates[0], nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// TestRotation: replacing the certificate and key files changes the
// certificate of the next connection, with no restart; a half-written
// rotation (new certificate, old key) keeps the previous pair.
func TestRotation(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "rotation CA")
	first := ca.Server(t, "first")
	dir := t.TempDir()
	certFile, keyFile := dir+"/tls.crt", dir+"/tls.key"
	first.Install(t, certFile, keyFile)

	r, err := certreload.New(certreload.Files{Cert: certFile, Key: keyFile}, nil)
	require.NoError(t, err)
	require.False(t, r.MutualTLS())
	addr := serveTLS(t, r.ServerConfig("http/1.1"))

	got, err := dial(addr, ca, nil)
	require.NoError(t, err)
	require.Equal(t, "first", got.Subject.CommonName)

	second := ca.Server(t, "second")
	// The certificate alone: it does not match the key yet.
	b, err := os.ReadFile(second.CertFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, b, 0o600))
	got, err = dial(addr, ca, nil)
	require.NoError(t, err)
	require.Equal(t, "first", got.Subject.CommonName, "a certificate without its key must not replace the pair")

	second.Install(t, certFile, keyFile)
	got, err = dial(addr, ca, nil)
	require.NoError(t, err)
	require.Equal(t, "second", got.Subject.CommonName)
}

// TestClientCARotation: with a client CA the server requires a client
// certificate of that CA; replacing the CA file changes which clients are
// accepted on the next connection.
func TestClientCARotation(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "server CA")
	srv := ca.Server(t, "server")
	oldClients, newClients := testcert.NewCA(t, "old clients"), testcert.NewCA(t, "new clients")
	oldClient, newClient := oldClients.Client(t, "old"), newClients.Client(t, "new")
	caFile := t.TempDir() + "/clients.pem"
	b, err := os.ReadFile(oldClients.CertFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(caFile, b, 0o600))

	r, err := certreload.New(certreload.Files{Cert: srv.CertFile, Key: srv.KeyFile, ClientCA: caFile}, nil)
	require.NoError(t, err)
	require.True(t, r.MutualTLS())
	addr := serveTLS(t, r.ServerConfig("http/1.1"))

	_, err = dial(addr, ca, nil)
	require.Error(t, err, "no client certificate")
	_, err = dial(addr, ca, &newClient)
	require.Error(t, err, "a client of another CA")
	_, err = dial(addr, ca, &oldClient)
	require.NoError(t, err)

	b, err = os.ReadFile(newClients.CertFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(caFile+".new", b, 0o600))
	require.NoError(t, os.Rename(caFile+".new", caFile))
	_, err = dial(addr, ca, &oldClient)
	require.Error(t, err, "the old CA is no longer trusted")
	_, err = dial(addr, ca, &newClient)
	require.NoError(t, err)
}

// TestNewRefusesBadFiles: a key that does not match, or a CA file with no
// certificate, is refused at start, naming the file.
func TestNewRefusesBadFiles(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "CA")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	_, err := certreload.New(certreload.Files{Cert: a.CertFile, Key: b.KeyFile}, nil)
	require.ErrorContains(t, err, a.CertFile)
	_, err = certreload.New(certreload.Files{Cert: a.CertFile, Key: a.KeyFile, ClientCA: a.KeyFile}, nil)
	require.ErrorContains(t, err, "holds no PEM certificate")
	_, err = certreload.New(certreload.Files{Cert: a.CertFile}, nil)
	require.Error(t, err)
}
