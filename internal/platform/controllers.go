package platform

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	agentsecretctrl "github.com/agentplane/agentplane/controllers/agentsecret"
	gatewaypoolctrl "github.com/agentplane/agentplane/controllers/gatewaypool"
	skillctrl "github.com/agentplane/agentplane/controllers/skill"
	workspacectrl "github.com/agentplane/agentplane/controllers/workspace"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// setupControllers registers every controller with the manager.
func (p *Platform) setupControllers() error {
	mgr := p.Manager
	if err := (&workspacectrl.Reconciler{Client: mgr.GetClient(), Limiter: p.limiter}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&admission.Recounter{
		Admitter: p.admission, Cache: mgr.GetClient(), Interval: p.opts.RecountInterval, Log: p.opts.Log.WithName("recount"),
	}); err != nil {
		return err
	}
	if err := (&agentsecretctrl.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sealer: p.sealer}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&skillctrl.Reconciler{Client: mgr.GetClient(), Store: p.opts.Files}).SetupWithManager(mgr); err != nil {
		return err
	}
	if p.runtime != nil {
		r := &agentctrl.Reconciler{
			Client: mgr.GetClient(), Runtime: p.runtime, Admission: p.admission,
			Recorder: eventRecorder(mgr, "agentplane-agent"), Workers: p.opts.AgentWorkers,
			Sleep:  agentctrl.SleepOptions{WakeLead: p.opts.WakeLead, WakeWindow: p.opts.WakeWindow, TaskGrace: p.opts.TaskGrace},
			Skills: p.opts.Files, Engine: openclaw.New(),
			Snapshots: p.opts.Files, SnapshotReader: mgr.GetAPIReader(), APIReader: mgr.GetAPIReader(),
			Env: &agentctrl.SecretEnv{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sealer: p.sealer,
				DerivedSecret: p.opts.Runtime.Name == RuntimeKube, ModelProxy: p.controllersModelProxy(),
				ChannelRelay: p.controllersChannelRelay(),
			},
			ModelProxy: p.controllersModelProxy(), ChannelRelay: p.controllersChannelRelay(),
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	// Warm gateway pools: kept by a runtime that can (local); reported as unsupported on others.
	if err := (&gatewaypoolctrl.Reconciler{
		Client: mgr.GetClient(), Runtime: p.runtime, Versions: p.versions,
		Recorder: eventRecorder(mgr, "agentplane-gatewaypool"), Metrics: metrics.Registry,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := p.setupSnapshots(); err != nil {
		return err
	}
	if err := p.setupChannels(); err != nil {
		return err
	}
	if err := p.setupChannelWatch(); err != nil {
		return err
	}
	if err := p.setupAgentMetrics(); err != nil {
		return err
	}
	if err := p.setupStorageMigration(); err != nil {
		return err
	}
	if p.runtime != nil { // no gateways here to check an upgrade on
		if err := p.setupUpgrades(); err != nil {
			return err
		}
	}
	return nil
}
