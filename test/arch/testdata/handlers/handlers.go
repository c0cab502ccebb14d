// Package handlers plants violations of the door's rule (TestHandlerRuleFiresOnPlantedViolations):
// a REST handler that reaches the operations' dependencies itself, however it holds them,
// instead of calling an operation. The lines marked want are what the rule must report; the
// rest is what a handler may do.
package handlers

import (
	"context"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/ops"
)

// Options embeds the operations' dependencies, as the facade's do.
type Options struct {
	ops.Deps
	Name string
}

type server struct {
	opts Options
	ops  *ops.Ops
}

// Legal: wiring hands the dependencies whole to the operations; a handler calls one and
// reads the options that are the door's own (the clock, the log, its own fields).
func newServer(opts Options) *server {
	deps := opts.Deps
	deps.Log = opts.Log.WithName("door")
	return &server{opts: opts, ops: ops.New(deps)}
}

func (s *server) listAgents(ctx context.Context) ([]agentsv1.Agent, error) {
	_ = s.opts.Now()
	_ = s.opts.Name
	return s.ops.Agents(ctx, ops.Scope{Namespace: "ws"})
}

// Illegal: the client through the options (promoted or by the embedded field's name).
func (s *server) getAgent(ctx context.Context, name string) error {
	var a agentsv1.Agent
	return s.opts.Client.Get(ctx, client.ObjectKey{Name: name}, &a) // want: opts.Client
}

func (s *server) getAgentByDeps(ctx context.Context, name string) error {
	var a agentsv1.Agent
	return s.opts.Deps.APIReader.Get(ctx, client.ObjectKey{Name: name}, &a) // want: Deps.APIReader
}

// Illegal: the runtime held in a variable, returned by a helper.
func (s *server) runtime() runtime.Runtime {
	rt := s.opts.Runtime // want: opts.Runtime
	return rt
}

// Illegal: a client that came some other way (a parameter), and client-go's conflict retry.
func listWith(ctx context.Context, c client.Client) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { // want: retry
		return c.List(ctx, &agentsv1.AgentList{}) // want: a client's method
	})
}
