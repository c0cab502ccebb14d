package openclaw

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// DeclarationPrefix marks the cron jobs agentplane owns: every task is added with
// --declaration-key operator:<name>, which makes `cron add` an idempotent upsert (same key,
// same job id) and tells our jobs from OpenClaw's own (heartbeat:, memory-core:, ...).
const DeclarationPrefix = "operator:"

// CronAddCommand implements engine.Engine. It maps t to
// `cron add --json --name=N --declaration-key=operator:N` plus one schedule (--cron=EXPR
// [--tz=TZ], --every=<ms>ms, --at=ISO [--tz=TZ]) and one payload (--message=TEXT --no-deliver
// for agentTurn, --system-event=TEXT for systemEvent; OpenClaw rejects --no-deliver on
// main-session system events), and --disabled when !t.Enabled. Values use the --flag=value form
// so that text starting with "-" is never taken for an option.
//
// Re-adding an existing name updates schedule and payload in place but leaves the job's enabled
// state as it is (OpenClaw's upsert does not touch it).
func (e *Engine) CronAddCommand(t engine.Task) (engine.Command, error) {
	bad := func(format string, a ...any) (engine.Command, error) {
		return engine.Command{}, fmt.Errorf("%w: task: "+format, append([]any{engine.ErrInvalidInput}, a...)...)
	}
	name := strings.TrimSpace(t.Name)
	if name == "" || len(name) > 200 || strings.ContainsFunc(name, unicode.IsControl) {
		return bad("name must be 1-200 printable characters")
	}
	args := []string{"cron", "add", "--json", "--name=" + name, "--declaration-key=" + DeclarationPrefix + name}

	s := t.Schedule
	kind := s.Kind
	if kind == "" {
		switch {
		case s.Expr != "" && s.EveryMs == 0 && s.At == "":
			kind = "cron"
		case s.Expr == "" && s.EveryMs > 0 && s.At == "":
			kind = "every"
		case s.Expr == "" && s.EveryMs == 0 && s.At != "":
			kind = "at"
		}
	}
	switch kind {
	case "cron":
		if strings.TrimSpace(s.Expr) == "" {
			return bad("a cron schedule needs expr")
		}
		args = append(args, "--cron="+strings.TrimSpace(s.Expr))
		if s.TZ != "" {
			args = append(args, "--tz="+s.TZ)
		}
	case "every":
		if s.EveryMs <= 0 {
			return bad("an every schedule needs everyMs > 0")
		}
		args = append(args, "--every="+strconv.FormatInt(s.EveryMs, 10)+"ms")
	case "at":
		if strings.TrimSpace(s.At) == "" {
			return bad("an at schedule needs at (ISO 8601 time)")
		}
		args = append(args, "--at="+strings.TrimSpace(s.At))
		if s.TZ != "" {
			args = append(args, "--tz="+s.TZ)
		}
	default:
		return bad("schedule kind must be cron, every or at, got %q", s.Kind)
	}

	p := t.Payload
	switch p.Kind {
	case "agentTurn", "":
		if strings.TrimSpace(p.Message) == "" {
			return bad("an agentTurn payload needs a message")
		}
		args = append(args, "--message="+p.Message, "--no-deliver")
	case "systemEvent":
		text := p.Text
		if text == "" {
			text = p.Message
		}
		if strings.TrimSpace(text) == "" {
			return bad("a systemEvent payload needs text")
		}
		args = append(args, "--system-event="+text)
	default:
		return bad("payload kind must be agentTurn or systemEvent, got %q", p.Kind)
	}
	if !t.Enabled {
		args = append(args, "--disabled")
	}
	return engine.Command{Args: args, Timeout: gatewayTimeout}, nil
}

