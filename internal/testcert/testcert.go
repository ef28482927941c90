// Package testcert makes certificates for tests: a CA, and server and
// client certificates it signs, written as PEM files in a test's temporary
// directory. Nothing it makes is ever committed.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate as a PEM file.
	CertFile string
}

// Pair is a certificate and its key, as PEM files.
type Pair struct {
	Cert     *x509.Certificate
	CertFile string
	KeyFile  string
}

// NewCA makes a CA named cn and writes its certificate to a file.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(cn)
	tmpl.IsCA = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	ca := &CA{Cert: cert, key: key, CertFile: filepath.Join(t.TempDir(), "ca.pem")}
	writePEM(t, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(t testing.TB, cn string) Pair {
	t.Helper()
	tmpl := template(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	tmpl.DNSNames = []string{"localhost"}
	return ca.issue(t, tmpl)
}

// Client issues a client certificate whose common name is cn.
func (ca *CA) Client(t testing.TB, cn string) Pair {
	t.Helper()
	tmpl := template(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(t, tmpl)
}

func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) Pair {
	t.Helper()
	key := newKey(t)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	dir := t.TempDir()
	p := Pair{Cert: cert, CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	writePEM(t, p.KeyFile, "PRIVATE KEY", keyDER)
	return p
}

// Install copies p's files over certFile and keyFile, each written beside
// its target and renamed over it, as a certificate manager rotates them.
func (p Pair) Install(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for _, f := range [][2]string{{p.CertFile, certFile}, {p.KeyFile, keyFile}} {
		b, err := os.ReadFile(f[0])
		must(t, err)
		tmp := f[1] + ".new"
		must(t, os.WriteFile(tmp, b, 0o600)) //nolint:gosec // G703: the test names its own temporary files
		must(t, os.Rename(tmp, f[1]))
	}
}

func template(cn string) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		BasicConstraintsValid: true,
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
