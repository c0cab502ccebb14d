package admission_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/quota"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// The control plane of the tests that need the API server's verdicts (started on first use).
var (
	envOnce sync.Once
	env     *kubeenv.Env
	envErr  error
)

// systemNS holds the host claims.
const systemNS = "adm-system"

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// admitter starts the control plane (once) and returns an Admitter on it, reading live.
func admitter(t *testing.T) *admission.Admitter {
	t.Helper()
	envOnce.Do(func() {
		if env, envErr = kubeenv.Start(); envErr == nil {
			envErr = env.Client.Create(context.Background(), kubeenv.Namespace(systemNS))
		}
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	c := env.Client
	return &admission.Admitter{
		Client: c, Reader: c, Limiter: &quota.Limiter{Reader: c, Writer: c}, SystemNamespace: systemNS,
	}
}

func TestTemplate(t *testing.T) {
	a := admitter(t)
	ctx := context.Background()
	for _, tpl := range []agentsv1.AgentTemplate{
		{ObjectMeta: metav1.ObjectMeta{Name: "tpl-pub"}, Spec: agentsv1.AgentTemplateSpec{Slug: "pub", DisplayName: "Pub", State: agentsv1.TemplatePublished}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tpl-draft"}, Spec: agentsv1.AgentTemplateSpec{Slug: "draft", DisplayName: "Draft"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tpl-old"}, Spec: agentsv1.AgentTemplateSpec{Slug: "old", DisplayName: "Old", State: agentsv1.TemplateArchived}},
	} {
		if err := env.Client.Create(ctx, &tpl); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		id, slug string
		want     string // "" = not found
	}{
		{id: "tpl-pub", want: "tpl-pub"},
		{slug: "pub", want: "tpl-pub"},
		{id: "tpl-pub", slug: "pub", want: "tpl-pub"},
		{id: "tpl-pub", slug: "other"},
		{id: "tpl-draft"},
		{slug: "draft"},
		{id: "tpl-old"},
		{slug: "old"},
		{id: "tpl-missing"},
		{slug: "missing"},
	} {
		t.Run(tc.id+"/"+tc.slug, func(t *testing.T) {
			got, err := a.Template(ctx, tc.id, tc.slug)
			switch {
			case tc.want == "" && !errors.Is(err, admission.ErrTemplateNotFound):
				t.Fatalf("want ErrTemplateNotFound, got %v, %v", got, err)
			case tc.want != "" && (err != nil || got.Name != tc.want):
				t.Fatalf("want %s, got %v, %v", tc.want, got, err)
			}
		})
	}
}

func TestReserveAgent(t *testing.T) {
	a := admitter(t)
	ctx := context.Background()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "adm-agents"}, Spec: agentsv1.WorkspaceSpec{AgentLimit: ptr.To[int32](3)}}
	if err := workspacens.EnsureWorkspace(ctx, env.Client, ws); err != nil {
		t.Fatal(err)
	}
	agent := func(name string) *agentsv1.Agent {
		return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: name}}
	}

	// 12 callers race for 3 slots: exactly 3 win, the others hear ErrLimitReached.
	errs := make([]error, 12)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.ReserveAgent(ctx, agent(fmt.Sprintf("race-%02d", i)))
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, admission.ErrLimitReached):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if won != 3 {
		t.Fatalf("%d reservations won, want 3", won)
	}

	holders := reservations(t, ws.Name)
	for _, step := range []struct {
		what    string
		do      func() error
		wantErr error
	}{
		{"a holder reserving again is a no-op", func() error { return a.ReserveAgent(ctx, agent(holders[0])) }, nil},
		{"a newcomer finds the limit reached", func() error { return a.ReserveAgent(ctx, agent("late")) }, admission.ErrLimitReached},
		{"a release frees a slot", func() error { return a.ReleaseAgent(ctx, agent(holders[0])) }, nil},
		{"which the newcomer takes", func() error { return a.ReserveAgent(ctx, agent("late")) }, nil},
	} {
		if err := step.do(); !errors.Is(err, step.wantErr) {
			t.Fatalf("%s: got %v, want %v", step.what, err, step.wantErr)
		}
	}
	if got := reservations(t, ws.Name); len(got) != 3 || got[2] != "late" {
		t.Fatalf("reservations %v, want two of the winners and late", got)
	}
}

