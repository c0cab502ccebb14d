package program

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// jobSpec is what `cron add` asks the gateway for.
type jobSpec struct {
	Name           string `json:"name"`
	DeclarationKey string `json:"declarationKey,omitempty"`
	Description    string `json:"description,omitempty"`
	Cron           string `json:"cron,omitempty"`
	TZ             string `json:"tz,omitempty"`
	EveryMs        int64  `json:"everyMs,omitempty"`
	At             string `json:"at,omitempty"` // RFC 3339, resolved by the CLI
	Message        string `json:"message,omitempty"`
	SystemEvent    string `json:"systemEvent,omitempty"`
	NoDeliver      bool   `json:"noDeliver,omitempty"`
	Disabled       bool   `json:"disabled,omitempty"`
	DeleteAfterRun *bool  `json:"deleteAfterRun,omitempty"`
	AgentID        string `json:"agentId,omitempty"`
}

// job is a cron job in openclaw's shape.
type job struct {
	ID             string         `json:"id"`
	DeclarationKey string         `json:"declarationKey,omitempty"`
	DisplayName    string         `json:"displayName,omitempty"`
	AgentID        string         `json:"agentId,omitempty"`
	Name           string         `json:"name"`
	Description    string         `json:"description,omitempty"`
	Enabled        bool           `json:"enabled"`
	DeleteAfterRun bool           `json:"deleteAfterRun,omitempty"`
	CreatedAtMs    int64          `json:"createdAtMs"`
	UpdatedAtMs    int64          `json:"updatedAtMs"`
	Schedule       map[string]any `json:"schedule"`
	SessionTarget  string         `json:"sessionTarget"`
	WakeMode       string         `json:"wakeMode"`
	Payload        map[string]any `json:"payload"`
	Delivery       map[string]any `json:"delivery,omitempty"`
	State          map[string]any `json:"state"`
	NextRunAtMs    int64          `json:"nextRunAtMs,omitempty"`
	// Only in `cron list`.
	EffectiveAgentID string `json:"effectiveAgentId,omitempty"`
	Status           string `json:"status,omitempty"`
}

// reservedPrefixes are the declaration keys of OpenClaw's system-owned jobs.
var reservedPrefixes = []string{"heartbeat-task:", "heartbeat:", "skill-collection-review:"}

// cronStore keeps jobs in memory and in a JSON file.
type cronStore struct {
	mu   sync.Mutex
	path string
	jobs []*job
}

func openCronStore(path string) *cronStore {
	s := &cronStore{path: path}
	if b, err := os.ReadFile(path); err == nil {
		var f struct{ Jobs []*job }
		if json.Unmarshal(b, &f) == nil {
			s.jobs = f.Jobs
		}
	}
	if s.byKey("heartbeat:main") == nil {
		now := time.Now()
		s.jobs = append(s.jobs, &job{ID: randomUUID(), DeclarationKey: "heartbeat:main", DisplayName: "Heartbeat (main)",
			AgentID: "main", Name: "heartbeat-main", Enabled: true, CreatedAtMs: now.UnixMilli(), UpdatedAtMs: now.UnixMilli(),
			Schedule:      map[string]any{"kind": "every", "everyMs": 1800000, "anchorMs": now.UnixMilli()},
			SessionTarget: "main", WakeMode: "next-heartbeat", Payload: map[string]any{"kind": "heartbeat"},
			State: map[string]any{"nextRunAtMs": now.UnixMilli() + 1800000}, NextRunAtMs: now.UnixMilli() + 1800000})
		s.save()
	}
	return s
}

func (s *cronStore) byKey(key string) *job {
	for _, j := range s.jobs {
		if key != "" && j.DeclarationKey == key {
			return j
		}
	}
	return nil
}

func (s *cronStore) save() {
	b, _ := json.MarshalIndent(map[string]any{"version": 1, "jobs": s.jobs}, "", "  ")
	tmp := s.path + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		_ = os.Rename(tmp, s.path)
	}
}

// add creates a job, or upserts the one with the same declaration key (its enabled state is
// left alone, as openclaw does).
func (s *cronStore) add(spec jobSpec, now time.Time) (any, error) {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(spec.DeclarationKey, p) {
			return nil, fmt.Errorf("invalid cron.add params: declarationKey prefix %q is reserved for system-owned jobs", p)
		}
	}
	fresh, err := buildJob(spec, now)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	preview := map[string]any{"label": "not requested", "detail": "not requested"}
	old := s.byKey(spec.DeclarationKey)
	if old == nil {
		s.jobs = append(s.jobs, fresh)
		s.save()
		if spec.DeclarationKey == "" {
			return fresh, nil
		}
		return map[string]any{"created": true, "job": fresh, "deliveryPreview": preview}, nil
	}
	updated := old.Name != fresh.Name || old.Description != fresh.Description || old.DeleteAfterRun != fresh.DeleteAfterRun ||
		!sameSchedule(old.Schedule, fresh.Schedule) || !reflect.DeepEqual(old.Payload, fresh.Payload) ||
		!reflect.DeepEqual(old.Delivery, fresh.Delivery)
	if updated {
		old.Name, old.Description, old.DeleteAfterRun = fresh.Name, fresh.Description, fresh.DeleteAfterRun
		old.Schedule, old.Payload, old.Delivery = fresh.Schedule, fresh.Payload, fresh.Delivery
		old.SessionTarget, old.UpdatedAtMs = fresh.SessionTarget, now.UnixMilli()
		setNextRun(old, now)
		s.save()
	}
	return map[string]any{"created": false, "updated": updated, "job": old, "deliveryPreview": preview}, nil
}

