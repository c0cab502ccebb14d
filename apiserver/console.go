package apiserver

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/runtime"
)

// Console messages (fixed by the contract).
const (
	msgInvalidCommand  = "Invalid command"
	msgExecFailed      = "Execution failed"
	maxCommandBytes    = 64 << 10
	DefaultExecTimeout = 60 * time.Second
	DefaultExecOutput  = 1 << 20
)

type execRequest struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
}

// consoleExec runs a shell command in the agent's workspace: bounded in time (the whole
// process tree is killed) and in output. A non-zero exit is a 200 with its exit code. The
// output hides the agent's secrets (attached values, gateway and channel tokens) and their
// base64 and hex forms.
func (s *Server) consoleExec(r *http.Request, c *Caller) (*Response, error) {
	var req execRequest
	if err := decodeJSON(r, &req, msgInvalidCommand); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Command) == "" || len(req.Command) > maxCommandBytes || strings.ContainsRune(req.Command, 0) ||
		strings.ContainsRune(req.Cwd, 0) {
		return nil, errorf(http.StatusBadRequest, msgInvalidCommand)
	}
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if s.opts.Runtime == nil {
		return nil, errorf(http.StatusInternalServerError, msgExecFailed)
	}
	// What the command prints is redacted like the gateway's logs (the values only: console
	// output is full of hashes and ids that merely look like tokens). Built first: a command
	// whose output cannot be redacted does not run.
	red, err := s.logRedactor(r.Context(), a)
	if err != nil {
		return nil, withMessage(msgExecFailed, err)
	}
	timeout := s.opts.ExecTimeout
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	started := s.opts.Now().UTC()
	res, err := s.opts.Runtime.Exec(r.Context(), a, runtime.ExecRequest{
		Argv: []string{"sh", "-c", req.Command}, Dir: req.Cwd, Timeout: timeout, MaxOutput: DefaultExecOutput,
	})
	switch {
	case errors.Is(err, runtime.ErrInvalidPath):
		return nil, withCause(http.StatusBadRequest, msgInvalidCommand, err)
	case err != nil:
		return nil, withMessage(msgExecFailed, err)
	}
	hide := red.RedactValues
	if res.Truncated {
		hide = red.RedactValuesCut // a value cut by the cap is hidden too
	}
	return ok(map[string]any{
		"stdout": hide(string(res.Stdout)), "stderr": hide(string(res.Stderr)), "exitCode": res.ExitCode,
		"command": req.Command, "timestamp": started.Format(time.RFC3339Nano),
		"timedOut": res.TimedOut, "truncated": res.Truncated,
	})
}
