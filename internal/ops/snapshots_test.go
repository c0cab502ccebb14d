package ops

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// TestSnapshotInputRules: the rules sync, reset and the history apply before they ask the
// controllers anything.
func TestSnapshotInputRules(t *testing.T) {
	ctx := context.Background()
	ws := Scope{Namespace: "ws"}
	st, cids := stored(t, 1)
	o, _ := fakeOps(Deps{}, agentObject("a1", false))
	withStore, _ := fakeOps(Deps{Files: st}, agentObject("a1", false))
	for _, tc := range []struct {
		what    string
		err     error
		code    Code
		message string
	}{
		{"reset: not a CID", third(o.ResetSnapshot(ctx, ws, "a1", "nope")), Invalid, MsgInvalidSnapshotCID},
		{"reset: no CID", third(o.ResetSnapshot(ctx, ws, "a1", "")), Invalid, MsgInvalidSnapshotCID},
		{"reset: a missing agent", third(o.ResetSnapshot(ctx, ws, "nobody", cids[0])), NotFound, MsgAgentNotFound},
		{"reset: a CID out of the history", third(withStore.ResetSnapshot(ctx, ws, "a1", cids[0])), NotFound, MsgSnapshotNotFound},
		{"sync: a missing agent", second(o.SyncSnapshot(ctx, ws, "nobody")), NotFound, MsgAgentNotFound},
		{"sync without storage", second(o.SyncSnapshot(ctx, ws, "a1")), Invalid, MsgStorageMissing},
		{"history: another agent than a bound credential's", second(o.Snapshots(ctx, Scope{Namespace: "ws", OnlyAgent: "a2"}, "a1")), NotFound, MsgAgentNotFound},
	} {
		wantFail(t, tc.what, tc.err, tc.code, tc.message)
	}
	list, err := withStore.Snapshots(ctx, ws, "a1")
	if err != nil || len(list) != 0 {
		t.Fatalf("an empty history: %v, %v", list, err)
	}
}

// TestRestoreFailure: how the Agent controller's reasons read.
func TestRestoreFailure(t *testing.T) {
	for _, tc := range []struct {
		reason  string
		code    Code
		message string
	}{
		{agentsv1.ReasonSnapshotNotFound, NotFound, MsgSnapshotNotFound},
		{agentsv1.ReasonStorageNotConfigured, Invalid, MsgStorageMissing},
		{"SomethingElse", Internal, MsgResetFailed},
	} {
		wantFail(t, tc.reason, restoreFailure(&metav1.Condition{Reason: tc.reason}), tc.code, tc.message)
	}
	if err := restoreFailure(&metav1.Condition{Reason: agentsv1.ReasonStorageUnavailable}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unreachable storage: %v", err)
	}
}
