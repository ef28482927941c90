package relay

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// errPrivateNetwork: the sink would reach an address a tenant must not make
// the server call.
type errPrivateNetwork struct{ addr netip.Addr }

func (e errPrivateNetwork) Error() string {
	return fmt.Sprintf("refused to connect to %s: a loopback, private or link-local address (set allow_private_network on the sink to allow it)", e.addr)
}

// private reports whether a is an address a tenant's sink may not reach
// unless it says so.
func private(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsUnspecified() || a.IsMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a) // carrier-grade NAT
}

// newHTTPClient returns a client for a tenant's endpoint. Without
// allowPrivate it refuses, after DNS resolution and at every dial (so a
// name that resolves to a private address, or a redirect, gains nothing),
// to connect to a private address. Redirects are not followed: the
// endpoint's answer is the redirect itself.
func newHTTPClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: min(timeout, 10*time.Second)}
	if !allowPrivate {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if private(ap.Addr()) {
				return errPrivateNetwork{ap.Addr()}
			}
			return nil
		}
	}
	transport := &http.Transport{
		Proxy:               nil, // a proxy would hide the address checked
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
