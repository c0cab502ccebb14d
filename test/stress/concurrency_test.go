package stress

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/hostclaim"
)

// ways is how many requests each race sends at once, over both facades.
const ways = 20

// TestRaceAgentLimit: 20 creates against a limit of 3 make exactly 3 agents.
func TestRaceAgentLimit(t *testing.T) {
	const ws = "race-agents"
	workspace(t, ws, agentsv1.PlanFree, func(s *agentsv1.WorkspaceSpec) { s.AgentLimit = new(int32(3)) })
	tok := token(t, ws)
	rs := race(ways, func(i int, base string) reply {
		return call(base, "POST", "/v0/agents", tok, map[string]any{"name": fmt.Sprintf("racer %d", i)})
	})
	expectStatuses(t, rs, map[int]int{201: 3, 403: ways - 3}, map[int]string{403: "Agent limit reached"})

	var won []string
	for _, r := range rs {
		if r.Status == 201 {
			won = append(won, r.obj("agent")["id"].(string))
		}
	}
	var agents agentsv1.AgentList
	if err := k8s.List(bg(), &agents, client.InNamespace(ws)); err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, a := range agents.Items {
		stored = append(stored, a.Name)
	}
	slices.Sort(won)
	slices.Sort(stored)
	if !slices.Equal(won, stored) {
		t.Fatalf("the 201 answers named %v, the API server holds %v", won, stored)
	}
	w := &agentsv1.Workspace{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: ws}, w); err != nil {
		t.Fatal(err)
	}
	if err := slotsMatchAgents(w, agents.Items); err != nil {
		t.Fatal(err)
	}
}

