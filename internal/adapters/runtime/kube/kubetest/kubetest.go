// Package kubetest is the kube runtime's fixture for the runtime contract (runtimetest), on
// any API server: under envtest, where no pod ever runs and the caller plays the StatefulSet
// controller and the kubelet (Cluster.PlayKubelet; internal/adapters/runtime/kube's envtest tests do),
// or on a cluster with a real node, where the suite also runs the promises about the
// gateway's home (files, commands, logs, archives).
//
//	runtimetest.Run(t, func(t *testing.T) *runtimetest.Fixture {
//		return kubetest.Fixture(t, kubetest.Cluster{Runtime: rt, Client: c, Layout: l, Version: v, OtherVersion: w})
//	})
package kubetest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/runtimetest"
)

// Cluster is the kube runtime under test and the cluster it runs agents on.
type Cluster struct {
	// Runtime is the kube runtime under test.
	Runtime *kube.Runtime
	// Client reads and writes the cluster directly (no cache).
	Client client.Client
	// Layout is the layout of the runtime's engine.
	Layout engine.Layout
	// Version and OtherVersion are engine versions the runtime runs (images the node has).
	Version, OtherVersion string
	// PlayKubelet, under envtest, does the next step the StatefulSet controller or the kubelet
	// would take for the agent's StatefulSet (the suite calls it while it waits); no gateway
	// runs then. nil: a real StatefulSet controller and kubelet run the pods, and the suite
	// runs the promises about the gateway's home too.
	PlayKubelet func(t *testing.T, a *agentsv1.Agent)
	// Timeout bounds each wait of the suite (0: runtimetest.DefaultTimeout).
	Timeout time.Duration
}

var seq atomic.Int64

// Fixture is the contract fixture of one subtest: its agents live in a namespace of their
// own (deleted at cleanup on a cluster with a kubelet; envtest never finishes deleting one).
func Fixture(t *testing.T, c Cluster) *runtimetest.Fixture {
	t.Helper()
	ns := fmt.Sprintf("contract-%d-%d", time.Now().UnixNano()%1e9, seq.Add(1))
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Client.Create(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}
	if c.PlayKubelet == nil {
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), nsObj) })
	}
	f := &runtimetest.Fixture{
		Runtime:        c.Runtime,
		NewAgent:       func(t *testing.T, name string) *agentsv1.Agent { return c.newAgent(t, ns, name) },
		Desired:        c.desired,
		OtherVersion:   c.OtherVersion,
		RunningVersion: func(v string) string { return v },
		Layout:         c.Layout,
		Gateway:        c.gateway,
		Kept:           c.kept,
		Gateways:       c.PlayKubelet == nil,
		Timeout:        c.Timeout,
	}
	if c.PlayKubelet == nil {
		f.BeforeEnsure = c.writeSecrets
	} else {
		f.Settle = c.PlayKubelet
	}
	return f
}

func (c Cluster) newAgent(t *testing.T, ns, name string) *agentsv1.Agent {
	t.Helper()
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentsv1.AgentSpec{DisplayName: "Contract " + name}}
	if err := c.Client.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func (c Cluster) desired(a *agentsv1.Agent) runtime.Desired {
	return runtime.Desired{
		EngineVersion: c.Version, GatewayToken: "tok-" + a.Name + "-0123456789",
		GatewayTokenSecret: agentsv1.GatewayTokenSecretName(a.Name), EnvSecret: agentsv1.EnvSecretName(a.Name),
		Identity: engine.Identity{Name: "Contract " + a.Name},
	}
}

// writeSecrets writes the Secrets d names, as the Agent controller does before Ensure: the
// pod reads its token and environment from them.
func (c Cluster) writeSecrets(t *testing.T, a *agentsv1.Agent, d runtime.Desired) {
	t.Helper()
	for name, data := range map[string]map[string]string{
		d.GatewayTokenSecret: {kube.TokenKey: d.GatewayToken},
		d.EnvSecret:          d.Env,
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: name}}
		if _, err := controllerutil.CreateOrUpdate(t.Context(), c.Client, s, func() error {
			s.StringData, s.Data = data, nil
			return nil
		}); err != nil {
			t.Fatalf("secret %s: %v", name, err)
		}
	}
}

// gateway is the UID of the agent's pod, "" when it has none (or one being deleted).
func (c Cluster) gateway(t *testing.T, a *agentsv1.Agent) string {
	t.Helper()
	pod := &corev1.Pod{}
	err := c.Client.Get(t.Context(), client.ObjectKey{Namespace: a.Namespace, Name: kube.PodName(a)}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return ""
	case err != nil:
		t.Fatal(err)
	}
	if pod.DeletionTimestamp != nil || pod.Labels[agentsv1.LabelAgent] != a.Name {
		return ""
	}
	return string(pod.UID)
}

// kept lists the objects labelled with the agent that are not being deleted.
func (c Cluster) kept(t *testing.T, a *agentsv1.Agent) []string {
	t.Helper()
	var out []string
	for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.PodList{}, &corev1.PersistentVolumeClaimList{},
		&corev1.ServiceList{}, &corev1.ConfigMapList{}, &networkingv1.NetworkPolicyList{}} {
		if err := c.Client.List(t.Context(), list, client.InNamespace(a.Namespace),
			client.MatchingLabels{agentsv1.LabelAgent: a.Name}); err != nil {
			t.Fatal(err)
		}
		items, err := metaItems(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range items {
			if m.GetDeletionTimestamp() == nil {
				out = append(out, fmt.Sprintf("%T %s", list, m.GetName()))
			}
		}
	}
	slices.Sort(out)
	return out
}

// metaItems are the objects of list.
func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	objs, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		m, err := apimeta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
