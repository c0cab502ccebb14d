package ops

import (
	"errors"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/scheme"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// wantFail checks that err is an *Error of code with the contract's exact message.
func wantFail(t *testing.T, what string, err error, code Code, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: got %v, want %s %q", what, err, code, msg)
	}
	if e.Code != code || e.Message != msg {
		t.Fatalf("%s: got %s %q, want %s %q", what, e.Code, e.Message, code, msg)
	}
}

// fakeOps is the operations over the controller-runtime fake client holding objs, with d's
// other dependencies; without an Admitter of its own, agents are admitted with the engine
// versions 1.0 (default) and 1.1.
func fakeOps(d Deps, objs ...client.Object) (*Ops, client.Client) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&agentsv1.Agent{}, &agentsv1.Skill{}, &agentsv1.Snapshot{}).
		WithIndex(&eventsv1.Event{}, EventTypeField, func(o client.Object) []string { return []string{o.(*eventsv1.Event).Type} }).
		Build()
	d.Client = c
	if d.Admission == nil {
		d.Admission = &admission.Admitter{Client: c, Versions: admission.Versions{Default: "1.0", Available: []string{"1.0", "1.1"}}}
	}
	return New(d), c
}
