package ops

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/scheme"
)

const testNS = "ws"

// indexAgentRef is the field index the manager registers for Domains and Channels.
func indexAgentRef(obj client.Object) []string {
	switch o := obj.(type) {
	case *agentsv1.Domain:
		return []string{o.Spec.AgentRef.Name}
	case *agentsv1.Channel:
		return []string{o.Spec.AgentRef.Name}
	}
	return nil
}

// newTestOps are operations over a fake client holding objs, with an Admitter over it.
func newTestOps(t *testing.T, objs ...client.Object) (*Ops, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&agentsv1.Domain{}, agentsv1.IndexAgentRef, indexAgentRef).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, indexAgentRef).
		WithStatusSubresource(&agentsv1.Domain{}, &agentsv1.Channel{}).Build()
	return New(Deps{Client: c, Admission: &admission.Admitter{Client: c, SystemNamespace: "agentplane-system"}}), c
}

func testAgent(name string) *agentsv1.Agent {
	return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name)}}
}

func testDomain(name, agent string, f func(*agentsv1.Domain)) *agentsv1.Domain {
	d := &agentsv1.Domain{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec:       agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: agent}, TargetPort: DefaultDomainPort},
	}
	if f != nil {
		f(d)
	}
	return d
}

// TestCreateDomainRefuses: the rules a create meets before it claims anything, in the order
// the contract answers them (shape, agent, names, plan, registration).
func TestCreateDomainRefuses(t *testing.T) {
	taken := testDomain("dom-taken", "a1", func(d *agentsv1.Domain) { d.Spec.CustomDomain = "taken.example.com" })
	tests := []struct {
		name  string
		agent string
		plan  agentsv1.Plan
		f     DomainFields
		code  Code
		msg   string
	}{
		{"neither name", "a1", agentsv1.PlanPro, DomainFields{}, Invalid, MsgDomainExactlyOne},
		{"both names", "a1", agentsv1.PlanPro, DomainFields{Subdomain: ptr("x"), CustomDomain: ptr("x.example.com")}, Invalid, MsgDomainExactlyOne},
		{"blank subdomain", "a1", agentsv1.PlanPro, DomainFields{Subdomain: ptr("  ")}, Invalid, MsgDomainExactlyOne},
		{"port 0", "a1", agentsv1.PlanPro, DomainFields{Subdomain: ptr("shop"), TargetPort: ptr[int64](0)}, Invalid, MsgInvalidTargetPort},
		{"port 65536", "a1", agentsv1.PlanPro, DomainFields{Subdomain: ptr("shop"), TargetPort: ptr[int64](65536)}, Invalid, MsgInvalidTargetPort},
		{"shape before the agent", "nobody", agentsv1.PlanPro, DomainFields{}, Invalid, MsgDomainExactlyOne},
		{"unknown agent", "nobody", agentsv1.PlanPro, DomainFields{Subdomain: ptr("shop")}, NotFound, MsgAgentNotFound},
		{"brand in a subdomain", "a1", agentsv1.PlanPro, DomainFields{Subdomain: ptr("my-AgentPlane")}, Invalid, MsgDomainBanned},
		{"not a label", "a1", agentsv1.PlanPro, DomainFields{Subdomain: ptr("-shop")}, Invalid, MsgInvalidSubdomain},
		{"custom domain on the free plan", "a1", agentsv1.PlanFree, DomainFields{CustomDomain: ptr("shop.example.com")}, Forbidden, MsgCustomDomainPlan},
		{"brand in a custom domain", "a1", agentsv1.PlanPro, DomainFields{CustomDomain: ptr("agentplane.example.com")}, Invalid, MsgDomainBanned},
		{"not a host name", "a1", agentsv1.PlanPro, DomainFields{CustomDomain: ptr("localhost")}, Invalid, MsgInvalidDomain},
		{"under the apps domain", "a1", agentsv1.PlanPro, DomainFields{CustomDomain: ptr("shop.agents.localhost")}, Invalid, MsgInvalidDomain},
		{"registered in the workspace", "a1", agentsv1.PlanPro, DomainFields{CustomDomain: ptr("Taken.Example.com.")}, Conflict, MsgDomainRegistered},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, c := newTestOps(t, testAgent("a1"), taken.DeepCopy())
			_, err := o.CreateDomain(context.Background(), Scope{Namespace: testNS}, tc.plan, tc.agent, tc.f)
			wantFail(t, "", err, tc.code, tc.msg)
			var list agentsv1.DomainList
			if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 1 {
				t.Fatalf("a refused create writes nothing: %d domains, %v", len(list.Items), err)
			}
		})
	}
}

