package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		what   string
		status int
		body   string
		pass   bool
	}{
		{"live", 200, `{"ok":true,"status":"live","version":"2026.9.6","uptimeMs":12}`, true},
		{"ready", 200, `{"ready":true}`, true},
		{"the engine's 200 for an unknown path", 200, "<!doctype html><title>OpenClaw</title>", false},
		{"a 200 of another JSON", 200, `{"hello":"world"}`, false},
		{"not ready", 503, `{"ready":false}`, false},
		{"ok false", 200, `{"ok":false,"status":"starting","pendingReason":"plugins"}`, false},
		{"ready false with 200", 200, `{"ready":false}`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		err := check(srv.Client(), srv.URL+"/readyz")
		srv.Close()
		if (err == nil) != tc.pass {
			t.Errorf("%s: check = %v, want pass %v", tc.what, err, tc.pass)
		}
	}
	if err := check(http.DefaultClient, "http://127.0.0.1:1/healthz"); err == nil {
		t.Error("nothing listening passed")
	}
}
