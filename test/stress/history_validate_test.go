package stress

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/test/robustness/history"
)

// quiesceTimeout bounds how long the controllers may take to settle after the traffic,
// recount included.
const quiesceTimeout = 90 * time.Second

// validateAfterTraffic checks the final state once the controllers settled:
//   - no agent is left half-deleted, and the kubectl view (the API server) and the REST view
//     of each workspace's agents agree;
//   - every acknowledged create holds and every acknowledged delete is gone, object by object
//     (agents, secrets, domains), unless a later ambiguous delete may have removed it;
//   - after a recount, reservations and claims equal the objects that exist: each workspace
//     reserves agent slots for exactly its agents, each agent domain slots for exactly its
//     Domains, and host claims are exactly the Domains' subdomains;
//   - nothing of a deleted agent is left: no Secret labelled for it, no runtime directory, no
//     gateway process.
func validateAfterTraffic(t *testing.T, tr *historyTraffic, ops []history.Op) {
	t.Helper()
	k8s := tr.c.cp.Client
	for _, ws := range tr.spaces {
		err := eventually(quiesceTimeout, 500*time.Millisecond, func() error {
			stored, err := agentNames(tr, ws)
			if err != nil {
				return err
			}
			listed, err := restKeys(tr.c.facade(t), "/v0/agents", tr.toks[ws], "agents", "id")
			if err != nil {
				return err
			}
			if !slices.Equal(stored, listed) {
				return fmt.Errorf("%s: the API server holds agents %v, REST lists %v", ws, stored, listed)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	validateAcknowledged(t, tr, ops)
	if err := eventually(quiesceTimeout, time.Second, func() error { return reservationsMatch(tr) }); err != nil {
		t.Error(err)
	}
	live := map[string]bool{}
	for _, ws := range tr.spaces {
		names, _ := agentNames(tr, ws)
		for _, n := range names {
			live[ws+"/"+n] = true
		}
		var secrets corev1.SecretList
		if err := k8s.List(bg(), &secrets, client.InNamespace(ws), client.HasLabels{agentsv1.LabelAgent}); err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			if !live[ws+"/"+s.Labels[agentsv1.LabelAgent]] {
				t.Errorf("Secret %s/%s of deleted agent %s is left", ws, s.Name, s.Labels[agentsv1.LabelAgent])
			}
		}
		dirs, _ := os.ReadDir(filepath.Join(tr.c.state, "agents", ws))
		for _, d := range dirs {
			if !live[ws+"/"+d.Name()] {
				t.Errorf("runtime directory of deleted agent %s/%s is left", ws, d.Name())
			}
		}
	}
	for key, pids := range gatewayPIDs(tr.c.state) {
		if !live[key] && slices.Contains(tr.spaces, strings.Split(key, "/")[0]) {
			t.Errorf("gateway of deleted agent %s still runs: pids %v", key, pids)
		}
	}
}

// resolveOutcomes tells the checker what became of the ambiguous creates, once the traffic
// stopped and the platform settled: an agent create landed if an agent of its name (each
// create's own) exists, and was lost if none does; a domain create was lost if no Domain holds
// its subdomain and no delete of that subdomain may have run after it (otherwise its outcome
// stays unknown). A lost create may have held its slot or name until its reservation went
// stale, as the platform does for a create whose outcome it could not know.
func resolveOutcomes(t *testing.T, tr *historyTraffic, ops []history.Op) []history.Op {
	t.Helper()
	names, subdomains := map[string]bool{}, map[string]bool{}
	for _, ws := range tr.spaces {
		var agents agentsv1.AgentList
		var domains agentsv1.DomainList
		if err := tr.c.cp.Client.List(bg(), &agents, client.InNamespace(ws)); err != nil {
			t.Fatal(err)
		}
		if err := tr.c.cp.Client.List(bg(), &domains, client.InNamespace(ws)); err != nil {
			t.Fatal(err)
		}
		for _, a := range agents.Items {
			names[ws+"/"+a.Spec.DisplayName] = true
		}
		for _, d := range domains.Items {
			subdomains[strings.ToLower(d.Spec.Subdomain)] = true
		}
	}
	out := slices.Clone(ops)
	for i, o := range out {
		if !o.Ambiguous() {
			continue
		}
		switch o.Kind {
		case history.CreateAgent:
			out[i].Outcome = history.Lost
			if names[o.Workspace+"/"+o.Name] {
				out[i].Outcome = history.Landed
			}
		case history.CreateDomain:
			deletedAfter := slices.ContainsFunc(ops, func(d history.Op) bool {
				return d.Kind == history.DeleteDomain && strings.EqualFold(d.Name, o.Name) &&
					(d.Ambiguous() || d.Status == 202 || d.Return > o.Call)
			})
			if !subdomains[strings.ToLower(o.Name)] && !deletedAfter {
				out[i].Outcome = history.Lost
			}
		}
	}
	return out
}

// agentNames are the names of ws's Agents in the API server (an error while one is being
// deleted).
func agentNames(tr *historyTraffic, ws string) ([]string, error) {
	var agents agentsv1.AgentList
	if err := tr.c.cp.Client.List(bg(), &agents, client.InNamespace(ws)); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range agents.Items {
		if a.DeletionTimestamp != nil {
			return nil, fmt.Errorf("agent %s/%s is still being deleted", ws, a.Name)
		}
		out = append(out, a.Name)
	}
	slices.Sort(out)
	return out, nil
}

// restKeys lists path through the facade at base and returns the sorted values of key of
// the objects under field.
func restKeys(base, path, tok, field, key string) ([]string, error) {
	r := call(base, "GET", path, tok, nil)
	if r.Status != 200 {
		return nil, fmt.Errorf("GET %s: %s", path, r)
	}
	out := []string{}
	for _, it := range listItems(r, field) {
		out = append(out, fmt.Sprint(it[key]))
	}
	slices.Sort(out)
	return out, nil
}

// validateAcknowledged checks, object by object, that the last acknowledged write holds: an
// object whose last create answered 2xx is listed, one whose last delete answered 2xx is
// not. An object is a secret name of a workspace, a subdomain, or an agent id (secret and
// domain ids derive from their names, so a name deleted and created again comes back under
// the same id). An object whose last write overlapped another write, or was ambiguous, has no
// single expected state and is skipped.
func validateAcknowledged(t *testing.T, tr *historyTraffic, ops []history.Op) {
	t.Helper()
	key := func(o history.Op) string {
		switch o.Kind {
		case history.CreateAgent:
			if o.ID == "" {
				return "" // an ambiguous agent create names no object
			}
			return "agent " + o.Workspace + "/" + o.ID
		case history.DeleteAgent:
			return "agent " + o.Workspace + "/" + o.Agent
		case history.CreateSecret, history.DeleteSecret:
			return "secret " + o.Workspace + "/" + o.Name
		case history.CreateDomain, history.DeleteDomain:
			return "subdomain " + o.Name
		}
		return ""
	}
	writes := map[string][]history.Op{}
	for _, o := range ops {
		if k := key(o); k != "" && (o.Status/100 == 2 || o.Ambiguous()) {
			writes[k] = append(writes[k], o)
		}
	}
	// The lists are read whole or not at all: a list that did not answer 200 would make every
	// object of its kind look deleted.
	var listed map[string]bool
	err := eventually(quiesceTimeout, 500*time.Millisecond, func() error {
		listed = map[string]bool{}
		base := tr.c.facade(t)
		for _, ws := range tr.spaces {
			for _, l := range []struct{ path, field, key, prefix string }{
				{"/v0/agents", "agents", "id", "agent " + ws + "/"},
				{"/v0/secrets", "secrets", "name", "secret " + ws + "/"},
				{"/v0/agents/" + tr.homes[ws] + "/domains", "domains", "subdomain", "subdomain "},
			} {
				keys, err := restKeys(base, l.path, tr.toks[ws], l.field, l.key)
				if err != nil {
					return err
				}
				for _, k := range keys {
					listed[l.prefix+k] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("the acknowledged writes are unchecked: %v", err)
		return
	}
	checked := 0
	for k, ws := range writes {
		last := ws[0]
		for _, o := range ws[1:] {
			if o.Call > last.Call {
				last = o
			}
		}
		overlapped := slices.ContainsFunc(ws, func(o history.Op) bool { return o != last && o.Return > last.Call })
		if overlapped || last.Ambiguous() {
			continue
		}
		checked++
		created := last.Kind == history.CreateAgent || last.Kind == history.CreateSecret || last.Kind == history.CreateDomain
		switch {
		case created && !listed[k]:
			t.Errorf("%s: its last write, %s, answered %d, but it is not listed", k, last.Kind, last.Status)
		case !created && listed[k]:
			t.Errorf("%s: its last write, %s, answered %d, but it is still listed", k, last.Kind, last.Status)
		}
	}
	t.Logf("acknowledged writes: %d objects checked, %d skipped (last write ambiguous or concurrent)", checked, len(writes)-checked)
}

// listItems are the objects under field of a list answer.
func listItems(r reply, field string) []map[string]any {
	items, _ := r.Body[field].([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// reservationsMatch compares what admission holds with what exists: the agent slots of each
// workspace, the domain slots of each agent, and the host claims of the run's subdomains.
func reservationsMatch(tr *historyTraffic) error {
	k8s := tr.c.cp.Client
	var problems []string
	held := map[string]bool{} // subdomains with a Domain
	for _, ws := range tr.spaces {
		w := &agentsv1.Workspace{}
		if err := k8s.Get(bg(), client.ObjectKey{Name: ws}, w); err != nil {
			return err
		}
		agents, err := agentNames(tr, ws)
		if err != nil {
			return err
		}
		var all agentsv1.AgentList
		if err := k8s.List(bg(), &all, client.InNamespace(ws)); err != nil {
			return err
		}
		if err := slotsMatchAgents(w, all.Items); err != nil {
			problems = append(problems, err.Error())
		}
		var domains agentsv1.DomainList
		if err := k8s.List(bg(), &domains, client.InNamespace(ws)); err != nil {
			return err
		}
		byAgent := map[string][]string{}
		for _, d := range domains.Items {
			byAgent[d.Spec.AgentRef.Name] = append(byAgent[d.Spec.AgentRef.Name], d.Name)
			held[d.Spec.Subdomain] = true
		}
		for _, name := range agents {
			a := &agentsv1.Agent{}
			if err := k8s.Get(bg(), client.ObjectKey{Namespace: ws, Name: name}, a); err != nil {
				return err
			}
			want := byAgent[name]
			slices.Sort(want)
			if got := reservedNames(a.Status.DomainReservations); !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("agent %s/%s reserves domain slots %v for Domains %v", ws, name, got, want))
			}
		}
	}
	var leases coordinationv1.LeaseList
	if err := k8s.List(bg(), &leases, client.InNamespace(platform.DefaultSystemNamespace), client.HasLabels{agentsv1.LabelClaim}); err != nil {
		return err
	}
	prefix := strings.TrimSuffix(tr.subdomains[0], "0")
	claimed := map[string]bool{}
	for _, l := range leases.Items {
		if h := l.Annotations[agentsv1.AnnotationClaimHost]; strings.HasPrefix(h, prefix) {
			claimed[strings.SplitN(h, ".", 2)[0]] = true
		}
	}
	for name := range held {
		if !claimed[name] {
			problems = append(problems, fmt.Sprintf("subdomain %s exists without its host claim", name))
		}
	}
	for name := range claimed {
		if !held[name] {
			problems = append(problems, fmt.Sprintf("host claim %s has no Domain", name))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("after the recount: %s", strings.Join(problems, "; "))
	}
	return nil
}

func reservedNames(rs []agentsv1.Reservation) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}
