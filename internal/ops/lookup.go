package ops

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// MsgAgentNotFound is the contract's answer for an agent the caller cannot see.
const MsgAgentNotFound = "Agent not found"

// specRetry re-reads and re-applies a spec change on conflicts: concurrent attaches and
// deletes and the controllers' status writes all bump the resourceVersions, more often than
// retry.DefaultRetry's five quick attempts absorb (the caller would get a bare Conflict).
var specRetry = wait.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}

// Agent reads the workspace's agent from the API server; an agent of another workspace, or
// another agent than a bound credential's, is simply not found.
func (o *Ops) Agent(ctx context.Context, t Scope, id string) (*agentsv1.Agent, error) {
	if t.OnlyAgent != "" && t.OnlyAgent != id {
		return nil, Fail(NotFound, MsgAgentNotFound)
	}
	a := &agentsv1.Agent{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: id}, a); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, Because(NotFound, MsgAgentNotFound, err)
		}
		return nil, err
	}
	return a, nil
}
