package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
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
