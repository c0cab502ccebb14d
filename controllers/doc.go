// Package controllers is what the reconcilers of api/v1alpha1's kinds share; each kind's
// reconciler is a package of its own below it (cluster-api's internal/controllers/<kind>):
//
//	controllers/agent          Agents: the runtime, engine config, skills, sleep, restores
//	controllers/agentsecret    AgentSecrets
//	controllers/channel        Channels: engine plugins, their render's report
//	controllers/domain         Domains: ownership checks, routing
//	controllers/engineupgrade  EngineUpgrades and RenderingRollouts: waves of agents
//	controllers/gatewaypool    GatewayPools: warm gateways
//	controllers/skill          Skills
//	controllers/snapshot       Snapshots: archives, quota, retention
//	controllers/storageversion every kind: objects moved to the CRDs' storage version (a runnable of
//	                           the leader at start, not a reconciler: its type is Migrator)
//	controllers/workspace      Workspaces: namespaces, counts
//
// Each package's type is Reconciler (agent.Reconciler), with the RBAC markers it needs (make
// manifests builds config/rbac from them). A controller package imports this one and never
// another controller package (test/arch checks it); what two of them need goes here: the
// status patch (PatchStatusIfChanged, SummarizeReady), the field indexes and the mappers from
// an Agent to its objects (SetupIndexes, ChannelsOfAgent...), what the Agent and Channel
// controllers both read of Channels (channels.go), bounds of condition messages and the
// storage retry wait (conditions.go). The envtest suite (package controllers_test here) runs
// the controllers together against one control plane; unit tests sit with their package.
//
// Every reconciler has one form (cluster-api's):
//
//	func (r *Reconciler) Reconcile(ctx, req) (_ ctrl.Result, reterr error) {
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
// error, and writes the status through PatchStatusIfChanged only when it changed (an
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
