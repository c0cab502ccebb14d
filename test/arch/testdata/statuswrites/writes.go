// Package statuswrites plants violations of the status-write rule (TestStatusWriteRuleFiresOnPlantedViolations):
// each line marked `want:` must be reported, no other.
package statuswrites

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

const notAManager = "agentplane-controller"

func writes(ctx context.Context, c client.Client, a *agentsv1.Agent, p client.Patch) {
	// Correct: the documented manager, in its package.
	_ = c.Status().Patch(ctx, a, p, client.FieldOwner(agentsv1.ControllerFieldManager))
	_ = c.SubResource("status").Update(ctx, a, client.FieldOwner(agentsv1.ControllerFieldManager))
	// Not a status write: another subresource.
	_ = c.SubResource("scale").Update(ctx, a)

	_ = c.Status().Update(ctx, a) // want: no field owner
	sw := c.Status()
	_ = sw.Patch(ctx, a, p)                                                             // want: a writer held in a variable, no field owner
	_ = statusOf(c).Update(ctx, a)                                                      // want: a writer from a helper, no field owner
	_ = c.Status().Patch(ctx, a, p, client.FieldOwner("agentplane-controller"))         // want: an owner that is a string
	_ = c.Status().Patch(ctx, a, p, client.FieldOwner(notAManager))                     // want: a constant outside api/v1alpha1
	_ = c.Status().Patch(ctx, a, p, client.FieldOwner(agentsv1.QuotaFieldManager))      // want: a manager of other packages
	_ = c.Status().Patch(ctx, a, p, client.FieldOwner(agentsv1.ModelProxyFieldManager)) // want: an undocumented manager
}

func statusOf(c client.Client) client.SubResourceWriter { return c.Status() }
