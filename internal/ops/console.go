package ops

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Console messages (fixed by the contract).
const (
	MsgInvalidCommand = "Invalid command"
	MsgExecFailed     = "Execution failed"
	maxCommandBytes   = 64 << 10
	// DefaultExecTimeout bounds a console command without Deps.ExecTimeout; DefaultExecOutput
	// bounds what it may print.
	DefaultExecTimeout = 60 * time.Second
	DefaultExecOutput  = 1 << 20
)

// Command is a shell command to run in the agent's home, in Cwd (relative to the engine's
// workspace directory; "" is that directory).
type Command struct {
	Command, Cwd string
}

// CommandResult is what a command did, its output redacted.
type CommandResult struct {
	Stdout, Stderr      string
	ExitCode            int
	Started             time.Time
	TimedOut, Truncated bool
}

// Exec runs a shell command in the agent's home: bounded in time (the whole process tree is
// killed) and in output. A non-zero exit is a result, not an error. The output hides the
// agent's secrets (attached values, gateway and channel tokens) and their base64 and hex
// forms; a command whose output cannot be redacted does not run.
func (o *Ops) Exec(ctx context.Context, t Scope, agentID string, c Command) (CommandResult, error) {
	if strings.TrimSpace(c.Command) == "" || len(c.Command) > maxCommandBytes || strings.ContainsRune(c.Command, 0) ||
		strings.ContainsRune(c.Cwd, 0) {
		return CommandResult{}, Fail(Invalid, MsgInvalidCommand)
	}
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return CommandResult{}, err
	}
	if o.d.Runtime == nil {
		return CommandResult{}, Fail(Internal, MsgExecFailed)
	}
	// Redacted like the gateway's logs (the values only: console output is full of hashes and
	// ids that merely look like tokens).
	red, err := o.LogRedactor(ctx, a)
	if err != nil {
		return CommandResult{}, WithMessage(MsgExecFailed, err)
	}
	timeout := o.d.ExecTimeout
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	started := o.d.Now().UTC()
	res, err := o.d.Runtime.Exec(ctx, a, runtime.ExecRequest{
		Argv: []string{"sh", "-c", c.Command}, Dir: c.Cwd, Timeout: timeout, MaxOutput: DefaultExecOutput,
	})
	switch {
	case errors.Is(err, runtime.ErrInvalidPath):
		return CommandResult{}, Because(Invalid, MsgInvalidCommand, err)
	case err != nil:
		return CommandResult{}, WithMessage(MsgExecFailed, err)
	}
	hide := red.RedactValues
	if res.Truncated {
		hide = red.RedactValuesCut // a value cut by the cap is hidden too
	}
	return CommandResult{
		Stdout: hide(string(res.Stdout)), Stderr: hide(string(res.Stderr)), ExitCode: res.ExitCode,
		Started: started, TimedOut: res.TimedOut, Truncated: res.Truncated,
	}, nil
}
