package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// CORS lets pages of other origins call the API from a browser (the
// Connect, gRPC-web and JSON routes), and only the origins configured
// (serve --cors-allowed-origins): off by default. docs/operations.md,
// "Browsers on other origins".
//
// A request whose Origin is neither allowed nor the server's own is
// refused with 403 before it reaches a handler, preflight or not: a page
// of another site gets no answer to read and no call made in its name (a
// "simple" cross-origin POST would otherwise run, unread). Requests without
// an Origin (curl, gRPC and SDK clients) pass as they are. An allowed
// origin gets its own name back in Access-Control-Allow-Origin (never "*")
// and no Access-Control-Allow-Credentials: the API authenticates with the
// Authorization header a page sets itself, never with cookies, so a
// browser sends no ambient credential anywhere.
type CORS struct {
	allowed map[string]bool
}

// corsMaxAge is how long a browser may keep a preflight's answer.
const corsMaxAge = 2 * 3600

// corsAllowHeaders are the request headers a page may set: Connect's and
// gRPC-web's (connectrpc.com/cors), and the API's own (headers.go).
var corsAllowHeaders = []string{
	"Authorization", "Content-Type", "Idempotency-Key", "X-Request-Id", "Traceparent", "Tracestate", "Last-Event-ID",
	"Connect-Protocol-Version", "Connect-Timeout-Ms", "Connect-Accept-Encoding", "Connect-Content-Encoding",
	"Grpc-Timeout", "Grpc-Accept-Encoding", "Grpc-Encoding", "X-Grpc-Web", "X-User-Agent",
}

// corsExposeHeaders are the response headers a page may read: the gRPC
// status of a gRPC-web answer with no body, Connect's encodings, and the
// API's own.
var corsExposeHeaders = []string{
	"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Grpc-Encoding", "Grpc-Accept-Encoding",
	"Connect-Content-Encoding", "Connect-Accept-Encoding",
	"Idempotent-Replayed", "X-Request-Id", "Retry-After", "Content-Encoding",
}

var corsAllowMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// NewCORS returns the policy for origins, each scheme://host[:port] with
// scheme http or https and nothing after the host (a trailing "/" is
// allowed). None: no other origin is allowed.
func NewCORS(origins []string) (*CORS, error) {
	c := &CORS{allowed: map[string]bool{}}
	for _, o := range origins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		canon, err := canonicalOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("CORS origin %q: %w", o, err)
		}
		c.allowed[canon] = true
	}
	return c, nil
}

// canonicalOrigin is o as a browser writes it in an Origin header: lower
// case, no default port, no path, and an internationalized host name in
// its ASCII form (UTS #46, as the URL Standard's "domain to ASCII": a page
// of https://bücher.example sends Origin https://xn--bcher-kva.example).
func canonicalOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("want http://host[:port] or https://host[:port]")
	}
	if u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("want scheme://host[:port] and nothing else")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if !isASCII(host) {
		if host, err = idna.Lookup.ToASCII(host); err != nil {
			return "", fmt.Errorf("host: %w", err)
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("invalid port %q", port)
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = ""
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Enabled says whether any origin is allowed.
func (c *CORS) Enabled() bool { return len(c.allowed) > 0 }

// Wrap applies the policy in front of h.
func (c *CORS) Wrap(h http.Handler) http.Handler {
	allowHeaders := strings.Join(corsAllowHeaders, ", ")
	exposeHeaders := strings.Join(corsExposeHeaders, ", ")
	allowedHeader := map[string]bool{}
	for _, name := range corsAllowHeaders {
		allowedHeader[strings.ToLower(name)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		w.Header().Add("Vary", "Origin")
		if origin == "" {
			h.ServeHTTP(w, r)
			return
		}
		allowed := c.allowed[origin]
		if !allowed && !sameOrigin(origin, r.Host) {
			http.Error(w, "origin "+origin+" is not allowed (serve --cors-allowed-origins)", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Add("Vary", "Access-Control-Request-Method")
			w.Header().Add("Vary", "Access-Control-Request-Headers")
			if !allowed || !preflightAllowed(r, allowedHeader) {
				http.Error(w, "CORS preflight refused", http.StatusForbidden)
				return
			}
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Methods", r.Header.Get("Access-Control-Request-Method"))
			w.Header().Set("Access-Control-Allow-Headers", allowHeaders)
			w.Header().Set("Access-Control-Max-Age", strconv.Itoa(corsMaxAge))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Expose-Headers", exposeHeaders)
		}
		h.ServeHTTP(w, r)
	})
}

// preflightAllowed says whether the method and every header a preflight
// asks for are allowed.
func preflightAllowed(r *http.Request, allowedHeader map[string]bool) bool {
	if !corsAllowMethods[r.Header.Get("Access-Control-Request-Method")] {
		return false
	}
	for _, line := range r.Header.Values("Access-Control-Request-Headers") {
		for name := range strings.SplitSeq(line, ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !allowedHeader[name] {
				return false
			}
		}
	}
	return true
}

// sameOrigin says whether origin names the host the request was sent to
// (the console's own calls): the scheme is not compared, which a proxy
// that ends TLS would hide.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host) || strings.EqualFold(canonicalHostPort(u), host)
}

// canonicalHostPort is u's host with its scheme's default port written
// out, which a Host header may carry.
func canonicalHostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return u.Host + ":80"
	case "https":
		return u.Host + ":443"
	}
	return u.Host
}