// statusWrites counts a client's status writes.
type statusWrites struct {
	client.Client
	n atomic.Int32
}

func (c *statusWrites) Status() client.SubResourceWriter {
	c.n.Add(1)
	return c.Client.Status()
}

// TestReservationsSettle: with a cache of the agents, a reservation or a release carries the
// settle moves that are due in its own write (a burst settles itself), and never moves what
// the cache does not show bound.
func TestReservationsSettle(t *testing.T) {
	admitter(t)
	ctx := context.Background()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "adm-settle"}, Spec: agentsv1.WorkspaceSpec{AgentLimit: ptr.To[int32](3)}}
	if err := workspacens.EnsureWorkspace(ctx, env.Client, ws); err != nil {
		t.Fatal(err)
	}
	writes := &statusWrites{Client: env.Client}
	l := &quota.Limiter{Reader: env.Client, Writer: writes, Agents: env.Client}
	bound := func(name string) *agentsv1.Agent {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: name}, Spec: agentsv1.AgentSpec{DisplayName: name}}
		if err := env.Client.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Status.HoldsSlot = true
		if err := env.Client.Status().Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	slots := func() agentsv1.AgentSlots {
		w := &agentsv1.Workspace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ws.Name}, w); err != nil {
			t.Fatal(err)
		}
		return w.Status.AgentSlots
	}
	names := func(res []agentsv1.Reservation) (out []string) {
		for _, r := range res {
			out = append(out, r.Name)
		}
		return out
	}

	for _, name := range []string{"s1", "s2"} {
		if err := l.ReserveAgent(ctx, ws.Name, name); err != nil {
			t.Fatal(err)
		}
	}
	a1 := bound("s1") // s2's create is still in flight
	writes.n.Store(0)
	if err := l.ReserveAgent(ctx, ws.Name, "s3"); err != nil {
		t.Fatal(err)
	}
	if s := slots(); s.Used != 1 || fmt.Sprint(names(s.Pending)) != "[s2 s3]" || writes.n.Load() != 1 {
		t.Errorf("after s3's reservation: used %d, pending %v, %d writes; want s1 counted in the same write", s.Used, names(s.Pending), writes.n.Load())
	}
	if err := l.ReserveAgent(ctx, ws.Name, "s4"); !errors.Is(err, quota.ErrLimitReached) {
		t.Fatalf("a fourth agent: %v", err)
	}

	bound("s2")
	writes.n.Store(0)
	if err := l.ReleaseAgent(ctx, ws.Name, a1.Name, a1.UID, true); err != nil {
		t.Fatal(err)
	}
	if s := slots(); s.Used != 1 || fmt.Sprint(names(s.Pending)) != "[s3]" || fmt.Sprint(names(s.Releasing)) != "[s1]" || writes.n.Load() != 1 {
		t.Errorf("after s1's release: used %d, pending %v, releasing %v, %d writes; want s2 counted and s1 released in one write",
			s.Used, names(s.Pending), names(s.Releasing), writes.n.Load())
	}
}

func reservations(t *testing.T, ws string) []string {
	t.Helper()
	w := &agentsv1.Workspace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: ws}, w); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range w.Status.AgentSlots.Pending {
		names = append(names, r.Name)
	}
	return names
}

