package platform

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/admission"
	"github.com/agentplane/agentplane/internal/engine/openclaw"
)

// setupControllers registers every controller with the manager.
func (p *Platform) setupControllers() error {
	mgr := p.Manager
	if err := (&controllers.WorkspaceReconciler{Client: mgr.GetClient(), Limiter: p.limiter}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&admission.Recounter{
		Admitter: p.admission, Cache: mgr.GetClient(), Interval: p.opts.RecountInterval, Log: p.opts.Log.WithName("recount"),
	}); err != nil {
		return err
	}
	if err := (&controllers.AgentSecretReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sealer: p.sealer}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controllers.SkillReconciler{Client: mgr.GetClient(), Store: p.opts.Files}).SetupWithManager(mgr); err != nil {
		return err
	}
	if p.runtime != nil {
		r := &controllers.AgentReconciler{
			Client: mgr.GetClient(), Runtime: p.runtime, Admission: p.admission,
			Recorder: mgr.GetEventRecorder("agentplane-agent"), Workers: p.opts.AgentWorkers,
			Sleep:  controllers.SleepOptions{WakeLead: p.opts.WakeLead, WakeWindow: p.opts.WakeWindow, TaskGrace: p.opts.TaskGrace},
			Skills: p.opts.Files, Engine: openclaw.New(),
			Snapshots: p.opts.Files, SnapshotReader: mgr.GetAPIReader(), APIReader: mgr.GetAPIReader(),
			Env: &controllers.SecretEnv{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sealer: p.sealer,
				DerivedSecret: p.opts.Runtime.Name == RuntimeKube, ModelProxy: p.controllersModelProxy(),
			},
			ModelProxy: p.controllersModelProxy(),
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	// Warm gateway pools: kept by a runtime that can (local); reported as unsupported on others.
	if err := (&controllers.GatewayPoolReconciler{
		Client: mgr.GetClient(), Runtime: p.runtime, Versions: p.versions,
		Recorder: mgr.GetEventRecorder("agentplane-gatewaypool"), Metrics: metrics.Registry,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := p.setupSnapshots(); err != nil {
		return err
	}
	if err := p.setupChannels(); err != nil {
		return err
	}
	if err := p.setupAgentMetrics(); err != nil {
		return err
	}
	if p.runtime != nil { // no gateways here to check an upgrade on
		if err := p.setupUpgrades(); err != nil {
			return err
		}
	}
	return nil
}