func sameSchedule(a, b map[string]any) bool {
	strip := func(m map[string]any) string {
		c := map[string]any{}
		for k, v := range m {
			if k != "anchorMs" {
				c[k] = v
			}
		}
		out, _ := json.Marshal(c)
		return string(out)
	}
	return strip(a) == strip(b)
}

func buildJob(spec jobSpec, now time.Time) (*job, error) {
	j := &job{ID: randomUUID(), DeclarationKey: spec.DeclarationKey, AgentID: spec.AgentID, Name: spec.Name,
		Description: spec.Description, Enabled: !spec.Disabled, CreatedAtMs: now.UnixMilli(), UpdatedAtMs: now.UnixMilli(),
		WakeMode: "now"}
	switch {
	case spec.Cron != "":
		if _, err := cronSchedule(spec.Cron, spec.TZ); err != nil {
			return nil, err
		}
		j.Schedule = map[string]any{"kind": "cron", "expr": spec.Cron}
		if spec.TZ != "" {
			j.Schedule["tz"] = spec.TZ
		}
	case spec.EveryMs > 0:
		j.Schedule = map[string]any{"kind": "every", "everyMs": spec.EveryMs, "anchorMs": now.UnixMilli()}
	case spec.At != "":
		at, err := time.Parse(time.RFC3339Nano, spec.At)
		if err != nil {
			return nil, fmt.Errorf("invalid cron.add params: at: %v", err)
		}
		j.Schedule = map[string]any{"kind": "at", "at": at.UTC().Format("2006-01-02T15:04:05.000Z")}
		j.DeleteAfterRun = true
	default:
		return nil, fmt.Errorf("invalid cron.add params: schedule required")
	}
	if spec.DeleteAfterRun != nil {
		j.DeleteAfterRun = *spec.DeleteAfterRun
	}
	if spec.SystemEvent != "" {
		j.SessionTarget = "main"
		j.Payload = map[string]any{"kind": "systemEvent", "text": spec.SystemEvent}
	} else {
		j.SessionTarget = "isolated"
		j.Payload = map[string]any{"kind": "agentTurn", "message": spec.Message, "toolsAllow": []any{"*"}}
		mode := "announce"
		if spec.NoDeliver {
			mode = "none"
		}
		j.Delivery = map[string]any{"mode": mode, "channel": "last"}
	}
	setNextRun(j, now)
	return j, nil
}

// cronSchedule parses a 5- or 6-field (seconds first) cron expression in tz.
func cronSchedule(expr, tz string) (cron.Schedule, error) {
	n := len(strings.Fields(expr))
	if n < 5 || n > 7 {
		return nil, fmt.Errorf("invalid cron.add params: CronPattern: invalid configuration format ('%s'), exactly five, six, or seven space separated parts are required.", expr)
	}
	if tz != "" {
		if _, err := time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("invalid cron.add params: invalid timezone %q", tz)
		}
		expr = "CRON_TZ=" + tz + " " + expr
	}
	sched, err := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("invalid cron.add params: CronPattern: %v", err)
	}
	return sched, nil
}

func setNextRun(j *job, now time.Time) {
	j.State, j.NextRunAtMs = map[string]any{}, 0
	if !j.Enabled {
		return
	}
	var next int64
	switch j.Schedule["kind"] {
	case "cron":
		tz, _ := j.Schedule["tz"].(string)
		if s, err := cronSchedule(j.Schedule["expr"].(string), tz); err == nil {
			next = s.Next(now).UnixMilli()
		}
	case "every":
		next = now.UnixMilli() + toInt64(j.Schedule["everyMs"])
	case "at":
		if at, err := time.Parse(time.RFC3339Nano, j.Schedule["at"].(string)); err == nil && at.After(now) {
			next = at.UnixMilli()
		}
	}
	if next > 0 {
		j.State["nextRunAtMs"], j.NextRunAtMs = next, next
	}
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}

// list is `cron list --json`: by next run (none last), disabled jobs only with all.
func (s *cronStore) list(all bool) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	jobs := []job{}
	previews := map[string]any{}
	for _, j := range s.jobs {
		if !j.Enabled && !all {
			continue
		}
		c := *j
		c.EffectiveAgentID, c.Status = "main", "idle"
		if !c.Enabled {
			c.Status = "disabled"
		}
		jobs = append(jobs, c)
		previews[c.ID] = map[string]any{"label": "not requested", "detail": "not requested"}
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		na, nb := jobs[a].NextRunAtMs, jobs[b].NextRunAtMs
		if (na == 0) != (nb == 0) {
			return nb == 0
		}
		return na < nb
	})
	return map[string]any{"jobs": jobs, "snapshotRevision": "sha256:fake-" + randomHex(8), "total": len(jobs),
		"offset": 0, "limit": 200, "hasMore": false, "nextOffset": nil, "deliveryPreviews": previews}
}

func (s *cronStore) remove(id string) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range s.jobs {
		if j.ID != id {
			continue
		}
		if strings.HasPrefix(j.DeclarationKey, "heartbeat:") || strings.HasPrefix(j.DeclarationKey, "skill-collection-review:") {
			return nil, fmt.Errorf("Error: system-owned monitor jobs cannot be removed by cron clients")
		}
		s.jobs = append(s.jobs[:i], s.jobs[i+1:]...)
		s.save()
		return map[string]any{"ok": true, "removed": true}, nil
	}
	return nil, fmt.Errorf("Automation not found: %s. Run `openclaw cron list` to see recent automation ids.", id)
}

func randomUUID() string {
	h := randomHex(16)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}
