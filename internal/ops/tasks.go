package ops

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Task messages (fixed by the contract).
const (
	MsgInvalidParameters = "Invalid parameters"
	MsgCreateCronFailed  = "Failed to create cron job"
	MsgListCronFailed    = "Failed to list cron jobs"
	minEveryMs           = 1000
)

// cronParser accepts what OpenClaw's scheduler accepts: five fields, or six with seconds, and
// descriptors such as @daily.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// NewTask is a scheduled task to create.
type NewTask struct {
	Name     string
	Schedule *engine.Schedule
	Payload  *engine.Payload
}

// valid checks a task completely before the engine sees it.
func (n NewTask) valid(now time.Time) bool {
	name := strings.TrimSpace(n.Name)
	if name == "" || utf8.RuneCountInString(name) > 100 || strings.ContainsAny(name, "\x00\n\r") {
		return false
	}
	if n.Schedule == nil || n.Payload == nil || !validSchedule(n.Schedule, now) {
		return false
	}
	switch pay := n.Payload; pay.Kind {
	case "agentTurn":
		return strings.TrimSpace(pay.Message) != "" && pay.Text == ""
	case "systemEvent":
		return strings.TrimSpace(pay.Text) != "" && pay.Message == ""
	}
	return false
}

// validSchedule checks one schedule of each kind: a cron expression (and its time zone), a
// period of a second or more, or a time still to come.
func validSchedule(sch *engine.Schedule, now time.Time) bool {
	switch sch.Kind {
	case "cron":
		if strings.TrimSpace(sch.Expr) == "" || sch.EveryMs != 0 || sch.At != "" {
			return false
		}
		if _, err := cronParser.Parse(sch.Expr); err != nil {
			return false
		}
		if sch.TZ != "" {
			if _, err := time.LoadLocation(sch.TZ); err != nil || strings.HasPrefix(sch.TZ, "/") {
				return false
			}
		}
		return true
	case "every":
		return sch.EveryMs >= minEveryMs && sch.Expr == "" && sch.At == "" && sch.TZ == ""
	case "at":
		at, err := time.Parse(time.RFC3339, sch.At)
		return err == nil && at.After(now) && sch.Expr == "" && sch.EveryMs == 0
	}
	return false
}

// CreateTask schedules a task in the agent's engine (enabled) and returns it as the engine
// stored it.
func (o *Ops) CreateTask(ctx context.Context, t Scope, agentID string, n NewTask) (engine.Task, error) {
	if !n.valid(o.d.Now()) {
		return engine.Task{}, Fail(Invalid, MsgInvalidParameters)
	}
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return engine.Task{}, err
	}
	if o.d.Engine == nil {
		return engine.Task{}, Because(Internal, MsgCreateCronFailed, errNoRuntime)
	}
	cmd, err := o.d.Engine.CronAddCommand(engine.Task{
		Name: strings.TrimSpace(n.Name), Enabled: true, Schedule: *n.Schedule, Payload: *n.Payload,
	})
	if err != nil {
		return engine.Task{}, Because(Invalid, MsgInvalidParameters, err)
	}
	res, err := o.RunEngine(ctx, a, cmd)
	if err != nil {
		return engine.Task{}, WithMessage(MsgCreateCronFailed, err)
	}
	task, err := o.d.Engine.ParseCronAdd(res.Stdout, res.ExitCode)
	if err != nil {
		return engine.Task{}, Because(Internal, MsgCreateCronFailed, err)
	}
	return task, nil
}

// Tasks lists the agent's scheduled tasks as its engine holds them.
func (o *Ops) Tasks(ctx context.Context, t Scope, agentID string) ([]engine.Task, error) {
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	if o.d.Engine == nil {
		return nil, Because(Internal, MsgListCronFailed, errNoRuntime)
	}
	res, err := o.RunEngine(ctx, a, o.d.Engine.CronListCommand())
	if err != nil {
		return nil, WithMessage(MsgListCronFailed, err)
	}
	tasks, err := o.d.Engine.ParseCronList(res.Stdout, res.ExitCode)
	if err != nil {
		return nil, Because(Internal, MsgListCronFailed, err)
	}
	if tasks == nil {
		tasks = []engine.Task{}
	}
	return tasks, nil
}
