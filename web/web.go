// Package web is oncejob's operator console: static HTML, CSS and
// JavaScript (no build step) embedded in the binary and served at / of the
// HTTP address, beside the API it calls (/v1/...). The console only uses
// the public HTTP API, with the caller's API key, so it can do nothing an
// API client cannot.
//
// Security: a Content-Security-Policy that allows only this origin's
// scripts (no inline script, no eval), styles and API calls; output is
// built with DOM text nodes, never HTML strings, so a job's document name
// or output cannot inject markup; the API key, outside dev mode, is kept
// in the tab's sessionStorage and sent as a bearer token, never in a URL
// or a cookie.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy forbids inline scripts and styles, eval, plugins,
// framing and any origin but this one.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console: index.html at /, its assets under
// /assets/. Any other path is 404.
func Handler() http.Handler {
	assets, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache") // revalidate: a new binary may bring new assets
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch {
		case r.URL.Path == "/":
			http.ServeFileFS(w, r, assets, "index.html")
		case strings.HasPrefix(r.URL.Path, "/assets/") && path.Clean(r.URL.Path) == r.URL.Path:
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/assets")
			files.ServeHTTP(w, r2)
		default:
			http.NotFound(w, r)
		}
	})
}
