package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

func TestThePageAndItsAssetsAreServedWithAStrictPolicy(t *testing.T) {
	for path, ctype := range map[string]string{
		"/console":               "text/html",
		"/console/":              "text/html",
		"/console/index.html":    "text/html",
		"/console/app.css":       "text/css",
		"/console/js/app.js":     "text/javascript",
		"/console/js/api.js":     "text/javascript",
		"/console/js/../app.css": "text/css",
	} {
		w := serve(t, path)
		if w.Code != http.StatusOK {
			t.Errorf("%s: status %d", path, w.Code)
			continue
		}
		if got := w.Header().Get("Content-Type"); !strings.HasPrefix(got, ctype) {
			t.Errorf("%s: Content-Type %q, want %s", path, got, ctype)
		}
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
	if body := serve(t, "/console").Body.String(); !strings.Contains(body, `<script type="module" src="/console/js/app.js">`) {
		t.Errorf("the page does not load the app module:\n%s", body)
	}
}

func TestMissingAssetsAndDirectoriesAreNotFound(t *testing.T) {
	for _, path := range []string{"/console/nope.js", "/console/js", "/console/js/", "/console/../go.mod"} {
		if w := serve(t, path); w.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, w.Code)
		}
	}
}

// The console renders API data as text only: no module assigns innerHTML or outerHTML,
// or calls insertAdjacentHTML or document.write.
func TestNoModuleWritesHTML(t *testing.T) {
	entries, err := assets.ReadDir("ui/js")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := assets.ReadFile("ui/js/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s uses %s", e.Name(), bad)
			}
		}
	}
}
