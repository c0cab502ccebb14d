// Package engine knows an agent engine's command line and files. It runs nothing itself:
// it builds commands that a runtime executes in the agent's home (a local process or a pod)
// and parses what they print. The Agent controller never talks to an engine directly.
package engine

import (
	"context"
	"errors"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// PinnedVersion is the OpenClaw release this platform is built and tested against:
// hack/install-engine.sh installs it (its PINNED_VERSION, held equal by a test) and `agentplane
// manager` offers it unless told otherwise.
const PinnedVersion = "2026.9.6"

// Command is one engine CLI invocation. The runtime prefixes the engine binary, runs it in the
// agent's home with the engine's environment (Engine.Env) plus Env, and enforces Timeout
// (0 = none: the gateway runs in the foreground until stopped).
//
// Env values are literal: the runtime passes them as they are and expands nothing. An engine
// that needs a path in the agent's home uses a form the engine itself resolves against the
// home it gets from Engine.Env (OpenClaw expands a leading "~/").
type Command struct {
	Args    []string
	Env     map[string]string
	Timeout time.Duration
}

// Layout names the engine's files, relative to the agent's home directory.
type Layout struct {
	// StateDir holds everything the engine keeps (".openclaw").
	StateDir string
	// ConfigPath is the engine config file (".openclaw/openclaw.json").
	ConfigPath string
	// WorkspaceDir is the agent's home: what console exec, uploads and snapshots see.
	WorkspaceDir string
	// SkillsDir is where skill bundles are unpacked (inside the workspace).
	SkillsDir string
}

// GatewayParams describe how to run the gateway.
type GatewayParams struct {
	Port int
	// Bind is "loopback" (local runtime) or "lan" (pods).
	Bind string
}

// Identity is what the engine config says about the agent: its display name and its
// profile (description, vibe, emoji; a field added to AgentProfile reaches the engine
// without an edit here).
type Identity struct {
	Name string
	agentsv1.AgentProfile
}

// IdentityOf is the identity of agent, the one place that builds it.
func IdentityOf(agent *agentsv1.Agent) Identity {
	return Identity{Name: agent.Spec.DisplayName, AgentProfile: agent.Spec.AgentProfile}
}

// ValidateResult is the engine's verdict on a candidate config.
type ValidateResult struct {
	Valid  bool     `json:"valid"`
	Issues []string `json:"issues,omitempty"`
	// Output is the validator's raw output (JSON), returned to REST callers.
	Output string `json:"output"`
}

// Schedule of a task: exactly one of Cron, EveryMs, At.
type Schedule struct {
	Kind    string `json:"kind"` // cron | every | at
	Expr    string `json:"expr,omitempty"`
	TZ      string `json:"tz,omitempty"`
	EveryMs int64  `json:"everyMs,omitempty"`
	At      string `json:"at,omitempty"`
}

// Payload of a task: an agent turn with a message, or a system event with text.
type Payload struct {
	Kind    string `json:"kind"` // agentTurn | systemEvent
	Message string `json:"message,omitempty"`
	Text    string `json:"text,omitempty"`
}

// Task is a scheduled job of the engine's cron.
type Task struct {
	ID        string   `json:"id,omitempty"`
	Name      string   `json:"name"`
	Enabled   bool     `json:"enabled"`
	Schedule  Schedule `json:"schedule"`
	Payload   Payload  `json:"payload"`
	NextRunAt string   `json:"nextRunAt,omitempty"`
	CreatedAt string   `json:"createdAt,omitempty"`
	// Running: the engine runs the task now (for the sleep policy; not in the contract's
	// task shape).
	Running bool `json:"-"`
}

// Devices are the gateway's paired and pending devices, as the engine prints them.
type Devices struct {
	Pending []map[string]any `json:"pending"`
	Paired  []map[string]any `json:"paired"`
}

// Channel is a chat channel as written into the engine config. Tokens are never written in
// plaintext: the config refers to environment variables that the runtime sets.
type Channel struct {
	Type        string // telegram | slack | discord | whatsapp
	Enabled     bool
	BotTokenEnv string // env var holding the bot token ("" for whatsapp)
	AppTokenEnv string // env var holding the slack app token
	DMPolicy    string
	AllowFrom   []string
	// APIRoot, when set, is the platform's channel relay (telegram, slack, discord): the
	// channel calls its API there with BotToken, the agent's relay token, written in the config
	// as it is (it is worthless outside the relay), instead of the bot token named by
	// BotTokenEnv. For discord it is the relay's versioned REST base (its .../api/v10), which
	// the engine also discovers the relay's gateway websocket from.
	APIRoot, BotToken string
	// RelayURL (slack, with APIRoot) is the relay's websocket: the platform holds the Slack
	// app's Socket Mode connection and forwards the channel's events there; the gateway
	// authenticates with BotToken and names itself GatewayID. The channel needs no app token.
	RelayURL, GatewayID string
}

// ModelProvider is a model provider whose requests go through the platform's model proxy:
// the config points the provider at BaseURL with APIKey, the agent's proxy credential (the
// real key never reaches the agent).
type ModelProvider struct {
	Name    string // the engine's provider id (anthropic, openai, ...)
	BaseURL string
	APIKey  string
}

// Render is what RenderConfig builds an engine config file from.
type Render struct {
	// Base is the user's config (nil: Live as it is); Live the file in the agent's home now.
	Base, Live []byte
	// Managed are the channel types the platform owns in the file: each one not in Channels
	// is removed, then each of Channels is written (tokens as references to environment
	// variables).
	Managed  []string
	Channels []Channel
	// ModelProviders are pointed at the model proxy; any other provider entry the proxy owned
	// (its apiKey a model-proxy credential) loses its proxy URL and credential.
	ModelProviders []ModelProvider
}

// Errors a runtime maps to HTTP answers.
var (
	// ErrCLI: the engine CLI ran and failed (non-zero exit, unparseable output).
	ErrCLI = errors.New("engine CLI failed")
	// ErrInvalidConfig: the config is not JSON / JSON5 the engine can read.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidInput: a Task or Channel handed to the engine is incomplete or malformed.
	ErrInvalidInput = errors.New("invalid input")
	// ErrGatewayUnreachable: the engine CLI applies its change through the agent's running
	// gateway, which did not answer (it was restarting, say): the agent is not ready yet, the
	// command is not at fault.
	ErrGatewayUnreachable = errors.New("the agent's gateway did not answer the engine CLI")
	// ErrPluginRejected: the plugin cannot be installed as asked, whenever it is tried again
	// (the registry does not have that package or version, the engine's install policy
	// blocks it). A plugin install failing otherwise may succeed on a later try.
	ErrPluginRejected = errors.New("the plugin cannot be installed")
)

// Engine is one agent engine (OpenClaw).
type Engine interface {
	// Name is the engine name of Agent.spec.engine.name.
	Name() string
	// Layout is where the engine keeps its files in the agent's home.
	Layout() Layout
	// ChannelEnv is the environment a channel needs beside its config (a relayed channel's API
	// origin where the engine reads it from the environment only); nil for none. It names no
	// agent: the platform gives it to every gateway from its start (local.Options.GatewayEnv).
	ChannelEnv(ch Channel) map[string]string
	// Env is the environment every engine process of the agent gets (gateway and CLI).
	// home is the agent's home directory as the process sees it; gatewayPort is the port the
	// agent's gateway listens on (GatewayParams.Port), which CLI processes need to reach the
	// running gateway (0 = the engine's default port).
	Env(home string, gatewayPort int) map[string]string
	// GatewayCommand runs the gateway in the foreground.
	GatewayCommand(p GatewayParams) Command
	// InitialConfig is the config a new agent starts with: local gateway mode, token auth with
	// gatewayToken, the agent's identity, no channels.
	InitialConfig(id Identity, gatewayToken string) ([]byte, error)
	// SetGatewayToken returns config with the gateway token replaced (hot-reloaded by the engine).
	SetGatewayToken(config []byte, token string) ([]byte, error)
	// RenderConfig builds the engine config file from r: its base with what the engine and
	// the runtime own taken from the live file, the platform's channels and model providers
	// (Render). The Agent controller is its only caller that writes the result.
	RenderConfig(r Render) ([]byte, error)
	// UserConfig is the part of config the user owns: without what the engine and the
	// runtime own and without the channel types in managed (the platform renders those).
	UserConfig(config []byte, managed []string) ([]byte, error)
	// RedactConfig hides secrets (the gateway token) in a config shown to clients;
	// RestoreRedacted puts the current secrets back into a config a client sends.
	RedactConfig(config []byte) ([]byte, error)
	RestoreRedacted(candidate, current []byte) ([]byte, error)
	// ValidateCommand validates the config file at configPath, relative to the agent's home
	// (e.g. ".openclaw/candidate.json"). The command locates the file through the home in
	// Engine.Env: the runtime needs to make no path absolute.
	ValidateCommand(configPath string) Command
	ParseValidate(stdout []byte, exitCode int) (ValidateResult, error)
	// Cron.
	CronAddCommand(t Task) (Command, error)
	ParseCronAdd(stdout []byte, exitCode int) (Task, error)
	CronListCommand() Command
	// ParseCronList returns the user's tasks; the engine's own system jobs are left out.
	ParseCronList(stdout []byte, exitCode int) ([]Task, error)
	// Devices.
	DevicesListCommand() Command
	ParseDevices(stdout []byte, exitCode int) (Devices, error)
	// Plugins. PluginInstallCommand installs the plugin package spec ("name@version") from
	// the registry into the agent's home; ParsePluginInstall is nil once it is there (a
	// plugin installed before included), ErrGatewayUnreachable, ErrPluginRejected (with
	// ErrCLI), or ErrCLI.
	PluginInstallCommand(spec string) Command
	ParsePluginInstall(stdout, stderr []byte, exitCode int) error
	// Version.
	VersionCommand() Command
	ParseVersion(stdout []byte) (string, error)
	// Healthy reports whether the gateway at baseURL answers its health check (the JSON body is
	// checked: unknown paths answer 200 too).
	Healthy(ctx context.Context, baseURL string) error
}
