package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// sendingRelay is a relay whose agent has a send in flight while sending is true.
type sendingRelay struct {
	testChannelRelay
	sending *bool
}

func (r sendingRelay) Busy(types.NamespacedName) bool { return *r.sending }

// An agent's suspend waits while a call of its that may change something on a chat network is
// in flight through the relay (a checkpoint would cut it and the restored engine would send it
// again), looking again soon; it waits at most sendHoldMax, and a new send after the last one
// was answered waits anew.
func TestHoldSuspendWaitsForSends(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	sending := false
	r := &Reconciler{Clock: clk, ChannelRelay: sendingRelay{sending: &sending}}
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1", UID: "u1"}}
	check := func(step string, wantHeld bool) {
		t.Helper()
		held, again := r.holdSuspend(agent)
		if held != wantHeld || (held && again != sendHoldRetry) || (!held && again != 0) {
			t.Fatalf("%s: held %v, again in %s; want held %v", step, held, again, wantHeld)
		}
	}
	check("nothing in flight", false)
	sending = true
	check("a send in flight", true)
	clk.SetTime(clk.Now().Add(sendHoldMax - time.Millisecond))
	check("still in flight, just before the bound", true)
	clk.SetTime(clk.Now().Add(time.Millisecond))
	check("in flight for the whole bound", false)
	sending = false
	check("answered", false)
	sending = true
	check("a new send", true)
	if held, _ := (&Reconciler{Clock: clk}).holdSuspend(agent); held {
		t.Fatal("without a relay the suspend waited")
	}
}
