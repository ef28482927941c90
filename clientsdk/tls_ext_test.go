package clientsdk_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/internal/testcert"
)

// TestDialTLSWithClientCertificateAndAPIKey: Dial with a custom CA and a
// client certificate reaches a server that requires both, and sends the API
// key and the user agent.
func TestDialTLSWithClientCertificateAndAPIKey(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "test CA")
	srvPair := ca.Server(t, "127.0.0.1")
	cliPair := ca.Client(t, "client")
	srvCert, err := tls.LoadX509KeyPair(srvPair.CertFile, srvPair.KeyFile)
	require.NoError(t, err)

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	srvTLS := &tls.Config{
		Certificates: []tls.Certificate{srvCert},
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

	cfg, err := clientsdk.TLSConfig(ca.CertFile, cliPair.CertFile, cliPair.KeyFile)
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
	noCert, err := clientsdk.TLSConfig(ca.CertFile, "", "")
	require.NoError(t, err)
	c2, err := clientsdk.Dial(lis.Addr().String(), clientsdk.WithTLS(noCert), clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{MaxAttempts: 1}))
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Get(context.Background(), "j")
	require.Error(t, err)
}
