package admission_test

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// TestRecount: one recount frees the domain slots and the host claims whose Domain never
// appeared once they are past StaleAfter, and keeps those of Domains that exist and those
// still young (a request may be about to create its Domain).
func TestRecount(t *testing.T) {
	a := admitter(t)
	ctx := context.Background()
	now := time.Now()
	clk := clocktesting.NewFakePassiveClock(now)
	a.Limiter.Clock, a.Limiter.StaleAfter = clk, time.Minute
	const ns = "adm-recount"
	if err := workspacens.EnsureWorkspace(ctx, env.Client, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	ag := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agt"}, Spec: agentsv1.AgentSpec{DisplayName: "Recount"}}
	if err := env.Client.Create(ctx, ag); err != nil {
		t.Fatal(err)
	}
	kept := &agentsv1.Domain{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"},
		Spec:       agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: "agt"}, Subdomain: "kept"},
	}
	if err := env.Client.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	old, young := metav1.NewTime(now.Add(-2*time.Minute)), metav1.NewTime(now.Add(-10*time.Second))
	ag.Status.DomainReservations = []agentsv1.Reservation{{Name: "kept", Time: old}, {Name: "ghost-old", Time: old}, {Name: "ghost-young", Time: young}}
	if err := env.Client.Status().Update(ctx, ag); err != nil {
		t.Fatal(err)
	}
	// Claims: the existing Domain's (old), a ghost's that is old, a ghost's that is young.
	claims := map[string]string{"kept.recount.localhost": ns + "/kept", "ghost-old.recount.localhost": ns + "/ghost-old", "ghost-young.recount.localhost": ns + "/ghost-young"}
	for host, key := range claims {
		if err := admission.ClaimHost(ctx, env.Client, systemNS, host, ns, key); err != nil {
			t.Fatal(err)
		}
		if host == "ghost-young.recount.localhost" {
			continue
		}
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: admission.ClaimName(host)}, l); err != nil {
			t.Fatal(err)
		}
		l.Annotations[agentsv1.AnnotationClaimedAt] = old.UTC().Format(time.RFC3339)
		if err := env.Client.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
	}

	r := &admission.Recounter{Admitter: a, Cache: env.Client}
	if err := r.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ag), ag); err != nil {
		t.Fatal(err)
	}
	var slots []string
	for _, res := range ag.Status.DomainReservations {
		slots = append(slots, res.Name)
	}
	slices.Sort(slots)
	if want := []string{"ghost-young", "kept"}; !slices.Equal(slots, want) {
		t.Errorf("domain slots after the recount: %v, want %v", slots, want)
	}
	for host, want := range map[string]bool{"kept.recount.localhost": true, "ghost-old.recount.localhost": false, "ghost-young.recount.localhost": true} {
		held, err := a.LookupClaim(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		if (held != nil) != want {
			t.Errorf("claim on %s after the recount: %v, want held=%v", host, held, want)
		}
	}

	const later = "two minutes later the young ghost is stale too"
	clk.SetTime(now.Add(2 * time.Minute))
	if err := r.Recount(ctx); err != nil {
		t.Fatal(later, err)
	}
	if held, _ := a.LookupClaim(ctx, "ghost-young.recount.localhost"); held != nil {
		t.Errorf("%s: its claim is still held", later)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ag), ag); err != nil {
		t.Fatal(err)
	}
	if len(ag.Status.DomainReservations) != 1 || ag.Status.DomainReservations[0].Name != "kept" {
		t.Errorf("%s: slots %v", later, ag.Status.DomainReservations)
	}
}