// cronJob is a job as `cron add` and `cron list` print it.
type cronJob struct {
	ID             string `json:"id"`
	DeclarationKey string `json:"declarationKey"`
	Name           string `json:"name"`
	Enabled        bool   `json:"enabled"`
	CreatedAtMs    int64  `json:"createdAtMs"`
	NextRunAtMs    int64  `json:"nextRunAtMs"`
	State          struct {
		NextRunAtMs int64 `json:"nextRunAtMs"`
		RunningAtMs int64 `json:"runningAtMs"`
	} `json:"state"`
	Schedule struct {
		Kind    string `json:"kind"`
		Expr    string `json:"expr"`
		TZ      string `json:"tz"`
		EveryMs int64  `json:"everyMs"`
		At      string `json:"at"`
	} `json:"schedule"`
	Payload struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
		Text    string `json:"text"`
	} `json:"payload"`
}

func (j cronJob) task() engine.Task {
	name := j.Name
	if name == "" {
		name = strings.TrimPrefix(j.DeclarationKey, DeclarationPrefix)
	}
	t := engine.Task{
		ID:      j.ID,
		Name:    name,
		Enabled: j.Enabled,
		Schedule: engine.Schedule{Kind: j.Schedule.Kind, Expr: j.Schedule.Expr, TZ: j.Schedule.TZ,
			EveryMs: j.Schedule.EveryMs, At: j.Schedule.At},
		Payload:   engine.Payload{Kind: j.Payload.Kind, Message: j.Payload.Message, Text: j.Payload.Text},
		CreatedAt: msTime(j.CreatedAtMs),
		Running:   j.State.RunningAtMs > 0,
	}
	next := j.NextRunAtMs
	if next == 0 {
		next = j.State.NextRunAtMs
	}
	t.NextRunAt = msTime(next)
	return t
}

// msTime formats epoch milliseconds like JavaScript's toISOString ("" for 0).
func msTime(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// ParseCronAdd implements engine.Engine. With --declaration-key OpenClaw wraps the job as
// {"created":bool,"updated":bool,"job":{...}}; a bare job is accepted too.
func (e *Engine) ParseCronAdd(stdout []byte, exitCode int) (engine.Task, error) {
	raw := jsonPart(stdout)
	if exitCode != 0 || raw == nil {
		return engine.Task{}, cliFailure(stdout, exitCode)
	}
	var out struct {
		OK  *bool           `json:"ok"`
		Job json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || (out.OK != nil && !*out.OK) {
		return engine.Task{}, cliFailure(stdout, exitCode)
	}
	jobRaw := raw
	if len(out.Job) > 0 {
		jobRaw = out.Job
	}
	var j cronJob
	if err := json.Unmarshal(jobRaw, &j); err != nil || j.ID == "" {
		return engine.Task{}, fmt.Errorf("%w: cron add printed no job: %q", engine.ErrCLI, snippet(stdout))
	}
	return j.task(), nil
}

// CronListCommand implements engine.Engine: `cron list --json --all` (disabled jobs too).
func (e *Engine) CronListCommand() engine.Command {
	return engine.Command{Args: []string{"cron", "list", "--json", "--all"}, Timeout: gatewayTimeout}
}

// ParseCronList implements engine.Engine: the jobs whose declarationKey starts with
// "operator:", in the order OpenClaw lists them. OpenClaw's own jobs are left out.
func (e *Engine) ParseCronList(stdout []byte, exitCode int) ([]engine.Task, error) {
	raw := jsonPart(stdout)
	if exitCode != 0 || raw == nil {
		return nil, cliFailure(stdout, exitCode)
	}
	var out struct {
		OK   *bool     `json:"ok"`
		Jobs []cronJob `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || (out.OK != nil && !*out.OK) || out.Jobs == nil {
		return nil, cliFailure(stdout, exitCode)
	}
	tasks := []engine.Task{}
	for _, j := range out.Jobs {
		if strings.HasPrefix(j.DeclarationKey, DeclarationPrefix) {
			tasks = append(tasks, j.task())
		}
	}
	return tasks, nil
}
