package domain

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
)

// fakeResolver answers from a map and counts look-ups.
type fakeResolver struct {
	values map[string][]string
	err    error
	calls  int
}

func (f *fakeResolver) LookupTXT(_ context.Context, name string) ([]string, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if v, ok := f.values[name]; ok {
		return v, nil
	}
	return nil, dnsverify.ErrNotFound
}

func TestCheckDelayDoublesUpToTheCeiling(t *testing.T) {
	r := &Reconciler{}
	want := []time.Duration{10, 20, 40, 80, 160, 320, 600, 600}
	for i, w := range want {
		if got := r.checkDelay(int32(i + 1)); got != w*time.Second {
			t.Errorf("delay after check %d = %v, want %v", i+1, got, w*time.Second)
		}
	}
}

func TestCheckOwnership(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 500e6, time.UTC))
	res := &fakeResolver{values: map[string][]string{}}
	r := &Reconciler{Resolver: res, TokenKey: []byte("k"), Clock: clk}
	d := &agentsv1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "d", Generation: 3},
		Spec: agentsv1.DomainSpec{CustomDomain: "docs.example.com"}}
	d.Status.Verification = r.verification(d)
	if d.Status.Verification.RecordName != "_agentplane-verify.docs.example.com" {
		t.Fatalf("record %q", d.Status.Verification.RecordName)
	}
	check := func(wantCalls int, wantReason string) time.Duration {
		t.Helper()
		v, wait := r.checkOwnership(context.Background(), d)
		meta.SetStatusCondition(&d.Status.Conditions, computeVerifiedCondition(d, v))
		ok := v.status == metav1.ConditionTrue
		if res.calls != wantCalls {
			t.Fatalf("look-ups = %d, want %d", res.calls, wantCalls)
		}
		c := meta.FindStatusCondition(d.Status.Conditions, agentsv1.DomainVerified)
		if c == nil || c.Reason != wantReason || c.ObservedGeneration != d.Generation || ok != (c.Status == metav1.ConditionTrue) {
			t.Fatalf("condition %+v (verified %v), want reason %s", c, ok, wantReason)
		}
		return wait
	}

	// First check: nothing there; the next one is due 10s later (rounded up to the second).
	if wait := check(1, string(dnsverify.Missing)); wait != 10500*time.Millisecond {
		t.Fatalf("wait %v", wait)
	}
	if d.Status.Checks != 1 || !d.Status.LastChecked.Time.Equal(clk.Now().Truncate(time.Second)) ||
		!d.Status.NextCheck.Time.Equal(time.Date(2026, 1, 1, 0, 0, 11, 0, time.UTC)) {
		t.Fatalf("status %+v", d.Status)
	}
	// A reconcile for another reason before the next check looks nothing up.
	clk.SetTime(clk.Now().Add(5 * time.Second))
	if wait := check(1, string(dnsverify.Missing)); wait != 5500*time.Millisecond {
		t.Fatalf("wait %v", wait)
	}
	// Due: a wrong value; the delay doubles.
	clk.SetTime(clk.Now().Add(6 * time.Second))
	res.values[d.Status.Verification.RecordName] = []string{"not-the-token"}
	if wait := check(2, string(dnsverify.Mismatch)); wait < 20*time.Second || wait > 21*time.Second {
		t.Fatalf("wait %v", wait)
	}
	// DNS down: unavailable, still not verified.
	clk.SetTime(clk.Now().Add(21 * time.Second))
	res.err = dnsverify.ErrUnavailable
	check(3, string(dnsverify.Unavailable))
	if d.Status.Checks != 3 {
		t.Fatalf("checks %d", d.Status.Checks)
	}
	// A requested check runs at once and restarts the delay.
	res.err = nil
	clk.SetTime(clk.Now().Add(time.Second))
	d.Annotations = map[string]string{agentsv1.AnnotationVerifyRequested: clk.Now().Format(time.RFC3339Nano)}
	check(4, string(dnsverify.Mismatch))
	if d.Status.Checks != 1 {
		t.Fatalf("a requested check restarts the count: %d", d.Status.Checks)
	}
	// The request is answered: no second look-up for it.
	check(4, string(dnsverify.Mismatch))
	// The right token verifies; afterwards nothing is looked up again.
	clk.SetTime(clk.Now().Add(time.Minute))
	res.values[d.Status.Verification.RecordName] = []string{"other", d.Status.Verification.Token}
	check(5, agentsv1.ReasonDomainVerified)
	if d.Status.NextCheck != nil {
		t.Fatalf("next check after verification: %v", d.Status.NextCheck)
	}
	clk.SetTime(clk.Now().Add(time.Hour))
	d.Generation = 4
	check(5, agentsv1.ReasonDomainVerified)
}

// Each verify request is answered by a look-up of its own, however close in time to the last
// one (two in one second: the second asks after its DNS change), and only once; a value that
// is no time asks for nothing. The look-up's time is the controller's own, whatever the
// requester's clock says.
func TestEachVerifyRequestIsAnsweredOnce(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 300_000_000, time.UTC)
	res := &fakeResolver{values: map[string][]string{}}
	r := &Reconciler{Resolver: res, Clock: testingclock.NewFakePassiveClock(now)}
	d := &agentsv1.Domain{Spec: agentsv1.DomainSpec{CustomDomain: "docs.example.com"}}
	d.Status.Verification = r.verification(d)
	r.checkOwnership(context.Background(), d)
	for i, req := range []time.Time{now.Add(100 * time.Millisecond), now.Add(200 * time.Millisecond), now.Add(time.Hour)} {
		d.Annotations = map[string]string{agentsv1.AnnotationVerifyRequested: req.Format(time.RFC3339Nano)}
		r.checkOwnership(context.Background(), d)
		r.checkOwnership(context.Background(), d)
		if res.calls != i+2 || d.Status.VerifyRequestAnswered != req.Format(time.RFC3339Nano) {
			t.Fatalf("request %d: %d look-ups, answered %q", i, res.calls, d.Status.VerifyRequestAnswered)
		}
		if !d.Status.LastChecked.Time.Equal(now.Truncate(time.Second)) {
			t.Fatalf("request %d: lastChecked %v, not the controller's own time", i, d.Status.LastChecked)
		}
	}
	d.Annotations = map[string]string{agentsv1.AnnotationVerifyRequested: "now please"}
	r.checkOwnership(context.Background(), d)
	if res.calls != 4 {
		t.Fatalf("a value that is no time was looked up: %d", res.calls)
	}
}
