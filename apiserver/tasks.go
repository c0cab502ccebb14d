package apiserver

import (
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/agentplane/agentplane/internal/engine"
)

// Task messages (fixed by the contract).
const (
	msgInvalidParameters = "Invalid parameters"
	msgCreateCronFailed  = "Failed to create cron job"
	msgListCronFailed    = "Failed to list cron jobs"
	minEveryMs           = 1000
)

// cronParser accepts what OpenClaw's scheduler accepts: five fields, or six with seconds, and
// descriptors such as @daily.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

type taskRequest struct {
	Name     string           `json:"name"`
	Schedule *engine.Schedule `json:"schedule"`
	Payload  *engine.Payload  `json:"payload"`
}

// validateTask checks a task completely before the engine sees it.
func validateTask(req *taskRequest, now time.Time) bool {
	name := strings.TrimSpace(req.Name)
	if name == "" || utf8.RuneCountInString(name) > 100 || strings.ContainsAny(name, "\x00\n\r") {
		return false
	}
	sch, pay := req.Schedule, req.Payload
	if sch == nil || pay == nil {
		return false
	}
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
	case "every":
		if sch.EveryMs < minEveryMs || sch.Expr != "" || sch.At != "" || sch.TZ != "" {
			return false
		}
	case "at":
		at, err := time.Parse(time.RFC3339, sch.At)
		if err != nil || !at.After(now) || sch.Expr != "" || sch.EveryMs != 0 {
			return false
		}
	default:
		return false
	}
	switch pay.Kind {
	case "agentTurn":
		return strings.TrimSpace(pay.Message) != "" && pay.Text == ""
	case "systemEvent":
		return strings.TrimSpace(pay.Text) != "" && pay.Message == ""
	}
	return false
}

func (s *Server) createTask(r *http.Request, c *Caller) (*Response, error) {
	var req taskRequest
	if err := decodeJSON(r, &req, msgInvalidParameters); err != nil {
		return nil, err
	}
	if !validateTask(&req, s.opts.Now()) {
		return nil, errorf(http.StatusBadRequest, msgInvalidParameters)
	}
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	cmd, err := s.opts.Engine.CronAddCommand(engine.Task{
		Name: strings.TrimSpace(req.Name), Enabled: true, Schedule: *req.Schedule, Payload: *req.Payload,
	})
	if err != nil {
		return nil, withCause(http.StatusBadRequest, msgInvalidParameters, err)
	}
	res, err := s.runEngine(r.Context(), a, cmd)
	if err != nil {
		return nil, withMessage(msgCreateCronFailed, err)
	}
	task, err := s.opts.Engine.ParseCronAdd(res.Stdout, res.ExitCode)
	if err != nil {
		return nil, withCause(http.StatusInternalServerError, msgCreateCronFailed, err)
	}
	return created(map[string]any{"task": task})
}

func (s *Server) listTasks(r *http.Request, c *Caller) (*Response, error) {
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	res, err := s.runEngine(r.Context(), a, s.opts.Engine.CronListCommand())
	if err != nil {
		return nil, withMessage(msgListCronFailed, err)
	}
	tasks, err := s.opts.Engine.ParseCronList(res.Stdout, res.ExitCode)
	if err != nil {
		return nil, withCause(http.StatusInternalServerError, msgListCronFailed, err)
	}
	if tasks == nil {
		tasks = []engine.Task{}
	}
	return ok(map[string]any{"tasks": tasks})
}
