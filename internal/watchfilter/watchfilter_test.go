package watchfilter

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestFilters(t *testing.T) {
	now := metav1.Now()
	agent := func(gen int64, deleting bool, conds ...metav1.Condition) *agentsv1.Agent {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: gen}}
		if deleting {
			a.DeletionTimestamp = &now
		}
		a.Status.Conditions = conds
		return a
	}
	suspended := func(s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: agentsv1.ConditionSuspended, Status: s, Reason: reason}
	}
	sleep := func(o, n *agentsv1.Agent) bool {
		return SpecOrDeletion(o, n) || ConditionChanged(o.Status.Conditions, n.Status.Conditions, agentsv1.ConditionSuspended)
	}
	flipped := func(o, n *agentsv1.Agent) bool {
		return ConditionFlipped(o.Status.Conditions, n.Status.Conditions, agentsv1.ConditionSuspended)
	}
	for _, c := range []struct {
		name          string
		changed       func(o, n *agentsv1.Agent) bool
		old, new      client.Object
		updates, only bool
	}{
		{"a status write", sleep, agent(1, false), agent(1, false), false, false},
		{"a spec change", sleep, agent(1, false), agent(2, false), true, true},
		{"a deletion start", sleep, agent(1, false), agent(1, true), true, true},
		{"a condition added", sleep, agent(1, false), agent(1, false, suspended("True", "Idle")), true, true},
		{"a condition's reason", sleep, agent(1, false, suspended("True", "Idle")), agent(1, false, suspended("True", "Asked")), true, true},
		{"a reason is no flip", flipped, agent(1, false, suspended("True", "Idle")), agent(1, false, suspended("True", "Asked")), false, false},
		{"a flip", flipped, agent(1, false, suspended("False", "Awake")), agent(1, false, suspended("True", "Idle")), true, true},
		{"another kind", sleep, &agentsv1.Channel{}, &agentsv1.Channel{}, true, false},
	} {
		e := event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}
		if got := Updates(c.changed).Update(e); got != c.updates {
			t.Errorf("%s: Updates passes %v, want %v", c.name, got, c.updates)
		}
		if got := OnlyUpdates(c.changed).Update(e); got != c.only {
			t.Errorf("%s: OnlyUpdates passes %v, want %v", c.name, got, c.only)
		}
	}
	a := agent(1, false)
	if !Updates(sleep).Create(event.CreateEvent{Object: a}) || !Updates(sleep).Delete(event.DeleteEvent{Object: a}) {
		t.Error("Updates must pass creations and deletions")
	}
	if OnlyUpdates(sleep).Create(event.CreateEvent{Object: a}) || OnlyUpdates(sleep).Delete(event.DeleteEvent{Object: a}) ||
		OnlyUpdates(sleep).Generic(event.GenericEvent{Object: a}) {
		t.Error("OnlyUpdates must pass only updates")
	}
}
