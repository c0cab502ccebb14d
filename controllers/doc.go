// Package controllers holds one reconciler per kind of api/v1alpha1. Every reconciler has one
// form (cluster-api's):
//
//	func (r *XReconciler) Reconcile(ctx, req) (_ ctrl.Result, reterr error) {
//		read the object (gone: forget what the process keeps of it, return)
//		if it is being deleted: return r.reconcileDelete(ctx, obj)
//		add the finalizer, for kinds that hold one
//		before := obj.DeepCopy()
//		defer r.patchStatus(ctx, obj, before, reterr == nil)
//		return r.reconcileNormal(ctx, obj)
//	}
//
// reconcileNormal changes the world and computes the status on obj; it never writes it.
// patchStatus, the one deferred step, derives the summary (Ready) from the other conditions,
// acknowledges the generation (status.observedGeneration) only when the pass ended without
// error, and writes the status through patchStatusIfChanged only when it changed (an
// unchanged status costs no request). What a pass that failed writes is the kind's
// patchStatus's choice: an Agent or a Domain records it without acknowledging the generation;
// kinds whose status is consistent only after a whole pass (an EngineUpgrade's waves, a
// Workspace's counts, an AgentSecret's or a Skill's conditions) write nothing.
//
// reconcileDelete releases what the object holds and then its finalizer; a kind whose
// deletion waits and says why in its status (a Channel) defers the same patchStatus there.
// Kinds whose passes must not act on a stale cache (a Snapshot's archive) read the object live
// before they act; their form is the same.
package controllers
