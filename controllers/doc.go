// Package controllers is what the reconcilers of api/v1alpha1's kinds share; each kind's
// reconciler is a package of its own below it (cluster-api's internal/controllers/<kind>):
//
//	controllers/agent             Agents: the runtime, engine config, skills, sleep, restores
//	controllers/agentsecret       AgentSecrets
//	controllers/channel           Channels: engine plugins, their render's report
//	controllers/domain            Domains: ownership checks, routing
//	controllers/engineupgrade     EngineUpgrades: waves of agents to an engine version
//	controllers/gatewaypool       GatewayPools: warm gateways
//	controllers/renderingrollout  RenderingRollouts: waves of agents to the manager's rendering
//	controllers/skill             Skills
//	controllers/snapshot          Snapshots: archives, quota, retention
//	controllers/storageversion    every kind: objects moved to the CRDs' storage version (a runnable
//	                              of the leader at start, not a reconciler: its type is Migrator)
//	controllers/workspace         Workspaces: namespaces, counts
//
// Each package's type is Reconciler (agent.Reconciler), with the RBAC markers it needs (make
// manifests builds config/rbac from them), and its unit tests, table tests on a fake client.
// A controller package imports this one and never another controller package (test/arch
// checks it); what two of them need goes here: the status step (PatchStatus, StatusStep,
// PatchStatusIfChanged, SummarizeReady), the field indexes and the mappers from an Agent to its
// objects (SetupIndexes, ChannelsOfAgent...), what the Agent and Channel controllers both read
// of Channels (channels.go), the waves both rollout kinds run (Rollout, RolloutGoal:
// rollout*.go), bounds of condition messages and the storage retry wait (conditions.go). The
// envtest suite (package controllers_test here) runs the controllers together against one
// control plane.
//
// Every reconciler has one form (cluster-api's):
//
//	func (r *Reconciler) Reconcile(ctx, req) (res ctrl.Result, reterr error) {
//		read the object (gone: forget what the process keeps of it, return)
//		if it is being deleted: return r.reconcileDelete(ctx, obj)
//		add the finalizer, for kinds that hold one
//		before := obj.DeepCopy()
//		defer func() { controllers.PatchStatus(ctx, r.Client, obj, before, r.statusStep(obj, before), &res, &reterr) }()
//		return r.reconcileNormal(ctx, obj)
//	}
//
// reconcileNormal changes the world in small phases (functions of its own) and records on obj,
// or in a pass value the status step reads, what it found; it never writes the status. Each
// condition is made in one place, a compute…Condition function (or, for the rollouts' Ready,
// SetRolloutStatus, where their phase and counts are made too), and set with
// meta.SetStatusCondition.
// PatchStatus, the one deferred step, runs the kind's StatusStep: Compute derives the summary
// (Ready) from the other conditions and acknowledges the generation
// (status.observedGeneration) only when the pass ended without error, and says whether to
// write at all; the write goes through PatchStatusIfChanged only when the status changed (an
// unchanged status costs no request); Written records what follows a write (phase events, the
// claims a GatewayPool took as applied). What a pass that failed writes is the kind's
// choice: an Agent, a Domain, a Channel or a Snapshot records it without acknowledging the
// generation; kinds whose status is consistent only after a whole pass (the rollouts' waves, a
// Workspace's counts, an AgentSecret's or a Skill's conditions) write nothing. A write that
// conflicts is the pass's error, or, for the kinds that set RequeueOnConflict (the rollouts, a
// GatewayPool), a run again on fresh data after StaleCacheRetry.
//
// reconcileDelete releases what the object holds and then its finalizer; a kind whose
// deletion waits and says why in its status (a Channel, a Workspace's phase) defers the same
// step there. Kinds whose passes must not act on a stale cache (a Snapshot's archive) read the
// object live before they act; their form is the same.
//
// Status writers that are not reconcilers (the quota, the usage recorder, the storage
// migration) change a few fields of an object they read and write them with the read
// resourceVersion through internal/statuspatch's loop, which reads again on a conflict.
package controllers
