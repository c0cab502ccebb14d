package facade

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/agentplane/agentplane/internal/ops"
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
// failed`, ...) without overriding what the central mapping decides about err: see
// ops.WithMessage, which it is for errors of the facade's own.
func withMessage(msg string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return ops.WithMessage(msg, err)
}

// Messages that are not fixed by the contract but shared by many routes.
const (
	msgUnauthorized     = "Unauthorized"
	msgForbidden        = ops.MsgPermissionDenied
	msgNotFound         = ops.MsgNotFound
	msgMethodNotAllowed = "Method not allowed"
	msgConflict         = ops.MsgConflict
	msgInvalidBody      = "Invalid request body"
	msgBodyTooLarge     = "Request body too large"
	msgUnavailable      = ops.MsgUnavailable
	msgInternal         = ops.MsgInternal
	msgMissingUserID    = "Missing userId"
)

// statusOf is the HTTP status of each code of the operations' vocabulary.
var statusOf = map[ops.Code]int{
	ops.Internal:      http.StatusInternalServerError,
	ops.Invalid:       http.StatusBadRequest,
	ops.Forbidden:     http.StatusForbidden,
	ops.NotFound:      http.StatusNotFound,
	ops.Conflict:      http.StatusConflict,
	ops.TooLarge:      http.StatusRequestEntityTooLarge,
	ops.Unprocessable: http.StatusUnprocessableEntity,
	ops.BadGateway:    http.StatusBadGateway,
	ops.Unavailable:   http.StatusServiceUnavailable,
}

// httpError maps any error to the answer the client gets: the facade's own *Error as it is,
// a body over its limit 413, anything else as ops.Classify names it (the one place that
// knows how Kubernetes API errors and dependency failures read to clients).
func httpError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return withCause(http.StatusRequestEntityTooLarge, msgBodyTooLarge, err)
	}
	c := ops.Classify(err)
	status, known := statusOf[c.Code]
	if !known {
		status = http.StatusInternalServerError
	}
	return &Error{Status: status, Message: c.Message, Fields: c.Fields, Cause: c.Cause}
}
