package stress

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/admission"
	"github.com/agentplane/agentplane/internal/platform"
)

// quiesceTimeout bounds how long the controllers may take to settle after the traffic.
const quiesceTimeout = 90 * time.Second

// validateAfterTraffic checks the final state once the controllers settled: no agent is left
// half-deleted, the kubectl view (the API server) and the REST view of each workspace's agents
// agree, and every subdomain that exists holds its host claim.
//
// Not asserted yet (issue 21 notes them): that the workspace reserves slots for exactly the
// agents that exist (a create cut by the API-server crash leaves a reservation that admission
// frees only once the limit is hit; issue 16 replaces that storage with a recount), and that
// every acknowledged create/delete holds object by object.
func validateAfterTraffic(t *testing.T, spaces []string, toks map[string]string, subdomainPrefix string) {
	t.Helper()
	for _, ws := range spaces {
		err := eventually(quiesceTimeout, 500*time.Millisecond, func() error {
			var agents agentsv1.AgentList
			if err := k8s.List(bg(), &agents, client.InNamespace(ws)); err != nil {
				return err
			}
			var stored []string
			for _, a := range agents.Items {
				if a.DeletionTimestamp != nil {
					return fmt.Errorf("agent %s is still being deleted", a.Name)
				}
				stored = append(stored, a.Name)
			}
			r := call(mainURL, "GET", "/v0/agents", toks[ws], nil)
			if r.Status != 200 {
				return fmt.Errorf("list agents: %s", r)
			}
			var listed []string
			for _, a := range r.Body["agents"].([]any) {
				listed = append(listed, fmt.Sprint(a.(map[string]any)["id"]))
			}
			slices.Sort(stored)
			slices.Sort(listed)
			if !slices.Equal(stored, listed) {
				return fmt.Errorf("%s: the API server holds agents %v, REST lists %v", ws, stored, listed)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	// Host claims: exactly the subdomains of the traffic's Domains that exist.
	var leases coordinationv1.LeaseList
	if err := k8s.List(bg(), &leases, client.InNamespace(platform.DefaultSystemNamespace), client.HasLabels{agentsv1.LabelClaim}); err != nil {
		t.Fatal(err)
	}
	claimed := map[string]bool{}
	for _, l := range leases.Items {
		if h := l.Annotations[agentsv1.AnnotationClaimHost]; strings.HasPrefix(h, subdomainPrefix) {
			claimed[strings.SplitN(h, ".", 2)[0]] = true
		}
	}
	held := map[string]bool{}
	var domains agentsv1.DomainList
	for _, ws := range spaces {
		if err := k8s.List(bg(), &domains, client.InNamespace(ws)); err != nil {
			t.Fatal(err)
		}
		for _, d := range domains.Items {
			held[d.Spec.Subdomain] = true
		}
	}
	for name := range held {
		if !claimed[name] {
			t.Errorf("subdomain %s exists without its host claim (claims %v)", name, claimed)
		}
	}
	for name := range claimed {
		if !held[name] {
			// A request cut by the crash between its claim and its Domain (or whose release
			// failed while the API server was down) leaves a claim that the next claimant
			// takes over once it is ClaimStaleAfter old (docs/GUARANTEES.md).
			t.Logf("host claim %s has no Domain: stale, taken over after %s", name, admission.ClaimStaleAfter)
		}
	}
}
