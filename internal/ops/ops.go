// Package ops holds the operations both doors and the CLI share: what a call to the REST
// facade does to agentplane's custom resources (read them, change their specs, wait for the
// controllers' acknowledgement), with plain Go signatures. The facade's handlers decode a
// request, call one operation and encode its result; the operations know nothing of HTTP.
// Their failures are *Error values of one vocabulary (Code), which each door maps to its own
// terms.
//
// The operations never write status: the controllers own it (docs/ARCHITECTURE.md).
package ops

import (
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Deps are what the operations use.
type Deps struct {
	// Client reads from the manager's informer cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly (cache misses, read-your-writes). Nil:
	// Client.
	APIReader client.Reader
	// Informers are the informers behind Client's cache (the manager's cache): waits for a
	// controller's acknowledgement wake on their events. Nil: waits re-read every second.
	Informers cache.Informers
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log receives what operations note for operators (never secrets).
	Log logr.Logger

	// Admission applies the rules agents and domains pass before they are created (limits,
	// engine version, template expansion, host claims); the controllers apply the same.
	Admission *admission.Admitter
	// Runtime runs commands in agents' homes; Engine knows the engine's CLI.
	Runtime runtime.Runtime
	Engine  engine.Engine
	// ProvisionTimeout bounds how long agent create and restart wait for the gateway.
	ProvisionTimeout time.Duration
	// ExecTimeout bounds console commands.
	ExecTimeout time.Duration
	// MaxAgentUploadBytes bounds a file uploaded into an agent's home.
	MaxAgentUploadBytes int64
	// Sealer encrypts secret values (nil: `Secrets not configured`).
	Sealer *secrets.Sealer
	// Files stores /v3 files (nil: `Storage not configured`).
	Files storage.Store
	// ClawHubURL is the skill registry installs download from ("" = https://clawhub.ai).
	ClawHubURL string
	// ModelMeter is the model proxy's count of each agent's usage, which chat turns report
	// (nil: no proxy).
	ModelMeter ModelMeter
	// Domains configure the domain operations (brand, apps domain, verification key); they
	// must agree with the domain controller's settings.
	Domains DomainOptions
}

// Ops runs the operations. Its methods are safe for concurrent use.
type Ops struct {
	d Deps
	// waiters wake the waits for controllers' acknowledgements (WaitFor).
	waiters waiters
	// activity remembers the last-active stamps this replica wrote (Awaken).
	activity activityStamps
	// auth is authentication's bounded reads (AuthLookup).
	auth authLookup
	// chats serializes each agent's conversation index writes (chat_store.go).
	chats chatLocks
}

// New returns the operations over d.
func New(d Deps) *Ops {
	if d.APIReader == nil {
		d.APIReader = d.Client
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	guardNames(&d)
	o := &Ops{d: d}
	o.auth.o = o
	return o
}

// Scope is whose objects an operation acts on: a workspace's namespace, and, for a
// credential bound to one agent (its gateway token or a platform token), that agent only.
type Scope struct {
	// Namespace holds the workspace's objects.
	Namespace string
	// OnlyAgent, when set, is the one agent the caller may act on: any other reads as not
	// found.
	OnlyAgent string
}
