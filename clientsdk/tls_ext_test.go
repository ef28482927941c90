package clientsdk_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// TestDialTLSWithClientCertificateAndAPIKey: Dial with a custom CA and a
// client certificate reaches a server that requires both, and sends the API
// key and the user agent.
func TestDialTLSWithClientCertificateAndAPIKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "test CA", true)
	srvCert, srvKey := newCert(t, ca, caKey, "127.0.0.1", false)
	cliCert, cliKey := newCert(t, ca, caKey, "client", false)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", cliCert.Raw)
	writeKey(t, filepath.Join(dir, "client.key"), cliKey)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srvTLS := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	type seen struct{ auth, ua, clientCN string }
	got := make(chan seen, 1)
	f := &fakeServer{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(srvTLS)), grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		p, _ := peer.FromContext(ctx)
		cn := p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].Subject.CommonName
		got <- seen{first(md.Get("authorization")), first(md.Get("user-agent")), cn}
		return &oncejobv1.GetJobResponse{Job: &oncejobv1.Job{Id: "j"}}, nil
	}))
	oncejobv1.RegisterJobServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	cfg, err := clientsdk.TLSConfig(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"))
	require.NoError(t, err)
	c, err := clientsdk.Dial(lis.Addr().String(), clientsdk.WithTLS(cfg), clientsdk.WithAPIKey("s3cret"), clientsdk.WithUserAgent("billing/2"))
	require.NoError(t, err)
	defer c.Close()
	job, err := c.Get(context.Background(), "j")
	require.NoError(t, err)
	require.Equal(t, "j", job.GetId())
	s := <-got
	require.Equal(t, "Bearer s3cret", s.auth)
	require.Contains(t, s.ua, "billing/2 oncejob-go")
	require.Equal(t, "client", s.clientCN)

	// Without the client certificate the server refuses the handshake.
	noCert, err := clientsdk.TLSConfig(filepath.Join(dir, "ca.pem"), "", "")
	require.NoError(t, err)
	c2, err := clientsdk.Dial(lis.Addr().String(), clientsdk.WithTLS(noCert), clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{MaxAttempts: 1}))
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Get(context.Background(), "j")
	require.Error(t, err)
}

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         isCA, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

func writeKey(t *testing.T, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	writePEM(t, path, "EC PRIVATE KEY", der)
}