// TestDomainsOfTheAgent: reads see the workspace's agent's domains only, oldest first, none being
// deleted.
func TestDomainsOfTheAgent(t *testing.T) {
	old := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o, _ := newTestOps(t, testAgent("a1"), testAgent("a2"),
		testDomain("dom-b", "a1", func(d *agentsv1.Domain) { d.CreationTimestamp = old }),
		testDomain("dom-a", "a1", func(d *agentsv1.Domain) { d.CreationTimestamp = old }),
		testDomain("dom-new", "a1", func(d *agentsv1.Domain) { d.CreationTimestamp = metav1.NewTime(old.Add(time.Hour)) }),
		testDomain("dom-gone", "a1", func(d *agentsv1.Domain) {
			d.DeletionTimestamp, d.Finalizers = &old, []string{agentsv1.DomainFinalizer}
		}),
		testDomain("dom-other", "a2", nil))
	ctx, ws := context.Background(), Scope{Namespace: testNS}
	list, err := o.Domains(ctx, ws, "a1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range list {
		names = append(names, d.Name)
	}
	if want := []string{"dom-a", "dom-b", "dom-new"}; !slices.Equal(names, want) {
		t.Fatalf("listed %v, want %v", names, want)
	}
	for _, tc := range []struct {
		scope       Scope
		agent, id   string
		code        Code
		msg         string
		description string
	}{
		{ws, "a1", "dom-other", NotFound, MsgDomainNotFound, "another agent's domain"},
		{ws, "a1", "dom-gone", NotFound, MsgDomainNotFound, "a domain being deleted"},
		{ws, "a1", "dom-none", NotFound, MsgDomainNotFound, "no such domain"},
		{Scope{Namespace: testNS, OnlyAgent: "a2"}, "a1", "dom-a", NotFound, MsgAgentNotFound, "a credential bound to another agent"},
		{Scope{Namespace: "elsewhere"}, "a1", "dom-a", NotFound, MsgAgentNotFound, "another workspace"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, err := o.Domain(ctx, tc.scope, tc.agent, tc.id)
			wantFail(t, "", err, tc.code, tc.msg)
		})
	}
}

// TestPatchDomain: only targetPort changes; naming the current host again is allowed.
func TestPatchDomain(t *testing.T) {
	ctx, ws := context.Background(), Scope{Namespace: testNS}
	o, c := newTestOps(t, testAgent("a1"),
		testDomain("dom-sub", "a1", func(d *agentsv1.Domain) { d.Spec.Subdomain = "shop" }),
		testDomain("dom-custom", "a1", func(d *agentsv1.Domain) { d.Spec.CustomDomain = "shop.example.com" }))
	refusals := []struct {
		id   string
		f    DomainFields
		code Code
		msg  string
	}{
		{"dom-sub", DomainFields{Subdomain: ptr("other")}, Invalid, MsgHostImmutable},
		{"dom-sub", DomainFields{CustomDomain: ptr("shop.example.com")}, Invalid, MsgHostImmutable},
		{"dom-custom", DomainFields{CustomDomain: ptr("other.example.com")}, Invalid, MsgHostImmutable},
		{"dom-sub", DomainFields{TargetPort: ptr[int64](-1)}, Invalid, MsgInvalidTargetPort},
		{"dom-none", DomainFields{TargetPort: ptr[int64](8080)}, NotFound, MsgDomainNotFound},
	}
	for _, tc := range refusals {
		_, err := o.PatchDomain(ctx, ws, "a1", tc.id, tc.f)
		wantFail(t, "", err, tc.code, tc.msg)
	}
	d, err := o.PatchDomain(ctx, ws, "a1", "dom-sub", DomainFields{Subdomain: ptr(" SHOP "), TargetPort: ptr[int64](8080)})
	if err != nil || d.Spec.TargetPort != 8080 {
		t.Fatalf("patch: %v, %+v", err, d)
	}
	d, err = o.PatchDomain(ctx, ws, "a1", "dom-custom", DomainFields{CustomDomain: ptr("Shop.Example.com.")})
	if err != nil || d.Spec.TargetPort != DefaultDomainPort {
		t.Fatalf("patch without a port: %v, %+v", err, d)
	}
	stored := &agentsv1.Domain{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNS, Name: "dom-sub"}, stored); err != nil || stored.Spec.TargetPort != 8080 {
		t.Fatalf("stored %+v, %v", stored.Spec, err)
	}
}