func TestReserveDomain(t *testing.T) {
	a := admitter(t)
	ctx := context.Background()
	const ns = "adm-domains"
	if err := workspacens.EnsureWorkspace(ctx, env.Client, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name    string
		slotAge time.Duration // of the agent's MaxDomainsPerAgent slots, whose Domains never appeared
		wantErr error
	}{
		{"fresh slots of callers still creating their Domains hold", time.Second, admission.ErrLimitReached},
		{"stale slots are freed and one is taken", quota.DefaultStaleAfter + time.Minute, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ag := &agentsv1.Agent{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "agt-"},
				Spec:       agentsv1.AgentSpec{DisplayName: "Domains"},
			}
			if err := env.Client.Create(ctx, ag); err != nil {
				t.Fatal(err)
			}
			for i := range agentsv1.MaxDomainsPerAgent {
				ag.Status.DomainReservations = append(ag.Status.DomainReservations,
					agentsv1.Reservation{Name: fmt.Sprintf("dom-%d", i), Time: metav1.NewTime(now.Add(-tc.slotAge))})
			}
			if err := env.Client.Status().Update(ctx, ag); err != nil {
				t.Fatal(err)
			}
			err := a.ReserveDomain(ctx, client.ObjectKeyFromObject(ag), "dom-new")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ReserveDomain: got %v, want %v", err, tc.wantErr)
			}
		})
	}
	if err := a.ReserveDomain(ctx, client.ObjectKey{Namespace: ns, Name: "agt-missing"}, "dom"); err == nil {
		t.Fatal("a missing agent's slot was reserved")
	}
}

func TestClaims(t *testing.T) {
	a := admitter(t)
	ctx := context.Background()
	// The Domains exist: a claim whose Domain does not is only waited for, then taken over.
	dom := func(ns, name string) *agentsv1.Domain {
		if err := workspacens.EnsureWorkspace(ctx, env.Client, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		d := &agentsv1.Domain{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1.DomainSpec{AgentRef: agentsv1.LocalObjectReference{Name: "agt"}, Subdomain: name},
		}
		if err := env.Client.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	const host = "claims.agents.localhost"
	d1, d2 := dom("ws-a", "d1"), dom("ws-b", "d2")
	for _, step := range []struct {
		what    string
		do      func() error
		wantErr error
		holder  string // "" = nobody holds the host afterwards
	}{
		{"d1 claims the host", func() error { return a.ClaimHost(ctx, d1, host) }, nil, "ws-a/d1"},
		{"d1 claiming again is a no-op", func() error { return a.EnsureClaim(ctx, d1, host) }, nil, "ws-a/d1"},
		{"d2 finds it taken", func() error { return a.ClaimHost(ctx, d2, host) }, admission.ErrHostTaken, "ws-a/d1"},
		{"d2 cannot release d1's claim", func() error { return a.ReleaseHost(ctx, d2, host) }, nil, "ws-a/d1"},
		{"d1 releases it", func() error { return a.ReleaseHost(ctx, d1, host) }, nil, ""},
		{"d2 takes it", func() error { return a.EnsureClaim(ctx, d2, host) }, nil, "ws-b/d2"},
		{"d1 confirming d2's claim is refused", func() error { return a.ConfirmClaim(ctx, d1, host) }, admission.ErrHostTaken, "ws-b/d2"},
		{"d1 cannot renew d2's claim", func() error { return a.RenewClaim(ctx, d1, host) }, admission.ErrHostTaken, "ws-b/d2"},
		{"d2 renews its claim: dated anew", func() error {
			before, err := a.LookupClaim(ctx, host)
			if err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
			if err := a.RenewClaim(ctx, d2, host); err != nil {
				return err
			}
			after, err := a.LookupClaim(ctx, host)
			if err != nil {
				return err
			}
			if !after.ClaimedAt.After(before.ClaimedAt) {
				return fmt.Errorf("claimed at %s, then %s after the renewal", before.ClaimedAt, after.ClaimedAt)
			}
			return nil
		}, nil, "ws-b/d2"},
		// The Recounter frees a claim whose Domain did not exist yet (a request stalled past the
		// stale age): the Domain, which exists when it confirms, claims the free host again.
		{"d2's claim freed as stale is claimed again on confirm", func() error {
			if err := a.ReleaseHost(ctx, d2, host); err != nil {
				return err
			}
			return a.ConfirmClaim(ctx, d2, host)
		}, nil, "ws-b/d2"},
	} {
		if err := step.do(); !errors.Is(err, step.wantErr) {
			t.Fatalf("%s: got %v, want %v", step.what, err, step.wantErr)
		}
		held, err := a.LookupClaim(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if held != nil {
			got = held.Domain
		}
		if got != step.holder {
			t.Fatalf("%s: held by %q, want %q", step.what, got, step.holder)
		}
	}
}

// A claim whose request is still in flight (its Domain does not exist yet, and the request
// keeps renewing the claim, as a create slowed by the API server does) past another
// claimant's wait is undecided for that claimant, never "taken": the request may yet fail,
// and a 409 would then name a holder that never was (the history test caught this). Once
// the request stops renewing, the next claimant takes the name over.
func TestClaimInFlightIsUndecided(t *testing.T) {
	a := admitter(t)
	ctx := context.Background()
	defer func(w time.Duration) { admission.InFlightWait = w }(admission.InFlightWait)
	admission.InFlightWait = 1500 * time.Millisecond
	const host = "inflight.agents.localhost"
	slow := &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: "ws-slow", Name: "never-created"}}
	other := &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: "ws-other", Name: "d"}}
	if err := a.ClaimHost(ctx, slow, host); err != nil {
		t.Fatal(err)
	}
	renewing, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(admission.InFlightWait / 15):
			}
			if err := a.RenewClaim(ctx, slow, host); err != nil {
				t.Errorf("renew: %v", err)
				return
			}
		}
	}()
	err := a.ClaimHost(ctx, other, host)
	close(stop)
	<-renewing
	if !errors.Is(err, admission.ErrClaimUndecided) || errors.Is(err, admission.ErrHostTaken) {
		t.Fatalf("claiming a host whose claim stayed in flight: got %v, want ErrClaimUndecided", err)
	}
	if held, err := a.LookupClaim(ctx, host); err != nil || held == nil || held.Domain != admission.DomainKey(slow) {
		t.Fatalf("the in-flight claim changed hands: %+v, %v", held, err)
	}
	// The request died: its claim goes stale and the next claimant takes the name.
	if err := a.ClaimHost(ctx, other, host); err != nil {
		t.Fatalf("claim after the in-flight request stopped renewing: %v", err)
	}
}

