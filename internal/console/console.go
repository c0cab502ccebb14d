// Package console serves the web console: static HTML, CSS and JavaScript modules embedded in
// the binary, mounted by the REST facade at /console. The page is public; every call it makes
// goes to the public REST API with the token the user pasted (kept in the browser's
// sessionStorage only). Nothing here reads or stores anything server-side.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed ui
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console"

// ContentSecurityPolicy is sent with every console response: scripts, styles and connections
// from this origin only, no inline script, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves GET /console (the page) and GET /console/<asset>.
func Handler() http.Handler {
	ui, err := fs.Sub(assets, "ui")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	files := http.FileServerFS(ui)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		name = strings.TrimPrefix(path.Clean("/"+name), "/")
		if name == "" || name == "index.html" {
			// The page itself, at /console and /console/ (no redirect dance).
			page, err := fs.ReadFile(ui, "index.html")
			if err != nil {
				http.Error(w, "console missing", http.StatusInternalServerError)
				return
			}
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(page)
			return
		}
		if st, err := fs.Stat(ui, name); err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
	})
}
