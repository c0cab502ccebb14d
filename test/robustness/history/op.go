// Package history records the operations of the robustness suite (test/robustness) and checks
// a recorded history against a serial model with a linearizability checker (Porcupine).
//
// The traffic side fills Ops; the checker side partitions them (a workspace's agents and
// secrets, the global subdomain namespace, ...) and checks each partition. An Op whose answer
// is ambiguous (no answer, a timeout, a reset, a 503 or another 5xx) may or may not have
// taken effect, as etcd's robustness suite treats it.
package history

import (
	"sync"
	"time"
)

// Kind names an operation of the traffic.
type Kind string

// The operations the traffic drives. The fields of Op each uses are noted.
const (
	// CreateAgent: POST /v0/agents (Workspace, Name). ID is the agent id of a 201.
	CreateAgent Kind = "create-agent"
	// DeleteAgent: DELETE /v0/agents/{Agent} (Workspace, Agent).
	DeleteAgent Kind = "delete-agent"
	// CreateSecret: POST /v0/secrets (Workspace, Name). ID is the secret id of a 201.
	CreateSecret Kind = "create-secret"
	// DeleteSecret: DELETE /v0/secrets/{Target} (Workspace, Name of the secret, Target its id).
	DeleteSecret Kind = "delete-secret"
	// CreateDomain: POST /v0/agents/{Agent}/domains {"subdomain": Name} (Workspace, Agent,
	// Name). ID is the domain id of a 2xx.
	CreateDomain Kind = "create-domain"
	// DeleteDomain: DELETE /v0/agents/{Agent}/domains/{Target} (Workspace, Agent, Name of the
	// subdomain, Target the domain id).
	DeleteDomain Kind = "delete-domain"
	// AttachSkill / DetachSkill: POST /v0/agents/{Agent}/skills {"skillCids": [Name]} and
	// DELETE /v0/agents/{Agent}/skills/{Target} (Workspace, Agent, Name the skill CID, Target
	// the skill id).
	AttachSkill Kind = "attach-skill"
	DetachSkill Kind = "detach-skill"
	// SetChannel / DeleteChannel: POST and DELETE /v0/agents/{Agent}/channels/{Name}
	// (Workspace, Agent, Name the channel type).
	SetChannel    Kind = "set-channel"
	DeleteChannel Kind = "delete-channel"
)

// Op is one client operation: what was asked, when, and what came back.
type Op struct {
	// Client is the traffic client (one operation at a time per client) and Facade the
	// replica it went to.
	Client, Facade int
	Kind           Kind
	Workspace      string
	Agent          string
	Name           string
	Target         string
	// Call and Return are nanoseconds since the history's start.
	Call, Return int64
	// Status is the HTTP status; 0 when no answer came (timeout, reset, refused).
	Status int
	// Error is the contract's error string of a 4xx/5xx answer.
	Error string
	// ID is the id a create answered.
	ID string
	// RequestID is the X-Request-Id the request was sent with: the facades' logs name it.
	RequestID string `json:",omitempty"`
	// Outcome is, for an ambiguous create, what the traffic learned once it stopped: whether
	// its object came to exist.
	Outcome Outcome `json:",omitempty"`
}

// Outcome is what became of an ambiguous create.
type Outcome string

const (
	// OutcomeUnknown: not known; the create may or may not have taken effect.
	OutcomeUnknown Outcome = ""
	// Landed: its object exists: the create took effect at some point after its call.
	Landed Outcome = "landed"
	// Lost: its object never existed. The platform may still have held its slot or name for a
	// while (a reservation whose write's outcome it could not know, kept until it is stale),
	// then given it back.
	Lost Outcome = "lost"
)

// Ambiguous reports whether the operation may or may not have taken effect.
func (o Op) Ambiguous() bool { return o.Status == 0 || o.Status >= 500 }

// Recorder collects Ops from concurrent clients.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Since is the history time of t.
func (r *Recorder) Since(t time.Time) int64 { return t.Sub(r.start).Nanoseconds() }

// Now is the history time now.
func (r *Recorder) Now() int64 { return r.Since(time.Now()) }

// Add records a completed operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

// Ops returns a copy of the history so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}
