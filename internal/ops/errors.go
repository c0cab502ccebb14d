package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// Code is what kind of failure an operation met. Each door maps a code to its own terms (the
// REST facade to an HTTP status, the CLI to an exit status); the codes are the vocabulary the
// operations share with them.
type Code int

const (
	// Internal is a failure of the platform itself (the zero value).
	Internal Code = iota
	// Invalid is input the operation refuses (400).
	Invalid
	// Forbidden is an act the caller's role or the platform's settings do not allow (403).
	Forbidden
	// NotFound is an object the caller names that does not exist for them (404).
	NotFound
	// Conflict is a state that refuses the operation, or a write that lost a race (409).
	Conflict
	// TooLarge is input over a limit (413).
	TooLarge
	// Unprocessable is well-formed input the operation cannot act on (422).
	Unprocessable
	// BadGateway is an upstream (a registry, the agent's gateway) that answered wrongly (502).
	BadGateway
	// Unavailable is a dependency that cannot be reached right now (503): retry later.
	Unavailable
)

var codeNames = [...]string{"internal", "invalid", "forbidden", "not found", "conflict", "too large",
	"unprocessable", "bad gateway", "unavailable"}

func (c Code) String() string {
	if c < 0 || int(c) >= len(codeNames) {
		return fmt.Sprintf("code(%d)", int(c))
	}
	return codeNames[c]
}

// Error is an operation's failure with the contract's exact text.
type Error struct {
	Code    Code
	Message string
	// Fields are facts that travel with the message (for example the agent of a `Gateway
	// failed to start`); the REST facade adds them to its error body.
	Fields map[string]any
	// Cause is logged, never shown.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// Fail returns an *Error with code and the exact message.
func Fail(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// Because returns an *Error that keeps cause for the log.
func Because(code Code, message string, cause error) *Error {
	return &Error{Code: code, Message: message, Cause: cause}
}

// Messages shared by many operations; the contract fixes them per status.
const (
	MsgNotFound = "Not found"
	MsgConflict = "Conflict"
	// MsgPermissionDenied: the caller's role or credential does not allow the act (403).
	MsgPermissionDenied = "Permission denied"
	MsgUnavailable      = "Service unavailable"
	MsgInternal         = "Internal server error"
)

// ErrUnavailable marks a dependency (API server, storage, DNS, registry) that cannot be
// reached right now; it always classifies as Unavailable.
var ErrUnavailable = errors.New("dependency unavailable")

// Classify turns any error into the *Error a caller is told. It is the one place that knows
// how Kubernetes API errors and dependency failures read to clients: an *Error passes as it
// is, anything unknown is Internal.
func Classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, runtime.ErrUnavailable), isUnreachable(err):
		return Because(Unavailable, MsgUnavailable, err)
	case errors.Is(err, context.Canceled):
		// The request's context ended before its work did: the platform is shutting down (or
		// the caller left, who reads no answer). Retry later, not a server fault.
		return Because(Unavailable, MsgUnavailable, err)
	case errors.Is(err, admission.ErrClaimUndecided):
		// Another request's claim on the name is still in flight: taken or not is unknown yet.
		return Because(Unavailable, MsgUnavailable, err)
	case apierrors.IsNotFound(err):
		return Because(NotFound, MsgNotFound, err)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return Because(Conflict, MsgConflict, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return Because(Invalid, invalidMessage(err), err)
	case apierrors.IsForbidden(err):
		// The API server refusing the manager is a deployment fault, not the caller's.
		return Because(Internal, MsgInternal, err)
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err):
		return Because(Unavailable, MsgUnavailable, err)
	default:
		return Because(Internal, MsgInternal, err)
	}
}

// WithMessage names the contract's message of an operation (`Restart failed`, `Execution
// failed`, ...) without overriding what Classify decides about err:
//   - an *Error from deeper code is returned as it is (its code and message were chosen
//     where the failure was understood);
//   - an err that Classify calls Internal becomes Internal with msg: that is the operation
//     failing;
//   - any other class (Invalid, NotFound, Conflict, Unavailable) keeps Classify's message
//     (`Not found`, `Conflict`, `Service unavailable`, ...): those are the contract's words
//     for them, and msg names a server failure, which this is not (an API server that cannot
//     be reached is `Service unavailable`, not `Restart failed`).
//
// Use it wherever err can come from the API server, storage, the runtime or another
// dependency; Because(Internal, ...) is for failures that can only be the platform's own (an
// engine command that exited non-zero, output that does not parse, a gateway or controller
// that reports a failure).
func WithMessage(msg string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if c := Classify(err); c.Code != Internal {
		return c
	}
	return Because(Internal, msg, err)
}

// isUnreachable recognises a dependency that did not answer (refused, reset, timed out, or
// gone while it answered: a connection that ended before the response or its body did, which
// is what a call in flight gets when the API server dies).
func isUnreachable(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.As(err, &urlErr) && connectionLost(urlErr.Err):
		return true
	case strings.Contains(err.Error(), bodyReadFailed):
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

// bodyReadFailed begins the error client-go returns when an answer's headers came and its
// body did not (the API server died between them): it reads the body after the call
// returned, so the read's error is not in a *url.Error but wrapped in these words, which end
// "Please retry".
const bodyReadFailed = "unexpected error when reading response body"

// connectionLost recognises a call whose connection ended before its answer did. client-go
// closes an HTTP/2 connection whose pings go unanswered (the API server died), and a call in
// flight on it fails with x/net's unexported errClientConnForceClosed.
func connectionLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		strings.Contains(err.Error(), "transport connection broken") ||
		strings.Contains(err.Error(), "client connection force closed")
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
