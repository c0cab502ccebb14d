package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusStep is what a kind's reconciler says of its status step (PatchStatus): what it
// computes once the pass is over, and how the write goes.
type StatusStep struct {
	// Compute computes what a pass computes last (the Ready summary from the other
	// conditions; status.observedGeneration when the pass converged) from passOK (the pass
	// ended without error) and reports whether the status is to be written: a kind whose
	// status is consistent only after a whole pass writes nothing after a failed one. nil:
	// the status is written as the pass left it.
	Compute func(passOK bool) (write bool)
	// Written runs once the write ended without error; changed reports a patch was sent
	// (events of phase changes, what the controller keeps of its own writes). nil: nothing.
	Written func(changed bool)
	// RequeueOnConflict: a write that conflicted (the pass read a stale cache) is no error;
	// the pass runs again on fresh data after StaleCacheRetry. Otherwise the conflict is the
	// pass's error (and the workqueue's backoff runs it again).
	RequeueOnConflict bool
	// Options of the write (WithoutLock).
	Options []StatusPatchOption
}

// PatchStatus is the one deferred status step of every reconciler (doc.go):
//
//	before := obj.DeepCopy()
//	defer func() { controllers.PatchStatus(ctx, r.Client, obj, before, r.statusStep(obj, before), &res, &reterr) }()
//	return r.reconcileNormal(ctx, obj)
//
// It runs step.Compute with whether the pass ended without error, writes the status through
// PatchStatusIfChanged when Compute says so, and then runs step.Written. A failed write
// becomes the pass's error (unless the pass failed already, whose error stays), or, with
// RequeueOnConflict, a conflict a run again after StaleCacheRetry.
func PatchStatus(ctx context.Context, c client.Client, obj, before client.Object, step StatusStep, res *ctrl.Result, reterr *error) {
	if step.Compute != nil && !step.Compute(*reterr == nil) {
		return
	}
	changed, err := PatchStatusIfChanged(ctx, c, obj, before, step.Options...)
	switch {
	case err == nil:
		if step.Written != nil {
			step.Written(changed)
		}
	case step.RequeueOnConflict && apierrors.IsConflict(err):
		if *reterr == nil {
			*res = ctrl.Result{RequeueAfter: StaleCacheRetry} // again on fresh data
		}
	case *reterr == nil:
		*res, *reterr = ctrl.Result{}, err
	}
}

// PatchStatusIfChanged writes obj's status when it differs from before's (a copy of obj taken
// when the pass read it) and reports whether it wrote. The write is a merge patch of the
// status subresource from before's status, with optimistic lock: a merge patch replaces whole
// lists (conditions), so a pass that read an older object than the stored one must not put its
// stale lists back — it conflicts and the pass runs again on fresh data. An unchanged status
// costs no request (and so triggers no further pass). A status that is gone (the object was
// deleted) is no error. The patch names the controllers' field manager and carries only their
// fields (ownStatusFields): the status fields of other writers are theirs alone.
//
// Every reconciler writes its status through this helper, called by PatchStatus. obj and before must be pointers to
// the same struct type with a Status field (every kind of api/v1alpha1). WithoutLock is for a
// status its controller alone writes and that records an effect the pass already had (a
// Snapshot's archive): the patch must land rather than conflict and repeat the effect.
func PatchStatusIfChanged(ctx context.Context, c client.Client, obj, before client.Object, opts ...StatusPatchOption) (bool, error) {
	now, was, err := statusFields(obj, before)
	if err != nil {
		return false, err
	}
	if equality.Semantic.DeepEqual(now.Interface(), was.Interface()) {
		return false, nil
	}
	// The patch base is obj as it is now (its resourceVersion is what the pass last saw,
	// including its own spec or metadata writes) with the status it read.
	orig := obj.DeepCopyObject().(client.Object)
	reflect.ValueOf(orig).Elem().FieldByName("Status").Set(was)
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if slices.Contains(opts, WithoutLock) {
		patch = client.MergeFrom(orig)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return false, err
	}
	data, ours, err := ownStatusFields(data, reflect.TypeOf(obj).Elem().Name())
	if err != nil || !ours {
		return false, err
	}
	if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data),
		client.FieldOwner(agentsv1.ControllerFieldManager)); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// ownStatusFields is the merge patch data without the status fields of kind that another
// writer owns (agentsv1.StatusFieldManagers: quota slots, model usage): a reconciler reads
// them with the object but never writes them, not even the value it read. It reports whether
// a status field of the controller's own is left to write.
func ownStatusFields(data []byte, kind string) ([]byte, bool, error) {
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, false, fmt.Errorf("patch status: %w", err)
	}
	status, _ := p["status"].(map[string]any)
	for field := range status {
		if agentsv1.StatusFieldManager(kind, field) != agentsv1.ControllerFieldManager {
			delete(status, field)
		}
	}
	if len(status) == 0 {
		return nil, false, nil
	}
	data, err := json.Marshal(p)
	return data, true, err
}

// StatusPatchOption changes how PatchStatusIfChanged writes.
type StatusPatchOption int

// WithoutLock: a plain merge patch, no optimistic lock.
const WithoutLock StatusPatchOption = 1

// statusFields returns the Status fields of obj and before.
func statusFields(obj, before client.Object) (reflect.Value, reflect.Value, error) {
	o, b := reflect.ValueOf(obj), reflect.ValueOf(before)
	if o.Kind() != reflect.Pointer || b.Type() != o.Type() {
		return reflect.Value{}, reflect.Value{}, fmt.Errorf("patch status: %T and %T are not pointers of one type", obj, before)
	}
	now, was := o.Elem().FieldByName("Status"), b.Elem().FieldByName("Status")
	if !now.IsValid() {
		return reflect.Value{}, reflect.Value{}, fmt.Errorf("patch status: %T has no Status field", obj)
	}
	return now, was, nil
}

// SummarizeReady is a kind's Ready condition from the conditions it sums up, in order: True
// (with the last one's reason) when every one is True, else False with the reason and message
// of the first that is not True, or NotChecked (notChecked) when one is missing.
func SummarizeReady(conds []metav1.Condition, generation int64, notChecked string, types ...string) metav1.Condition {
	c := metav1.Condition{Type: agentsv1.ConditionReady, ObservedGeneration: generation, Status: metav1.ConditionFalse,
		Reason: agentsv1.ReasonNotChecked, Message: notChecked}
	for _, typ := range types {
		got := meta.FindStatusCondition(conds, typ)
		switch {
		case got == nil:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, agentsv1.ReasonNotChecked, notChecked
			return c
		case got.Status != metav1.ConditionTrue:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, got.Reason, got.Message
			return c
		}
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, got.Reason, got.Message
	}
	return c
}
