package openclaw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// ValidateCommand implements engine.Engine:
// `OPENCLAW_CONFIG_PATH=~/<configPath> openclaw config validate --json`. OpenClaw expands the
// leading "~/" against OPENCLAW_HOME (set by Env), so the runtime passes the value literally.
// An absolute configPath is used as it is.
func (e *Engine) ValidateCommand(configPath string) engine.Command {
	p := configPath
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~/") {
		p = "~/" + strings.TrimPrefix(p, "./")
	}
	return engine.Command{
		Args:    []string{"config", "validate", "--json"},
		Env:     map[string]string{"OPENCLAW_CONFIG_PATH": p},
		Timeout: validateTimeout,
	}
}

// validateOutput is what `config validate --json` prints on stdout.
type validateOutput struct {
	Valid  *bool `json:"valid"`
	Issues []struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"issues"`
	Error *cliErrorBody `json:"error"`
}

type cliErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ParseValidate implements engine.Engine. Exit 0 or 1 with a JSON verdict is a result (issues
// as "path: message"; a missing file gives the single issue "file not found"). Any other exit
// code, or output without a verdict, is engine.ErrCLI.
func (e *Engine) ParseValidate(stdout []byte, exitCode int) (engine.ValidateResult, error) {
	if exitCode != 0 && exitCode != 1 {
		return engine.ValidateResult{}, cliFailure(stdout, exitCode)
	}
	raw := jsonPart(stdout)
	var out validateOutput
	if raw == nil || json.Unmarshal(raw, &out) != nil || out.Valid == nil || *out.Valid != (exitCode == 0) {
		return engine.ValidateResult{}, cliFailure(stdout, exitCode)
	}
	res := engine.ValidateResult{Valid: *out.Valid, Output: string(raw)}
	for _, is := range out.Issues {
		switch {
		case is.Path == "" || is.Path == "<root>":
			res.Issues = append(res.Issues, is.Message)
		default:
			res.Issues = append(res.Issues, is.Path+": "+is.Message)
		}
	}
	if !res.Valid && len(res.Issues) == 0 {
		msg := "invalid config"
		if out.Error != nil && out.Error.Message != "" {
			msg = out.Error.Message
		}
		res.Issues = []string{msg}
	}
	return res, nil
}

// DevicesListCommand implements engine.Engine.
func (e *Engine) DevicesListCommand() engine.Command {
	// The CLI's own bound on its call to the gateway is 10 s by default: a gateway busy with
	// its boot (its first CLI call on a loaded machine) missed it, and the list failed.
	return engine.Command{Args: []string{"devices", "list", "--json", "--timeout", gatewayRPCTimeoutMs}, Timeout: gatewayTimeout}
}

// ParseDevices implements engine.Engine: exit 0 with {"pending":[...],"paired":[...]}.
// A failure ({"ok":false,"error":{...}}, exit 1: gateway down, token mismatch) is ErrCLI.
func (e *Engine) ParseDevices(stdout []byte, exitCode int) (engine.Devices, error) {
	raw := jsonPart(stdout)
	var out struct {
		OK      *bool            `json:"ok"`
		Pending []map[string]any `json:"pending"`
		Paired  []map[string]any `json:"paired"`
	}
	if exitCode != 0 || raw == nil || json.Unmarshal(raw, &out) != nil || (out.OK != nil && !*out.OK) {
		return engine.Devices{}, cliFailure(stdout, exitCode)
	}
	d := engine.Devices{Pending: out.Pending, Paired: out.Paired}
	if d.Pending == nil {
		d.Pending = []map[string]any{}
	}
	if d.Paired == nil {
		d.Paired = []map[string]any{}
	}
	return d, nil
}

// jsonPart returns the JSON object in stdout: all of it, or from the first line that starts
// with "{" (in case something printed a line before it). nil if there is none.
func jsonPart(stdout []byte) []byte {
	s := bytes.TrimSpace(stdout)
	if json.Valid(s) {
		return s
	}
	for i := 0; i < len(s); {
		j := bytes.IndexByte(s[i:], '\n')
		if s[i] == '{' {
			if c := bytes.TrimSpace(s[i:]); json.Valid(c) {
				return c
			}
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	return nil
}

// cliFailure is the ErrCLI for a failed command, with OpenClaw's error message when it printed
// one ({"ok":false,"error":{"message":...}}).
func cliFailure(stdout []byte, exitCode int) error {
	msg := ""
	if raw := jsonPart(stdout); raw != nil {
		var out struct {
			Error *cliErrorBody `json:"error"`
		}
		if json.Unmarshal(raw, &out) == nil && out.Error != nil {
			msg = out.Error.Message
		}
	}
	if msg == "" {
		msg = snippet(stdout)
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		return fmt.Errorf("%w: exit code %d", engine.ErrCLI, exitCode)
	}
	return fmt.Errorf("%w: exit code %d: %s", engine.ErrCLI, exitCode, msg)
}