func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Group: agentsv1.GroupVersion.Group, Resource: "domains"}
	for _, tc := range []struct {
		what string
		err  error
		want bool
	}{
		{"already exists", apierrors.NewAlreadyExists(gr, "d"), true},
		{"invalid", apierrors.NewInvalid(agentsv1.GroupVersion.WithKind("Domain").GroupKind(), "d", nil), true},
		{"forbidden", apierrors.NewForbidden(gr, "d", errors.New("quota")), true},
		{"namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ws"), true},
		{"wrapped refusal", fmt.Errorf("create: %w", apierrors.NewAlreadyExists(gr, "d")), true},
		{"answer lost with the connection", io.ErrUnexpectedEOF, false},
		{"request cancelled", context.Canceled, false},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 1), false},
		{"request timeout", apierrors.NewTimeoutError("slow etcd", 1), false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false},
		{"internal error", apierrors.NewInternalError(errors.New("etcd")), false},
		{"unavailable, the API server's answer", apierrors.NewServiceUnavailable("Resource kind Agent not found"), true},
		{"unavailable, a proxy's page", apierrors.NewGenericServerResponse(503, "POST", gr, "d", "upstream reset", 0, true), false},
	} {
		if got := admission.Refused(tc.err); got != tc.want {
			t.Errorf("%s: Refused = %v, want %v", tc.what, got, tc.want)
		}
	}
}

func TestClaimName(t *testing.T) {
	n := admission.ClaimName("docs.example.com")
	if n != admission.ClaimName("DOCS.example.com") || len(n) != len("domain-")+40 || !strings.HasPrefix(n, "domain-") {
		t.Fatalf("claim name %q", n)
	}
	if n == admission.ClaimName("docs.example.org") {
		t.Fatal("different hosts share a claim name")
	}
}
