package localcluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Simulated (KWOK) nodes join the cluster beside the real node for scale work: the kwok
// controller (hack/build-kwok.sh) keeps them Ready and plays their pods' lifecycle (scheduled
// pods become Running and Ready at once; nothing runs). They carry SimulatedNodeKey as a
// label, an annotation (how the kwok controller selects the nodes it manages) and a
// NoSchedule taint, so a pod lands on one only if it tolerates the taint; selecting the
// label keeps it off the real node.
const (
	SimulatedNodeKey   = "kwok.x-k8s.io/node"
	SimulatedNodeValue = "fake"
	// SimulatedNodePrefix + i names the i-th simulated node.
	SimulatedNodePrefix = "kwok-node-"
	// MaxSimulatedNodes: each simulated node gets a /24 of its own out of simulatedPodNet.
	MaxSimulatedNodes = 256
	// simulatedPodNet is the pods' fake addresses: node i gives 10.245.i.0/24 (not routed;
	// apart from PodCIDR and ServiceCIDR).
	simulatedPodNet = "10.245.%d.0/24"
	// kwokLease is how long a simulated node's Lease lasts; the controller renews it, which
	// is what keeps the node Ready (its status heartbeat is every 10 minutes).
	kwokLease = 40
)

// DefaultSimulatedNodeCapacity is a simulated node's capacity and allocatable when
// Options.SimulatedNodeCapacity is empty: room for 250 pods (the node's /24) of the gateway's
// default requests (500m CPU, 1.5 GiB).
var DefaultSimulatedNodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("256"),
	corev1.ResourceMemory: resource.MustParse("1Ti"),
	corev1.ResourcePods:   resource.MustParse("250"),
}

// SimulatedNodeTaint keeps pods that do not tolerate it off the simulated nodes.
var SimulatedNodeTaint = corev1.Taint{Key: SimulatedNodeKey, Value: SimulatedNodeValue, Effect: corev1.TaintEffectNoSchedule}

// SimulatedNodeSelector selects the simulated nodes (a pod's nodeSelector).
func SimulatedNodeSelector() map[string]string {
	return map[string]string{SimulatedNodeKey: SimulatedNodeValue}
}

// SimulatedNodeToleration tolerates SimulatedNodeTaint.
func SimulatedNodeToleration() corev1.Toleration {
	t := SimulatedNodeTaint
	return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect}
}

// SimulatedNodeName is the name of the i-th simulated node.
func SimulatedNodeName(i int) string { return SimulatedNodePrefix + strconv.Itoa(i) }

// IsSimulated tells whether n is a simulated node.
func IsSimulated(n *corev1.Node) bool { return n.Labels[SimulatedNodeKey] == SimulatedNodeValue }

// kwokFiles are what Start needs in BinDir for simulated nodes (make cluster-binaries).
var kwokFiles = []string{"kwok", "kwok-stages.yaml"}

// startKwok runs the kwok controller on the nodes annotated SimulatedNodeKey, with the stages
// kwokctl gives a cluster by default, then creates Options.SimulatedNodes nodes and waits
// until they are Ready.
func (c *Cluster) startKwok(ctx context.Context) error {
	p, err := start("kwok", c.bin("kwok"), []string{
		"--kubeconfig", c.Kubeconfig,
		"--config", c.bin("kwok-stages.yaml"),
		"--manage-nodes-with-annotation-selector", SimulatedNodeKey + "=" + SimulatedNodeValue,
		// No --server-address: it serves no kubelet API (no logs or exec of simulated pods).
		"--node-lease-duration-seconds", strconv.Itoa(kwokLease),
	}, c.LogDir, c.Dir)
	if err != nil {
		return err
	}
	c.kwok = p
	capacity := c.opts.SimulatedNodeCapacity
	if len(capacity) == 0 {
		capacity = DefaultSimulatedNodeCapacity
	}
	for i := range c.opts.SimulatedNodes {
		name := SimulatedNodeName(i)
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					SimulatedNodeKey:          SimulatedNodeValue,
					corev1.LabelHostname:      name,
					corev1.LabelOSStable:      "linux",
					corev1.LabelArchStable:    "amd64",
					"node.kubernetes.io/kwok": "true",
				},
				Annotations: map[string]string{
					SimulatedNodeKey:               SimulatedNodeValue,
					"node.alpha.kubernetes.io/ttl": "0",
				},
			},
			Spec: corev1.NodeSpec{
				Taints:   []corev1.Taint{SimulatedNodeTaint},
				PodCIDR:  fmt.Sprintf(simulatedPodNet, i),
				PodCIDRs: []string{fmt.Sprintf(simulatedPodNet, i)},
			},
			Status: corev1.NodeStatus{Capacity: capacity.DeepCopy(), Allocatable: capacity.DeepCopy()},
		}
		if err := c.Client.Create(ctx, n); err != nil {
			return fmt.Errorf("simulated node %s: %w", name, err)
		}
	}
	return waitFor(ctx, "the simulated nodes to be Ready", time.Minute, p, func() error {
		var nodes corev1.NodeList
		if err := c.Client.List(ctx, &nodes, client.MatchingLabels(SimulatedNodeSelector())); err != nil {
			return err
		}
		ready := 0
		for i := range nodes.Items {
			if nodeCondition(&nodes.Items[i], corev1.NodeReady) == corev1.ConditionTrue {
				ready++
			}
		}
		if ready < c.opts.SimulatedNodes {
			return fmt.Errorf("%d of %d simulated nodes Ready", ready, c.opts.SimulatedNodes)
		}
		return nil
	})
}

// nodeCondition is the status of n's condition t ("" when it has none).
func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == t {
			return cond.Status
		}
	}
	return ""
}
