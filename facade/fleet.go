package facade

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// The fleet view (an addition beyond the contract): GET /v0/fleet answers the workspace's
// agents with what they run, use and spend; GET /v0/fleet/stream streams the same as
// server-sent events: `event: snapshot` with everything, then `event: update` with the
// workspace, the pools and only the agents that changed (and the ids of those removed).
const (
	fleetTick      = time.Second      // how often a stream reads the fleet
	fleetKeepAlive = 15 * time.Second // keep-alive comments
	fleetWriteWait = 30 * time.Second // a client that reads nothing this long is dropped
)

type fleetView struct {
	At        time.Time          `json:"at"`
	Workspace fleetWorkspaceView `json:"workspace"`
	Agents    []fleetAgentView   `json:"agents"`
	Pools     []fleetPoolView    `json:"pools"`
	// Metrics says where memory and CPU come from: "runtime" or "n/a" (this runtime does not
	// measure them).
	Metrics string `json:"metrics"`
	// Currency is the platform's model price table's, in which spend and spend budgets count
	// (absent: the platform prices nothing).
	Currency string `json:"currency,omitempty"`
}

type modelUseView struct {
	TokensToday       int64  `json:"tokensToday"`
	RequestsToday     int64  `json:"requestsToday"`
	TokensPerDay      int64  `json:"tokensPerDay,omitempty"`
	TokensLeft        *int64 `json:"tokensLeft,omitempty"` // absent: unlimited
	RequestsPerMinute int64  `json:"requestsPerMinute,omitempty"`
	// CostMicrosToday is today's spend by the platform's model price table, in millionths of
	// currency (both absent: nothing priced today, or no price table); the requests of
	// models the table has no price for count in unpricedRequestsToday.
	CostMicrosToday       int64  `json:"costMicrosToday,omitempty"`
	Currency              string `json:"currency,omitempty"`
	UnpricedRequestsToday int64  `json:"unpricedRequestsToday,omitempty"`
	// CostMicrosPerDay is the spend budget, CostMicrosLeft what remains of it today (absent:
	// unlimited).
	CostMicrosPerDay int64  `json:"costMicrosPerDay,omitempty"`
	CostMicrosLeft   *int64 `json:"costMicrosLeft,omitempty"`
}

type fleetWorkspaceView struct {
	Name string `json:"name"`
	modelUseView
}

type fleetAgentView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Phase      string     `json:"phase"`
	Asleep     bool       `json:"asleep"`
	NextWakeAt *time.Time `json:"nextWakeAt,omitempty"`
	// MemoryBytes and CPUPercent are absent when not available.
	MemoryBytes      *int64   `json:"memoryBytes,omitempty"`
	MemoryLimitBytes int64    `json:"memoryLimitBytes,omitempty"`
	CPUPercent       *float64 `json:"cpuPercent,omitempty"`
	modelUseView
	EngineVersion string `json:"engineVersion,omitempty"`
	Rendering     string `json:"rendering,omitempty"`
	Restarts      int32  `json:"restarts"`
	// ErrorsLastHour counts the agent's Warning events of the last hour.
	ErrorsLastHour int64 `json:"errorsLastHour"`
}

type fleetPoolView struct {
	Name          string `json:"name"`
	EngineVersion string `json:"engineVersion,omitempty"`
	Desired       int32  `json:"desired"`
	Replicas      int32  `json:"replicas"`
	Ready         int32  `json:"ready"`
	Booting       int32  `json:"booting"`
	Claimed       int64  `json:"claimed"`
	Healthy       bool   `json:"healthy"`
}

func viewModelUse(m ops.ModelUse) modelUseView {
	v := modelUseView{TokensToday: m.TokensToday, RequestsToday: m.RequestsToday,
		TokensPerDay: m.TokensPerDay, RequestsPerMinute: m.RequestsPerMinute,
		CostMicrosToday: m.CostMicrosToday, Currency: m.Currency, UnpricedRequestsToday: m.UnpricedToday,
		CostMicrosPerDay: m.CostMicrosPerDay}
	if m.CostMicrosPerDay > 0 {
		left := m.CostMicrosLeft
		v.CostMicrosLeft = &left
	}
	if m.TokensPerDay > 0 {
		left := m.TokensLeft
		v.TokensLeft = &left
	}
	return v
}

func viewFleetAgent(a ops.FleetAgent) fleetAgentView {
	v := fleetAgentView{ID: a.ID, Name: a.Name, Phase: string(a.Phase), Asleep: a.Asleep, NextWakeAt: a.NextWakeAt,
		modelUseView: viewModelUse(a.ModelUse), EngineVersion: a.EngineVersion, Rendering: string(a.Rendering),
		Restarts: a.Restarts, ErrorsLastHour: a.Errors}
	if a.Measured {
		mem := a.MemoryBytes >> 20 << 20 // MiB: a byte's change is no update
		v.MemoryBytes, v.MemoryLimitBytes = &mem, a.MemoryLimitBytes
	}
	if a.CPUKnown {
		cpu := float64(int64(a.CPUPercent*10+0.5)) / 10
		v.CPUPercent = &cpu
	}
	return v
}

