package clientsdk

import (
	"fmt"
	"net/url"
	"strings"
)

// trackingParams are query parameters that say how a visitor arrived, not
// which page they asked for. Names starting with "utm_" are dropped too.
var trackingParams = map[string]bool{
	"gclid": true, "dclid": true, "gbraid": true, "wbraid": true,
	"fbclid": true, "msclkid": true, "yclid": true, "igshid": true,
	"mc_cid": true, "mc_eid": true, "_hsenc": true, "_hsmi": true,
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// NormalizeURL returns one spelling of an absolute URL, so that the same
// page is one intent (one WorkID) however a crawler found it:
//
//   - the scheme and host are lower-cased; a default port (80 for http, 443
//     for https) is dropped; an empty path becomes "/";
//   - the fragment is dropped (it never reaches the server);
//   - tracking parameters are removed: every name starting with "utm_", and
//     gclid, dclid, gbraid, wbraid, fbclid, msclkid, yclid, igshid, mc_cid,
//     mc_eid, _hsenc, _hsmi;
//   - the query is sorted by parameter name (the values of one name keep
//     their order, which may matter to the page) and re-encoded.
//
// The path and user info are kept as they are: their case and encoding can
// name different pages. It fails on a URL without a scheme or host.
func NormalizeURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("oncejob: NormalizeURL: %w", err)
	}
	if u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("oncejob: NormalizeURL: %q is not an absolute URL", raw)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if port := u.Port(); port != "" && defaultPorts[u.Scheme] == port {
		u.Host = u.Hostname()
		if strings.Contains(u.Host, ":") { // an IPv6 literal keeps its brackets
			u.Host = "[" + u.Host + "]"
		}
	} else if port == "" && strings.HasSuffix(u.Host, ":") {
		u.Host = strings.TrimSuffix(u.Host, ":") // "host:" has an empty port
	}
	if u.Path == "" && u.Opaque == "" {
		u.Path = "/"
	}
	u.Fragment, u.RawFragment = "", ""
	q := u.Query()
	for name := range q {
		if strings.HasPrefix(strings.ToLower(name), "utm_") || trackingParams[strings.ToLower(name)] {
			q.Del(name)
		}
	}
	u.RawQuery = q.Encode() // sorted by name
	u.ForceQuery = false
	return u.String(), nil
}
