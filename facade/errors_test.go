package facade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/ops"
)

func TestWithMessageKeepsTheMappedStatus(t *testing.T) {
	agents := k8sschema.GroupResource{Group: "agents.agentplane.io", Resource: "agents"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"server failure", errors.New("engine said no"), http.StatusInternalServerError, ops.MsgRestartFailed},
		{"forbidden to the manager", apierrors.NewForbidden(agents, "a1", errors.New("rbac")), http.StatusInternalServerError, ops.MsgRestartFailed},
		{"not found", apierrors.NewNotFound(agents, "a1"), http.StatusNotFound, msgNotFound},
		{"conflict", apierrors.NewConflict(agents, "a1", errors.New("stale")), http.StatusConflict, msgConflict},
		{"kube-apiserver refused", fmt.Errorf("get: %w", refused), http.StatusServiceUnavailable, msgUnavailable},
		{"kube-apiserver unavailable", apierrors.NewServiceUnavailable("down"), http.StatusServiceUnavailable, msgUnavailable},
		{"runtime unreachable", fmt.Errorf("%w: stream", runtime.ErrUnavailable), http.StatusServiceUnavailable, msgUnavailable},
		{"dependency unavailable", fmt.Errorf("%w: storage", ops.ErrUnavailable), http.StatusServiceUnavailable, msgUnavailable},
		{"invalid", apierrors.NewBadRequest("bad"), http.StatusBadRequest, "Validation failed"},
		{"too large", &http.MaxBytesError{Limit: 1}, http.StatusRequestEntityTooLarge, msgBodyTooLarge},
		{"chosen answer", errorf(http.StatusNotFound, ops.MsgAgentNotFound), http.StatusNotFound, ops.MsgAgentNotFound},
		{"chosen failure", errorf(http.StatusInternalServerError, ops.MsgGatewayFailed), http.StatusInternalServerError, ops.MsgGatewayFailed},
	} {
		got := httpError(withMessage(ops.MsgRestartFailed, tc.err))
		if got.Status != tc.status || got.Message != tc.msg {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, got.Status, got.Message, tc.status, tc.msg)
		}
		if !errors.Is(got, tc.err) && got.Cause != nil && !errors.Is(got.Cause, tc.err) {
			t.Errorf("%s: the cause is lost: %v", tc.name, got)
		}
	}
}

// TestConnectionLostMidCallIsUnavailable: a dependency that dies while it answers (the
// connection ends before the response does) is 503, whatever point of the answer it reached,
// through client-go's REST client as the platform calls kube-apiserver. Cut inside the body,
// client-go reads it after the call returned and wraps the read's error in words of its own,
// outside any *url.Error (make test's outage test once answered 500 for a secret's create).
func TestConnectionLostMidCallIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply string
	}{
		{"before any answer", ""},
		{"inside the status line", "HTTP/1.1 20"},
		{"inside the headers", "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"},
		{"inside the body", "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"kind\":"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = buf.WriteString(tc.reply)
				_ = buf.Flush()
				_ = conn.Close()
			}))
			defer srv.Close()
			c, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/apis", ContentConfig: rest.ContentConfig{
				GroupVersion:         &k8sschema.GroupVersion{Group: "agentplane.io", Version: "v1alpha1"},
				NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
			}})
			if err != nil {
				t.Fatal(err)
			}
			err = c.Post().Namespace("ws").Resource("agentsecrets").Body([]byte(`{}`)).Do(context.Background()).Error()
			if err == nil {
				t.Fatal("the call succeeded")
			}
			if got := httpError(fmt.Errorf("create secret: %w", err)); got.Status != http.StatusServiceUnavailable || got.Message != msgUnavailable {
				t.Errorf("%v: got %d %q, want 503 %q", err, got.Status, got.Message, msgUnavailable)
			}
		})
	}
}
