package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestUnreachableAPIServerIsUnavailable: a call the API server did not answer because it went
// away answers 503 (retry later), not 500, whichever way the connection ended, as does a
// request whose context the platform's shutdown ended; a failure
// that is not about reaching it stays Internal.
func TestUnreachableAPIServerIsUnavailable(t *testing.T) {
	post := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/apis/agentplane.io/v1alpha1/namespaces/ws/agentsecrets", Err: err}
	}
	for _, tc := range []struct {
		name string
		err  error
		want Code
	}{
		{"HTTP/2 connection closed by client-go while the call was in flight", post(errors.New("http2: client connection force closed via ClientConn.Close")), Unavailable},
		{"HTTP/2 connection lost", post(errors.New("http2: client connection lost")), Unavailable},
		{"connection ended before the answer", post(io.ErrUnexpectedEOF), Unavailable},
		{"connection refused", post(fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)), Unavailable},
		{"the platform shutting down mid-request", fmt.Errorf("install the slack plugin: %w", context.Canceled), Unavailable},
		{"a failure of the platform's own", errors.New("cannot render the engine config"), Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got.Code != tc.want {
				t.Fatalf("Classify(%v) = %v %q, want code %v", tc.err, got.Code, got.Message, tc.want)
			}
		})
	}
}

// TestAnswerCutShortIsUnavailable: an API server that dies after an answer's headers and
// before its body (seen in make test's outage test: a secret's create answered 500) is
// unreachable too. client-go reads the body after the call returned and wraps the read's
// error in words of its own, outside any *url.Error; this drives client-go's REST client
// itself against a server that cuts the body short.
func TestAnswerCutShortIsUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"kind\":")
		_ = buf.Flush()
		_ = conn.Close()
	}))
	defer srv.Close()
	c, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/apis", ContentConfig: rest.ContentConfig{
		GroupVersion:         &schema.GroupVersion{Group: "agentplane.io", Version: "v1alpha1"},
		NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Post().Namespace("ws").Resource("agentsecrets").Body([]byte("{}")).Do(context.Background()).Error()
	if err == nil {
		t.Fatal("the call succeeded")
	}
	if got := Classify(fmt.Errorf("create secret: %w", err)); got.Code != Unavailable {
		t.Fatalf("Classify(%v) = %v %q, want Unavailable", err, got.Code, got.Message)
	}
}
