package platform

import (
	"context"
	"fmt"
	"sort"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/engine"
	"github.com/agentplane/agentplane/internal/engine/openclaw"
	"github.com/agentplane/agentplane/internal/runtime"
	"github.com/agentplane/agentplane/internal/runtime/kube"
	"github.com/agentplane/agentplane/internal/runtime/local"
)

// Runtime names.
const (
	RuntimeLocal = "local"
	RuntimeKube  = "kube"
)

// RuntimeOptions choose where agents run.
type RuntimeOptions struct {
	// Name is "local" (agents are processes on this host) or "kube" (StatefulSets); "" runs
	// no agents (facade-only replicas and tests that need none).
	Name string
	// DefaultVersion is the engine version of agents that name none.
	DefaultVersion string
	// Local: StateDir holds the agents' homes; EngineDirs maps a version to its install dir.
	StateDir   string
	EngineDirs map[string]string
	// Kube: Versions the cluster may run (images must exist); Image is the image template.
	Versions []string
	Image    string
}

// versions are the engine versions the configured runtime offers.
func (o RuntimeOptions) versions() engine.Versions {
	v := engine.Versions{Default: o.DefaultVersion}
	if o.Name == RuntimeLocal {
		for ver := range o.EngineDirs {
			v.Available = append(v.Available, ver)
		}
	} else {
		v.Available = append(v.Available, o.Versions...)
	}
	sort.Strings(v.Available)
	if v.Default == "" && len(v.Available) > 0 {
		v.Default = v.Available[len(v.Available)-1]
	}
	return v
}

// kubeCacheObjects restricts the cache to the Pods and StatefulSets agentplane manages.
func kubeCacheObjects(byObject map[client.Object]cache.ByObject) {
	managed := labels.SelectorFromSet(labels.Set{agentsv1.LabelAppManagedBy: agentsv1.ManagedBy})
	byObject[&corev1.Pod{}] = cache.ByObject{Label: managed}
	byObject[&appsv1.StatefulSet{}] = cache.ByObject{Label: managed}
	byObject[&corev1.Service{}] = cache.ByObject{Label: managed}
	byObject[&corev1.ConfigMap{}] = cache.ByObject{Label: managed}
}

// buildRuntime makes the configured runtime; notify receives its out-of-band notifications.
func (p *Platform) buildRuntime(notify chan event.GenericEvent) (runtime.Runtime, func(*ctrl.Builder) *ctrl.Builder, error) {
	o := p.opts.Runtime
	eng := openclaw.New()
	mgr := p.Manager
	switch o.Name {
	case "":
		return nil, nil, nil
	case RuntimeLocal:
		rt, err := local.New(local.Options{
			StateDir: o.StateDir, Engine: eng, EngineDirs: o.EngineDirs,
			Notify: controllers.NotifyFunc(notify), Log: p.opts.Log.WithName("runtime"),
		})
		if err != nil {
			return nil, nil, err
		}
		p.shutdown = rt.Shutdown
		return rt, nil, nil
	case RuntimeKube:
		rt := kube.New(kube.Options{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RESTConfig: mgr.GetConfig(),
			Scheme: mgr.GetScheme(), Engine: eng, Image: o.Image,
		})
		watch := func(b *ctrl.Builder) *ctrl.Builder {
			return b.Owns(&appsv1.StatefulSet{}).Owns(&corev1.Service{}).Owns(&corev1.ConfigMap{}).
				Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToAgent))
		}
		return rt, watch, nil
	}
	return nil, nil, fmt.Errorf("unknown runtime %q (local or kube)", o.Name)
}

// podToAgent maps an agent's pod to the agent.
func podToAgent(_ context.Context, o client.Object) []reconcile.Request {
	if a := o.GetLabels()[agentsv1.LabelAgent]; a != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: a}}}
	}
	return nil
}
