// Package clawhubtest is a fake ClawHub registry for tests: an httptest.Server that serves
// skill details and zip bundles added by the test, plus a zip builder for bundles (including
// malicious ones).
package clawhubtest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
)

// Registry is a fake ClawHub registry. It is safe for concurrent use.
type Registry struct {
	*httptest.Server

	mu     sync.Mutex
	skills map[string]*skill
	// Fail, when non-zero, is the status every request answers.
	fail atomic.Int32
	// Downloads counts download requests.
	Downloads atomic.Int64
}

type skill struct {
	displayName string
	latest      string
	versions    map[string][]byte
}

// NewRegistry starts a registry; Close it when done.
func NewRegistry() *Registry {
	r := &Registry{skills: map[string]*skill{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/skills/{slug}", r.detail)
	mux.HandleFunc("GET /api/v1/download", r.download)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if code := r.fail.Load(); code != 0 {
			http.Error(w, "failing on purpose", int(code))
			return
		}
		mux.ServeHTTP(w, req)
	}))
	return r
}

// Add publishes version of slug with the given bundle; it becomes the latest version.
func (r *Registry) Add(slug, displayName, version string, bundle []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.skills[slug]
	if s == nil {
		s = &skill{versions: map[string][]byte{}}
		r.skills[slug] = s
	}
	s.displayName, s.latest = displayName, version
	s.versions[version] = bundle
}

// FailWith makes every request answer status (0 restores normal answers).
func (r *Registry) FailWith(status int) { r.fail.Store(int32(status)) }

func (r *Registry) detail(w http.ResponseWriter, req *http.Request) {
	slug := req.PathValue("slug")
	r.mu.Lock()
	s := r.skills[slug]
	var body map[string]any
	if s != nil {
		body = map[string]any{
			"skill":         map[string]any{"slug": slug, "displayName": s.displayName},
			"latestVersion": map[string]any{"version": s.latest},
			"owner":         map[string]any{"handle": "test"},
		}
	}
	r.mu.Unlock()
	if body == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"not found"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func (r *Registry) download(w http.ResponseWriter, req *http.Request) {
	r.Downloads.Add(1)
	slug, version := req.URL.Query().Get("slug"), req.URL.Query().Get("version")
	r.mu.Lock()
	var bundle []byte
	if s := r.skills[slug]; s != nil {
		bundle = s.versions[version]
	}
	r.mu.Unlock()
	if bundle == nil {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	_, _ = w.Write(bundle)
}

// Entry is one zip entry for Zip.
type Entry struct {
	Name string
	Body string
	// Mode, when set, is written into the header (fs.ModeSymlink makes a symlink whose
	// target is Body; fs.ModeDir a directory).
	Mode fs.FileMode
}

// Zip builds a zip of entries, in order. Names are written as given (no checks), so
// malicious bundles can be built too.
func Zip(entries ...Entry) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate}
		if e.Mode != 0 {
			h.SetMode(e.Mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			panic(err)
		}
		if e.Body == "" {
			continue
		}
		if _, err := w.Write([]byte(e.Body)); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Files builds a zip from name → content pairs given in order (name, body, name, body...).
func Files(pairs ...string) []byte {
	var entries []Entry
	for i := 0; i+1 < len(pairs); i += 2 {
		entries = append(entries, Entry{Name: pairs[i], Body: pairs[i+1]})
	}
	return Zip(entries...)
}

// SkillMD is a minimal SKILL.md with YAML frontmatter.
func SkillMD(name, description string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\n---\n\n# " + name + "\n\n" + description + "\n"
}
