package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/agentplane/agentplane/internal/runtime"
)

// Error is an answer with a status and the contract's exact text. Every handler returns
// either a response or an error; httpError turns any error into an *Error in one place.
type Error struct {
	Status  int
	Message string
	// Fields are extra top-level members of a /v0 error body (for example the agent of a
	// `Gateway failed to start`).
	Fields map[string]any
	// Cause is logged, never sent.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Message, e.Cause)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// errorf returns an *Error with the given status and exact message.
func errorf(status int, message string) *Error { return &Error{Status: status, Message: message} }

// withCause returns an *Error that keeps cause for the log.
func withCause(status int, message string, cause error) *Error {
	return &Error{Status: status, Message: message, Cause: cause}
}

// withMessage names the contract's message of an operation (`Restart failed`, `Execution
// failed`, ...) without overriding what the central mapping (httpError) decides about err:
//   - an *Error from deeper code is returned as it is (its status and message were chosen
//     where the failure was understood);
//   - an err that httpError maps to 500 answers 500 with msg: that is the operation failing;
//   - any other mapped status (400, 404, 409, 413, 503) is kept with the mapped message
//     (`Not found`, `Conflict`, `Service unavailable`, ...): those are the contract's words
//     for those statuses, and msg names a server failure, which this is not (an API server
//     that cannot be reached is 503 `Service unavailable`, not 500 `Restart failed`).
//
// Use it wherever err can come from the API server, storage, the runtime or another
// dependency; withCause(http.StatusInternalServerError, ...) is for failures that can only be
// the server's own (an engine command that exited non-zero, output that does not parse, a
// gateway or controller that reports a failure).
func withMessage(msg string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if mapped := httpError(err); mapped.Status != http.StatusInternalServerError {
		return mapped
	}
	return withCause(http.StatusInternalServerError, msg, err)
}

// Messages that are not fixed by the contract but shared by many routes.
const (
	msgUnauthorized     = "Unauthorized"
	msgForbidden        = "Permission denied"
	msgNotFound         = "Not found"
	msgMethodNotAllowed = "Method not allowed"
	msgConflict         = "Conflict"
	msgInvalidBody      = "Invalid request body"
	msgBodyTooLarge     = "Request body too large"
	msgUnavailable      = "Service unavailable"
	msgInternal         = "Internal server error"
	msgMissingUserID    = "Missing userId"
)

// ErrUnavailable marks a dependency (API server, storage, DNS, registry) that cannot be
// reached right now; it always maps to 503.
var ErrUnavailable = errors.New("dependency unavailable")

// httpError maps any error to the answer the client gets. It is the only place that knows
// how Kubernetes API errors and dependency failures become HTTP statuses.
func httpError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return withCause(http.StatusRequestEntityTooLarge, msgBodyTooLarge, err)
	case errors.Is(err, ErrUnavailable), errors.Is(err, runtime.ErrUnavailable), isUnreachable(err):
		return withCause(http.StatusServiceUnavailable, msgUnavailable, err)
	case apierrors.IsNotFound(err):
		return withCause(http.StatusNotFound, msgNotFound, err)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return withCause(http.StatusConflict, msgConflict, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return withCause(http.StatusBadRequest, invalidMessage(err), err)
	case apierrors.IsForbidden(err):
		// The API server refusing the manager is a deployment fault, not the caller's.
		return withCause(http.StatusInternalServerError, msgInternal, err)
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err):
		return withCause(http.StatusServiceUnavailable, msgUnavailable, err)
	default:
		return withCause(http.StatusInternalServerError, msgInternal, err)
	}
}

// isUnreachable recognises a dependency that did not answer (refused, reset, timed out, or
// gone while it answered: a connection that ended before the response did, which is what a
// call in flight gets when the API server dies).
func isUnreachable(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.As(err, &urlErr) && connectionLost(urlErr.Err):
		return true
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// connectionLost recognises a call whose connection ended before its answer did.
func connectionLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		strings.Contains(err.Error(), "transport connection broken")
}

// invalidMessage turns the API server's validation causes into one readable line.
func invalidMessage(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "Validation failed"
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		return "Validation failed"
	}
	parts := make([]string, 0, len(details.Causes))
	for _, c := range details.Causes {
		if strings.Contains(c.Message, "some validation rules were not checked") {
			continue
		}
		field := strings.TrimPrefix(c.Field, "spec.")
		if field != "" {
			parts = append(parts, field+": "+c.Message)
		} else {
			parts = append(parts, c.Message)
		}
	}
	return "Validation failed: " + strings.Join(parts, "; ")
}