// TestRaceDuplicateSecretName: of 20 creates of one name exactly one is stored.
func TestRaceDuplicateSecretName(t *testing.T) {
	const ws = "race-secrets"
	workspace(t, ws, agentsv1.PlanFree)
	tok := token(t, ws)
	rs := race(ways, func(i int, base string) reply {
		value := remember("secret value", fmt.Sprintf("dup-value-%d-%d", i, time.Now().UnixNano()))
		return call(base, "POST", "/v0/secrets", tok, map[string]any{"name": "OPENAI_API_KEY", "value": value})
	})
	expectStatuses(t, rs, map[int]int{201: 1, 409: ways - 1}, map[int]string{409: "Duplicate secret name"})
	var list agentsv1.AgentSecretList
	if err := k8s.List(bg(), &list, client.InNamespace(ws)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Spec.Name != "OPENAI_API_KEY" {
		t.Fatalf("want one AgentSecret OPENAI_API_KEY, have %d", len(list.Items))
	}
	for _, r := range rs {
		if r.Status == 201 && r.obj("secret")["id"] != list.Items[0].Name {
			t.Fatalf("the 201 named %v, the stored secret is %s", r.obj("secret")["id"], list.Items[0].Name)
		}
	}
}

// TestRaceSubdomainClaim: two workspaces claim one subdomain 20 times; one Domain holds it.
func TestRaceSubdomainClaim(t *testing.T) {
	wss := [2]string{"race-dom-a", "race-dom-b"}
	var toks, agents [2]string
	for i, ws := range wss {
		workspace(t, ws, agentsv1.PlanFree)
		toks[i] = token(t, ws)
		agents[i] = newAgent(t, mainURL, toks[i], "claimer")
	}
	rs := race(ways, func(i int, base string) reply {
		w := (i / 2) % 2 // both workspaces through both facades
		return call(base, "POST", "/v0/agents/"+agents[w]+"/domains", toks[w], map[string]any{"subdomain": "contested"})
	})
	expectStatuses(t, rs, map[int]int{201: 1, 409: ways - 1}, map[int]string{409: "Subdomain already taken"})
	var winner string
	for _, r := range rs {
		if r.Status == 201 {
			winner = r.obj("domain")["id"].(string)
		}
	}
	var held []string
	for i, ws := range wss {
		var list agentsv1.DomainList
		if err := k8s.List(bg(), &list, client.InNamespace(ws)); err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Items {
			held = append(held, d.Name)
		}
		a := agentObject(t, ws, agents[i])
		if n := len(list.Items); len(a.Status.DomainReservations) != n {
			t.Fatalf("agent %s reserves %d domain slots for %d domains", a.Name, len(a.Status.DomainReservations), n)
		}
	}
	if !slices.Equal(held, []string{winner}) {
		t.Fatalf("the 201 named %s, the workspaces hold domains %v", winner, held)
	}
	claims := claimsFor(t, "contested."+hostclaim.DefaultAppsDomain)
	if len(claims) != 1 || !slices.Contains(wss[:], claims[0].Annotations[agentsv1.AnnotationClaimWorkspace]) ||
		*claims[0].Spec.HolderIdentity != claims[0].Annotations[agentsv1.AnnotationClaimWorkspace]+"/"+winner {
		t.Fatalf("want one claim held by %s, have %d: %+v", winner, len(claims), claims)
	}
}

// claimsFor lists the host claims (Leases) on host.
func claimsFor(t testing.TB, host string) []coordinationv1.Lease {
	t.Helper()
	var leases coordinationv1.LeaseList
	if err := k8s.List(bg(), &leases, client.InNamespace(platform.DefaultSystemNamespace),
		client.MatchingLabels{agentsv1.LabelClaim: admission.ClaimKindDomain}); err != nil {
		t.Fatal(err)
	}
	var out []coordinationv1.Lease
	for _, l := range leases.Items {
		if l.Annotations[agentsv1.AnnotationClaimHost] == host {
			out = append(out, l)
		}
	}
	return out
}

// TestRaceDomainLimit: 20 different subdomains on one agent; exactly 5 are created.
func TestRaceDomainLimit(t *testing.T) {
	const ws = "race-dom-limit"
	workspace(t, ws, agentsv1.PlanFree)
	tok := token(t, ws)
	agent := newAgent(t, mainURL, tok, "busy")
	rs := race(ways, func(i int, base string) reply {
		return call(base, "POST", "/v0/agents/"+agent+"/domains", tok, map[string]any{"subdomain": fmt.Sprintf("limit-%02d", i)})
	})
	expectStatuses(t, rs, map[int]int{201: agentsv1.MaxDomainsPerAgent, 400: ways - agentsv1.MaxDomainsPerAgent},
		map[int]string{400: "Domain limit reached"})
	var list agentsv1.DomainList
	if err := k8s.List(bg(), &list, client.InNamespace(ws)); err != nil {
		t.Fatal(err)
	}
	var stored, won []string
	for _, d := range list.Items {
		stored = append(stored, d.Spec.Subdomain)
	}
	for i, r := range rs {
		if r.Status == 201 {
			won = append(won, fmt.Sprintf("limit-%02d", i))
		}
	}
	slices.Sort(stored)
	if !slices.Equal(won, stored) {
		t.Fatalf("the 201s created %v, the API server holds %v", won, stored)
	}
	if n := len(agentObject(t, ws, agent).Status.DomainReservations); n != agentsv1.MaxDomainsPerAgent {
		t.Fatalf("the agent reserves %d domain slots, want %d", n, agentsv1.MaxDomainsPerAgent)
	}
	for i := range ways {
		host := fmt.Sprintf("limit-%02d.%s", i, hostclaim.DefaultAppsDomain)
		want := 0
		if slices.Contains(won, fmt.Sprintf("limit-%02d", i)) {
			want = 1
		}
		// Claims are taken by the winners' requests and the domain controller: wait for it.
		if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
			if n := len(claimsFor(t, host)); n != want {
				return fmt.Errorf("%s has %d claims, want %d", host, n, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRaceSkillUpdate: 20 updates of one skill from the same version; exactly one wins.
func TestRaceSkillUpdate(t *testing.T) {
	const ws = "race-skills"
	workspace(t, ws, agentsv1.PlanFree)
	tok := token(t, ws)
	agent := newAgent(t, mainURL, tok, "learner")
	v1 := publish("racy", "1.0.0")
	expect(t, call(mainURL, "POST", "/v0/clawhub/racy/install", tok, nil), 201, "install racy")
	expect(t, call(mainURL, "POST", "/v0/agents/"+agent+"/skills", tok, map[string]any{"skillCids": []string{v1}}), 200, "attach racy")
	v2 := publish("racy", "2.0.0")
	rs := race(ways, func(_ int, base string) reply {
		return call(base, "POST", "/v0/agents/"+agent+"/skills/racy/update", tok,
			map[string]string{"version": "2.0.0", "expectedVersion": "1.0.0"})
	})
	expectStatuses(t, rs, map[int]int{200: 1, 409: ways - 1}, map[int]string{409: "Skill version conflict"})
	sk := &agentsv1.Skill{}
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ws, Name: "racy"}, sk); err != nil {
		t.Fatal(err)
	}
	if sk.Spec.Version != "2.0.0" || sk.Spec.CID != v2 {
		t.Fatalf("the Skill is %s %s, want 2.0.0 %s", sk.Spec.Version, sk.Spec.CID, v2)
	}
	if got := agentObject(t, ws, agent).Spec.Skills; !slices.Equal(got, []agentsv1.AgentSkill{{CID: v2}}) {
		t.Fatalf("the agent attaches %v, want only %s", got, v2)
	}
	var skills agentsv1.SkillList
	if err := k8s.List(bg(), &skills, client.InNamespace(ws)); err != nil || len(skills.Items) != 1 {
		t.Fatalf("want one Skill object, have %d (%v)", len(skills.Items), err)
	}
}

// TestRaceSecretDeleteVersusAttach: deletes and attaches of one secret race; no agent is left
// referencing a deleted secret and the answers agree with what is stored.
func TestRaceSecretDeleteVersusAttach(t *testing.T) {
	const ws = "race-attach"
	workspace(t, ws, agentsv1.PlanFree)
	tok := token(t, ws)
	agent := newAgent(t, mainURL, tok, "holder")
	for round := range 4 {
		name := fmt.Sprintf("CONTENDED_%d", round)
		r := expect(t, call(mainURL, "POST", "/v0/secrets", tok, map[string]any{
			"name": name, "value": remember("secret value", fmt.Sprintf("contended-value-%d-%d", round, time.Now().UnixNano())),
		}), 201, "create "+name)
		id := r.obj("secret")["id"].(string)
		rs := race(ways, func(i int, base string) reply {
			if i%4 < 2 {
				return call(base, "DELETE", "/v0/secrets/"+id, tok, nil)
			}
			return call(base, "POST", "/v0/agents/"+agent+"/secrets", tok, map[string]any{"secretIds": []string{id}})
		})
		deleted, attached := 0, 0
		for i, r := range rs {
			switch {
			case r.Err != nil:
				t.Fatalf("round %d: %s", round, r)
			case i%4 < 2 && r.Status == 200:
				deleted++
			case i%4 < 2 && r.Status != 404 && r.Status != 409:
				t.Fatalf("round %d: delete answered %s", round, r)
			case i%4 >= 2 && r.Status == 200:
				attached++
			case i%4 >= 2 && r.Status != 404:
				t.Fatalf("round %d: attach answered %s", round, r)
			}
		}
		if deleted > 1 || deleted > 0 && attached > 0 {
			t.Fatalf("round %d: %d deletes and %d attaches succeeded", round, deleted, attached)
		}
		check := func() {
			sec := &agentsv1.AgentSecret{}
			err := k8s.Get(bg(), client.ObjectKey{Namespace: ws, Name: id}, sec)
			exists := err == nil
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			refs := slices.ContainsFunc(agentObject(t, ws, agent).Spec.Secrets, func(r agentsv1.LocalObjectReference) bool { return r.Name == id })
			switch {
			case refs && !exists:
				t.Fatalf("round %d: the agent references secret %s, which is deleted", round, id)
			case exists != (deleted == 0):
				t.Fatalf("round %d: %d deletes succeeded but the secret exists=%v", round, deleted, exists)
			case refs != (attached > 0):
				t.Fatalf("round %d: %d attaches succeeded but the agent references it=%v", round, attached, refs)
			case exists && refs && !slices.Contains(sec.Status.AttachedTo, agent):
				t.Fatalf("round %d: the agent references %s but it does not record the agent", round, id)
			}
		}
		check()
		// Nothing lands late: once the controllers have acted on what the doors wrote (the
		// agent's and the secret's status observed their generations), the state still holds.
		if err := eventually(time.Minute, 20*time.Millisecond, func() error {
			return reconciled(ws, agent, id)
		}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		check()
		if attached > 0 {
			expect(t, call(mainURL, "DELETE", "/v0/agents/"+agent+"/secrets/"+id, tok, nil), 200, "detach")
			expect(t, call(mainURL, "DELETE", "/v0/secrets/"+id, tok, nil), 200, "delete after detach")
		}
	}
}

// reconciled tells whether the agent's controller has observed the agent's generation and,
// when the secret still exists, the secret's controller the secret's.
func reconciled(ws, agent, secret string) error {
	a := &agentsv1.Agent{}
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ws, Name: agent}, a); err != nil {
		return err
	}
	if a.Status.ObservedGeneration != a.Generation {
		return fmt.Errorf("agent %s: status observed generation %d of %d", agent, a.Status.ObservedGeneration, a.Generation)
	}
	sec := &agentsv1.AgentSecret{}
	switch err := k8s.Get(bg(), client.ObjectKey{Namespace: ws, Name: secret}, sec); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case sec.Status.ObservedGeneration != sec.Generation:
		return fmt.Errorf("secret %s: status observed generation %d of %d", secret, sec.Status.ObservedGeneration, sec.Generation)
	}
	return nil
}
