package apiserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentplane/agentplane/internal/runtime"
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
		{"server failure", errors.New("engine said no"), http.StatusInternalServerError, msgRestartFailed},
		{"forbidden to the manager", apierrors.NewForbidden(agents, "a1", errors.New("rbac")), http.StatusInternalServerError, msgRestartFailed},
		{"not found", apierrors.NewNotFound(agents, "a1"), http.StatusNotFound, msgNotFound},
		{"conflict", apierrors.NewConflict(agents, "a1", errors.New("stale")), http.StatusConflict, msgConflict},
		{"API server refused", fmt.Errorf("get: %w", refused), http.StatusServiceUnavailable, msgUnavailable},
		{"API server unavailable", apierrors.NewServiceUnavailable("down"), http.StatusServiceUnavailable, msgUnavailable},
		{"runtime unreachable", fmt.Errorf("%w: stream", runtime.ErrUnavailable), http.StatusServiceUnavailable, msgUnavailable},
		{"dependency unavailable", fmt.Errorf("%w: storage", ErrUnavailable), http.StatusServiceUnavailable, msgUnavailable},
		{"invalid", apierrors.NewBadRequest("bad"), http.StatusBadRequest, "Validation failed"},
		{"too large", &http.MaxBytesError{Limit: 1}, http.StatusRequestEntityTooLarge, msgBodyTooLarge},
		{"chosen answer", errorf(http.StatusNotFound, msgAgentNotFound), http.StatusNotFound, msgAgentNotFound},
		{"chosen failure", errorf(http.StatusInternalServerError, msgGatewayFailed), http.StatusInternalServerError, msgGatewayFailed},
	} {
		got := httpError(withMessage(msgRestartFailed, tc.err))
		if got.Status != tc.status || got.Message != tc.msg {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, got.Status, got.Message, tc.status, tc.msg)
		}
		if !errors.Is(got, tc.err) && got.Cause != nil && !errors.Is(got.Cause, tc.err) {
			t.Errorf("%s: the cause is lost: %v", tc.name, got)
		}
	}
}