// TestVerifyDomain: a subdomain needs no check; a custom domain's request is stamped
// and, without the controller, the wait ends unchecked.
func TestVerifyDomain(t *testing.T) {
	ctx, ws := context.Background(), Scope{Namespace: testNS}
	o, c := newTestOps(t, testAgent("a1"),
		testDomain("dom-sub", "a1", func(d *agentsv1.Domain) { d.Spec.Subdomain = "shop" }),
		testDomain("dom-custom", "a1", func(d *agentsv1.Domain) { d.Spec.CustomDomain = "shop.example.com" }))
	o.d.Domains.VerifyWait = 50 * time.Millisecond
	if _, checked, err := o.VerifyDomain(ctx, ws, "a1", "dom-sub"); err != nil || !checked {
		t.Fatalf("subdomain: checked %v, %v", checked, err)
	}
	_, checked, err := o.VerifyDomain(ctx, ws, "a1", "dom-custom")
	if err != nil || checked {
		t.Fatalf("custom domain without a controller: checked %v, %v", checked, err)
	}
	stored := &agentsv1.Domain{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNS, Name: "dom-custom"}, stored); err != nil ||
		stored.Annotations[agentsv1.AnnotationVerifyRequested] == "" {
		t.Fatalf("the request is not stamped: %v, %v", stored.Annotations, err)
	}
}

func TestDomainOptionsDefaults(t *testing.T) {
	o := DomainOptions{}.WithDefaults()
	if o.Brand != "agentplane" || o.AppsDomain != "agents.localhost" || o.VerifyWait != 10*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	o = DomainOptions{Brand: "acme", AppsDomain: "apps.example.com", VerifyWait: time.Second}.WithDefaults()
	if o.Brand != "acme" || o.AppsDomain != "apps.example.com" || o.VerifyWait != time.Second {
		t.Fatalf("set options are kept: %+v", o)
	}
}

// TestDomainsAnswerTheStatusToCome: a Domain the controller has not seen yet is answered with
// the host and TXT record the controller writes; one it has seen, with its status as it is.
func TestDomainsAnswerTheStatusToCome(t *testing.T) {
	seen := &agentsv1.DomainVerification{RecordName: "_written.example.com", Token: "written"}
	o, _ := newTestOps(t, testAgent("a1"),
		testDomain("dom-sub", "a1", func(d *agentsv1.Domain) { d.Spec.Subdomain = "shop" }),
		testDomain("dom-new", "a1", func(d *agentsv1.Domain) { d.Spec.CustomDomain = "new.example.com" }),
		testDomain("dom-seen", "a1", func(d *agentsv1.Domain) {
			d.Spec.CustomDomain = "seen.example.com"
			d.Status.Host, d.Status.Verification = "seen.example.com", seen
		}))
	o.d.Domains = DomainOptions{Brand: "acme", AppsDomain: "apps.example.org", TokenKey: []byte("key")}
	ctx, ws := context.Background(), Scope{Namespace: testNS}
	sub, err := o.Domain(ctx, ws, "a1", "dom-sub")
	if err != nil || sub.Status.Host != "shop.apps.example.org" || sub.Status.Verification != nil {
		t.Fatalf("a new subdomain: %v %+v", err, sub.Status)
	}
	custom, err := o.Domain(ctx, ws, "a1", "dom-new")
	if want := (agentsv1.DomainVerification{RecordName: "_acme-verify.new.example.com", Token: dnsverify.Token([]byte("key"), testNS, "new.example.com")}); err != nil ||
		custom.Status.Host != "new.example.com" || custom.Status.Verification == nil || *custom.Status.Verification != want {
		t.Fatalf("a new custom domain: %v %+v, want %+v", err, custom.Status, want)
	}
	list, err := o.Domains(ctx, ws, "a1")
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %v %d", err, len(list))
	}
	for _, d := range list {
		if d.Name == "dom-seen" && *d.Status.Verification != *seen {
			t.Fatalf("a domain the controller saw: %+v, want its status", d.Status)
		}
		if d.Status.Host == "" {
			t.Fatalf("%s listed without its host", d.Name)
		}
	}
}
