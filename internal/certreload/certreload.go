// Package certreload serves TLS from certificate files that are replaced
// while the server runs: every handshake looks at the files' modification
// times and sizes, and reads them again when they changed, so a rotated
// certificate (or client CA bundle) takes effect on the next connection,
// without a restart. Connections already open keep the certificate they
// were made with.
//
// grpc-go's credentials/tls/certprovider/pemfile does the same on a timer,
// but it is experimental and a rotation would wait for its next tick; a
// stat per handshake is cheap (connections are long-lived, HTTP/2
// multiplexes) and makes rotation take effect at once.
package certreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of a server's TLS.
type Files struct {
	// Cert is the server's certificate chain, leaf first. Required.
	Cert string
	// Key is the certificate's private key. Required.
	Key string
	// ClientCA, when set, is the CA bundle that client certificates must
	// chain to: the server then requires one (mutual TLS).
	ClientCA string
}

// Reloader holds the current certificate and client CA pool, read again
// from Files when they change.
type Reloader struct {
	files  Files
	logger *slog.Logger

	mu     sync.Mutex
	cert   *tls.Certificate
	pool   *x509.CertPool
	stamps [3]stamp // of Cert, Key, ClientCA when last read
	failed [3]stamp // of the last change that did not load, logged once
}

// stamp is what tells that a file changed.
type stamp struct {
	mod  time.Time
	size int64
}

// New reads the files; an error names the file at fault. logger receives a
// line on each reload and each failed one (nil: slog.Default()).
func New(files Files, logger *slog.Logger) (*Reloader, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("TLS needs both a certificate and a key file")
	}
	if logger == nil {
		logger = slog.Default()
	}
	r := &Reloader{files: files, logger: logger}
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	if err := r.load(stamps); err != nil {
		return nil, err
	}
	return r, nil
}

// ServerConfig returns a server TLS configuration (TLS 1.2 or later) that
// offers the ALPN protocols nextProtos ("h2" for gRPC; "h2", "http/1.1" for
// HTTP) and takes the current certificate and client CAs on every
// handshake.
func (r *Reloader) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := r.current()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   nextProtos,
				Certificates: []tls.Certificate{*cert},
			}
			if pool != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = pool
			}
			return c, nil
		},
	}
}

// MutualTLS reports whether client certificates are required.
func (r *Reloader) MutualTLS() bool { return r.files.ClientCA != "" }

// current returns the certificate and pool, read again first when a file
// changed. A change that does not load (a certificate whose key is not yet
// written beside it, a file half copied) keeps the previous ones and is
// tried again on the next handshake.
func (r *Reloader) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamps, err := r.stat()
	if err == nil && stamps == r.stamps {
		return r.cert, r.pool
	}
	if err == nil {
		if err = r.load(stamps); err == nil {
			r.logger.Info("TLS certificate files reloaded", "cert", r.files.Cert, "client_ca", r.files.ClientCA, "not_after", r.cert.Leaf.NotAfter)
		}
	}
	if err != nil && stamps != r.failed {
		r.failed = stamps
		r.logger.Error("TLS certificate files changed but do not load; serving the previous ones", "error", err)
	}
	return r.cert, r.pool
}

func (r *Reloader) stat() ([3]stamp, error) {
	var s [3]stamp
	for i, path := range []string{r.files.Cert, r.files.Key, r.files.ClientCA} {
		if path == "" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			return s, err
		}
		s[i] = stamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return s, nil
}

// load reads the files and, when all of them load, makes them current
// with stamps.
func (r *Reloader) load(stamps [3]stamp) error {
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.files.Cert, r.files.Key, err)
	}
	var pool *x509.CertPool
	if r.files.ClientCA != "" {
		pem, err := os.ReadFile(r.files.ClientCA)
		if err != nil {
			return fmt.Errorf("TLS client CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS client CA %s holds no PEM certificate", r.files.ClientCA)
		}
	}
	r.cert, r.pool, r.stamps = &cert, pool, stamps
	return nil
}