func viewFleet(f ops.Fleet) fleetView {
	v := fleetView{At: f.At, Workspace: fleetWorkspaceView{Name: f.Workspace.Name, modelUseView: viewModelUse(f.Workspace.ModelUse)},
		Agents: make([]fleetAgentView, 0, len(f.Agents)), Pools: make([]fleetPoolView, 0, len(f.Pools)), Metrics: "n/a", Currency: f.Currency}
	if f.Metered {
		v.Metrics = "runtime"
	}
	for _, a := range f.Agents {
		v.Agents = append(v.Agents, viewFleetAgent(a))
	}
	for _, p := range f.Pools {
		v.Pools = append(v.Pools, fleetPoolView(p))
	}
	return v
}

// getFleet answers the workspace's fleet once.
func (s *Server) getFleet(r *http.Request, c *Caller) (*Response, error) {
	f, err := s.ops.Fleet(r.Context(), c.scope(), c.Namespace)
	if err != nil {
		return nil, err
	}
	return ok(viewFleet(f))
}

// fleetStream streams the workspace's fleet as server-sent events (one stream for the
// whole fleet, not a request per agent).
func (s *Server) fleetStream(r *http.Request, c *Caller) (*Response, error) {
	w := s.ops.WatchFleet(c.scope(), c.Namespace, 0)
	first, err := w.Next(r.Context())
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	return &Response{Status: http.StatusOK, Header: h, Stream: func(rw http.ResponseWriter) {
		fs := &fleetSender{w: rw, rc: http.NewResponseController(rw), rows: map[string][]byte{}}
		rw.WriteHeader(http.StatusOK)
		if !fs.snapshot(viewFleet(first)) {
			return
		}
		s.streamFleet(r.Context(), fs, w)
	}}, nil
}

// streamFleet sends the fleet's changes every fleetTick until the client leaves.
func (s *Server) streamFleet(ctx context.Context, fs *fleetSender, w *ops.FleetWatch) {
	tick, keep := time.NewTicker(fleetTick), time.NewTicker(fleetKeepAlive)
	defer tick.Stop()
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if !fs.send([]byte(": keep-alive\n\n")) {
				return
			}
		case <-tick.C:
			f, err := w.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fs.send([]byte("event: error\ndata: " + msgUnavailable + "\n\n"))
				}
				return
			}
			if !fs.update(viewFleet(f)) {
				return
			}
		}
	}
}

// fleetSender writes one stream's events; rows are the agents as last sent (JSON), head
// the workspace and pools as last sent.
type fleetSender struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	rows map[string][]byte
	head []byte
}

// fleetUpdate is an update event's data.
type fleetUpdate struct {
	At        time.Time          `json:"at"`
	Workspace fleetWorkspaceView `json:"workspace"`
	Pools     []fleetPoolView    `json:"pools"`
	Metrics   string             `json:"metrics"`
	Currency  string             `json:"currency,omitempty"`
	Agents    []json.RawMessage  `json:"agents"`
	Removed   []string           `json:"removed"`
}

func (fs *fleetSender) snapshot(v fleetView) bool {
	for _, a := range v.Agents {
		fs.rows[a.ID], _ = json.Marshal(a)
	}
	fs.head, _ = json.Marshal([]any{v.Workspace, v.Pools, v.Metrics, v.Currency})
	b, err := json.Marshal(v)
	return err == nil && fs.event("snapshot", b)
}

// update sends what changed since the last event, if anything did.
func (fs *fleetSender) update(v fleetView) bool {
	u := fleetUpdate{At: v.At, Workspace: v.Workspace, Pools: v.Pools, Metrics: v.Metrics, Currency: v.Currency,
		Agents: []json.RawMessage{}, Removed: []string{}}
	seen := make(map[string]bool, len(v.Agents))
	for _, a := range v.Agents {
		seen[a.ID] = true
		b, err := json.Marshal(a)
		if err != nil {
			return false
		}
		if !bytes.Equal(fs.rows[a.ID], b) {
			fs.rows[a.ID] = b
			u.Agents = append(u.Agents, b)
		}
	}
	for id := range fs.rows {
		if !seen[id] {
			delete(fs.rows, id)
			u.Removed = append(u.Removed, id)
		}
	}
	head, _ := json.Marshal([]any{v.Workspace, v.Pools, v.Metrics, v.Currency})
	if len(u.Agents) == 0 && len(u.Removed) == 0 && bytes.Equal(head, fs.head) {
		return true
	}
	fs.head = head
	b, err := json.Marshal(u)
	return err == nil && fs.event("update", b)
}

func (fs *fleetSender) event(name string, data []byte) bool {
	var buf bytes.Buffer
	buf.Grow(len(data) + len(name) + 16)
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteString("\ndata: ")
	buf.Write(data) // JSON has no raw newline
	buf.WriteString("\n\n")
	return fs.send(buf.Bytes())
}

func (fs *fleetSender) send(b []byte) bool {
	_ = fs.rc.SetWriteDeadline(time.Now().Add(fleetWriteWait))
	_, err := fs.w.Write(b)
	return err == nil && fs.rc.Flush() == nil
}

// fleetRoutes: the workspace's fleet, once or as a stream (agents:read; not for an agent's
// own credentials, which see one agent only).
func (s *Server) fleetRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead}
	s.handle("GET /v0/fleet", read, s.getFleet)
	s.handle("GET /v0/fleet/stream", read, s.fleetStream)
	s.limitRoutes()
}
