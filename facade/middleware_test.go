package facade

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newBareServer(t *testing.T) (*Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s := New(Options{Log: logr.Discard(), Registry: reg, MaxBodyBytes: 64})
	return s, reg
}

func TestEveryResponseCarriesTheContractHeaders(t *testing.T) {
	s, _ := newBareServer(t)
	for _, path := range []string{"/healthz", "/v0/does-not-exist", "/v3/files/public/x/y/z"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		h := rec.Result().Header
		if got := h.Get("Strict-Transport-Security"); got != "max-age=31536000; includeSubDomains" {
			t.Errorf("%s: HSTS = %q", path, got)
		}
		if h.Get("X-Request-Id") == "" {
			t.Errorf("%s: no X-Request-Id", path)
		}
		if got := h.Get("Content-Type"); got != "application/json; charset=utf-8" {
			t.Errorf("%s: Content-Type = %q", path, got)
		}
		if got := h.Get("Content-Length"); got != strconv.Itoa(rec.Body.Len()) {
			t.Errorf("%s: Content-Length = %q, body is %d bytes", path, got, rec.Body.Len())
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Errorf("%s: body is not JSON: %q", path, rec.Body.String())
		}
	}
}

func TestRequestIDIsEchoedWhenWellFormed(t *testing.T) {
	s, _ := newBareServer(t)
	cases := map[string]bool{"abc-123": true, "req.1:x_y": true, "has space": false, strings.Repeat("a", 129): false, "<script>": false}
	for id, echoed := range cases {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.Header.Set("X-Request-Id", id)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		got := rec.Header().Get("X-Request-Id")
		if echoed && got != id {
			t.Errorf("id %q: got %q, want it echoed", id, got)
		}
		if !echoed && (got == id || got == "") {
			t.Errorf("id %q: got %q, want a fresh id", id, got)
		}
	}
}

func TestUnmatchedRoutesAnswerInTheirFamilysEnvelope(t *testing.T) {
	s, _ := newBareServer(t)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v0/nothing", nil))
	if rec.Code != 404 || strings.TrimSpace(rec.Body.String()) != `{"error":"Not found"}` {
		t.Errorf("v0: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v3/nothing", nil))
	if rec.Code != 404 || strings.TrimSpace(rec.Body.String()) != `{"error":{"code":404,"message":"Not found"}}` {
		t.Errorf("v3: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/healthz", nil))
	if rec.Code != 405 || rec.Header().Get("Allow") == "" {
		t.Errorf("405: %d allow=%q", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestAPanicBecomesAJSON500AndTheServerKeepsServing(t *testing.T) {
	s, reg := newBareServer(t)
	s.handle("GET /v0/boom", access{public: true}, func(*http.Request, *Caller) (*Response, error) {
		panic("handler bug")
	})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v0/boom", nil))
	if rec.Code != 500 || strings.TrimSpace(rec.Body.String()) != `{"error":"Internal server error"}` {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
	if rec.Header().Get("X-Request-Id") == "" {
		t.Error("a 500 after a panic must still carry X-Request-Id")
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("server did not keep serving: %d", rec.Code)
	}
	if n := testutil.ToFloat64(s.metrics.requests.WithLabelValues("GET /v0/boom", "GET", "500")); n != 1 {
		t.Errorf("metrics: %v requests counted for the panicking route", n)
	}
	if c, _ := testutil.GatherAndCount(reg, "agentplane_http_request_duration_seconds"); c == 0 {
		t.Error("no latency series registered")
	}
}

func TestBodiesOverTheLimitAre413NotA500(t *testing.T) {
	s, _ := newBareServer(t)
	type body struct {
		Name string `json:"name"`
	}
	s.handle("POST /v0/echo", access{public: true}, func(r *http.Request, _ *Caller) (*Response, error) {
		var b body
		if err := decodeJSON(r, &b, msgInvalidBody); err != nil {
			return nil, err
		}
		return ok(b)
	})
	cases := []struct {
		body   string
		status int
		msg    string
	}{
		{`{"name":"x"}`, 200, ""},
		{`{"name":"` + strings.Repeat("x", 100) + `"}`, 413, "Request body too large"},
		{`{"name":`, 400, msgInvalidBody},
		{`{"name":5}`, 400, msgInvalidBody},
		{`{"name":"x"} trailing`, 400, msgInvalidBody},
		{``, 400, msgInvalidBody},
		{`[1,2]`, 400, msgInvalidBody},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v0/echo", strings.NewReader(c.body)))
		if rec.Code != c.status {
			t.Errorf("body %.30q: status %d, want %d (%s)", c.body, rec.Code, c.status, rec.Body)
			continue
		}
		if c.msg != "" && !strings.Contains(rec.Body.String(), `"error":"`+c.msg) {
			t.Errorf("body %.30q: %s, want error %q", c.body, rec.Body, c.msg)
		}
	}
}
