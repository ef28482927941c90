package gateway

import (
	"net"
	"net/http"
	"strings"
)

// LocalHostsOnly refuses requests whose Host is a name other than
// localhost: for a server with no API keys (dev mode). Without it, a page on
// any site could make the browser resolve that site's name to 127.0.0.1
// (DNS rebinding) and use the API as its own origin. An IP address or
// localhost, with any port, passes.
func LocalHostsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hst, _, err := net.SplitHostPort(host); err == nil {
			host = hst
		}
		host = strings.Trim(host, "[]")
		if net.ParseIP(host) == nil && !strings.EqualFold(host, "localhost") {
			http.Error(w, "this server has no API keys (dev mode) and answers only requests to an IP address or localhost", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}
