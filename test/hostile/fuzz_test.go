package hostile

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	opsOnce sync.Once
	allOps  []operation
)

// operations are the document's operations, loaded once per process.
func operations(tb testing.TB) []operation {
	opsOnce.Do(func() { allOps = loadOperations(tb) })
	if len(allOps) == 0 {
		tb.Fatal("no operations")
	}
	return allOps
}

// FuzzRoutes sends one request to the facade in process (its http.Handler, on the same
// platform as TestHostileInput) and checks the answer like TestHostileInput does. The inputs:
// the operation (index into loadOperations' order, modulo), junk for one path parameter (which
// one: len(junk) modulo their number; the others are real IDs; used as written when it is a
// valid escaped segment, escaped otherwise; empty: all real) and the body, sent with a valid
// token as JSON (multipart with boundary "hostile" for POST /v3/files).
//
// Two guards keep the fixture usable and the host safe: DELETEs never name a real object, and
// console exec never runs on a real agent (the body is still decoded and checked; only the
// fuzzed shell command is not run).
//
//	go test ./test/hostile -run '^$' -fuzz FuzzRoutes -fuzztime 5m -parallel 1
//
// Each fuzzing process starts its own control plane (about 10 s and 400 MB).
func FuzzRoutes(f *testing.F) {
	f.Add(uint8(0), "", []byte(`{}`))
	f.Fuzz(func(t *testing.T, opIndex uint8, junk string, body []byte) {
		fix := platformFixture(t)
		ops := operations(t)
		op := ops[int(opIndex)%len(ops)]
		segs := map[string]string{}
		if n := len(op.Params); n > 0 {
			p, guarded := op.Params[len(junk)%n], false
			switch {
			case op.Method == "DELETE":
				p, guarded = op.Params[n-1], true
			case op.Path == "/v0/agents/{agentId}/console/exec":
				p, guarded = "agentId", true
			}
			seg := escapeJunk(junk)
			if value, _ := url.PathUnescape(seg); guarded && (junk == "" || value == fix.ids[p]) {
				seg = "hostile-none"
			}
			if seg != "" {
				segs[p] = seg
			}
		}
		target := urlPath(op, fix, segs)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, op.Method, "http://hostile.test"+target, bytes.NewReader(body))
		if err != nil || req.URL.Host != "hostile.test" {
			return // not a request a client could send
		}
		req.RequestURI, req.RemoteAddr = target, "192.0.2.1:4242"
		req.Header.Set("Authorization", "Bearer "+fix.token)
		req.Header.Set("Content-Type", jsonType)
		if op.Multipart {
			req.Header.Set("Content-Type", "multipart/form-data; boundary=hostile")
		}
		rec := httptest.NewRecorder()
		fix.handler.ServeHTTP(rec, req)
		ans := answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		if err := checkAnswer(op, ans); err != nil {
			t.Fatalf("%s %s with body %.200q: %v", op.Method, target, body, err)
		}
	})
}

// escapeJunk is junk as a path segment: as written when it is a valid escaped segment of
// printable ASCII, escaped otherwise.
func escapeJunk(junk string) string {
	if _, err := url.PathUnescape(junk); err == nil && !strings.ContainsAny(junk, "/?#") && printable(junk) {
		return junk
	}
	return url.PathEscape(junk)
}

// printable reports whether s is printable ASCII without spaces.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
