package console

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"
	"testing"
)

// The charting library is vendored by hack/vendor-uplot.sh from its npm package, checked
// against a pinned integrity: the embedded files are the ones its MANIFEST records (an edit
// by hand, or a half-run vendoring, fails here), and they are served.
func TestVendoredUPlotIsWhatTheScriptVendored(t *testing.T) {
	raw, err := fs.ReadFile(assets, "ui/vendor/uplot/MANIFEST")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if head := strings.Fields(lines[0]); len(head) != 3 || head[0] != "uplot" || !strings.HasPrefix(head[2], "sha512-") {
		t.Fatalf("MANIFEST's first line names the package, its version and integrity: %q", lines[0])
	}
	if len(lines) != 4 {
		t.Fatalf("MANIFEST lists %d files, want 3", len(lines)-1)
	}
	for _, l := range lines[1:] {
		sum, name, ok := strings.Cut(l, "  ")
		if !ok {
			t.Fatalf("MANIFEST line %q", l)
		}
		b, err := fs.ReadFile(assets, "ui/vendor/uplot/"+name)
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s differs from what hack/vendor-uplot.sh vendored: re-run it", name)
		}
	}
	for path, ctype := range map[string]string{
		"/console/vendor/uplot/uPlot.esm.js":  "text/javascript",
		"/console/vendor/uplot/uPlot.min.css": "text/css",
		"/console/js/fleet.js":                "text/javascript",
		"/console/fleet.css":                  "text/css",
	} {
		w := serve(t, path)
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q", path, w.Code, w.Header().Get("Content-Type"))
		}
	}
}
