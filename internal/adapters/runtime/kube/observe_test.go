package kube

import (
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

var t0 = metav1.NewTime(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC))

func observeWant() want {
	return want{Hash: "h1", Image: "ghcr.io/openclaw/openclaw:" + engine.PinnedVersion, Version: engine.PinnedVersion,
		Endpoint: "http://a1.ws1.svc:18789", ImageTemplate: DefaultImage}
}

// testPod is a pod of the current template whose gateway is in state st.
func testPod(st corev1.ContainerState, ready bool, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a1-0", CreationTimestamp: t0,
			Annotations: map[string]string{agentsv1.AnnotationConfigHash: "h1"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerGateway, Image: "ghcr.io/openclaw/openclaw:" + engine.PinnedVersion}}},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerGateway, State: st, Ready: ready, RestartCount: 2}},
		},
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: t0}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// testNode is node n1 with its Ready condition at status.
func testNode(status corev1.ConditionStatus) *corev1.Node {
	msg := "kubelet is posting ready status"
	if status != corev1.ConditionTrue {
		msg = "Kubelet stopped posting node status."
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: status, Message: msg, LastTransitionTime: t0}}}}
}

var (
	running  = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}}
	crashing = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
)

func TestObserve(t *testing.T) {
	one := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1)}}
	zero := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0)}}
	for _, tc := range []struct {
		name     string
		sts      *appsv1.StatefulSet
		pod      *corev1.Pod
		node     *corev1.Node
		stopped  bool
		phase    runtime.Phase
		reason   string
		message  string // substring
		version  string
		restarts int32
	}{
		{name: "ready", sts: one, pod: testPod(running, true), phase: runtime.PhaseRunning, reason: agentsv1.ReasonHealthy,
			version: engine.PinnedVersion, restarts: 2},
		{name: "replicas zero", sts: zero, pod: testPod(running, true), phase: runtime.PhaseStopped, reason: agentsv1.ReasonStopped,
			version: engine.PinnedVersion, restarts: 2},
		{name: "stopped, no pod", sts: one, stopped: true, phase: runtime.PhaseStopped, reason: agentsv1.ReasonStopped},
		{name: "no pod yet", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonPodNotCreated},
		{name: "booting", sts: one, pod: testPod(running, false), phase: runtime.PhaseStarting, reason: agentsv1.ReasonStarting,
			version: engine.PinnedVersion, restarts: 2},
		{name: "crash loop", sts: one, phase: runtime.PhaseCrashed, reason: "CrashLoopBackOff",
			pod: testPod(crashing, false, func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
					ExitCode: 78, Reason: "Error", Message: "Missing config", FinishedAt: t0}
			}),
			message:  "back-off 40s restarting failed container: container gateway exited with code 78 (Error): Missing config",
			restarts: 2},
		{name: "image pull", sts: one, phase: runtime.PhaseCrashed, reason: "ImagePullBackOff", message: "not found",
			pod:      testPod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "manifest not found"}}, false),
			restarts: 2},
		{name: "missing secret", sts: one, phase: runtime.PhaseCrashed, reason: "CreateContainerConfigError", message: "secret",
			pod:      testPod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "a1-env" not found`}}, false),
			restarts: 2},
		{name: "exited non-zero", sts: one, phase: runtime.PhaseCrashed, reason: "OOMKilled", message: "code 137",
			pod:      testPod(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}, false),
			restarts: 2},
		{name: "exited zero", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonStarting,
			pod:      testPod(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}, false),
			restarts: 2},
		{name: "init container crash", sts: one, phase: runtime.PhaseCrashed, reason: "CrashLoopBackOff",
			pod: testPod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}, false, func(p *corev1.Pod) {
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: ContainerSeed, State: crashing}}
			}), restarts: 2},
		{name: "container creating", sts: one, phase: runtime.PhaseStarting, reason: "ContainerCreating",
			pod:      testPod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, false),
			restarts: 2},
		{name: "evicted", sts: one, phase: runtime.PhaseCrashed, reason: "Evicted", message: "memory",
			pod: testPod(running, false, func(p *corev1.Pod) {
				p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "low on memory"
			}), version: engine.PinnedVersion, restarts: 2},
		{name: "unschedulable", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonUnschedulable, message: "Insufficient memory",
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{agentsv1.AnnotationConfigHash: "h1"}},
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes: Insufficient memory",
					LastTransitionTime: t0}}}}},
		{name: "old config, ready", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonUpdating,
			pod:     testPod(running, true, func(p *corev1.Pod) { p.Annotations[agentsv1.AnnotationConfigHash] = "old" }),
			version: engine.PinnedVersion, restarts: 2},
		{name: "old config, crashed", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonUpdating,
			pod:      testPod(crashing, false, func(p *corev1.Pod) { p.Annotations[agentsv1.AnnotationConfigHash] = "old" }),
			restarts: 2},
		{name: "terminating", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonPodTerminating,
			pod:     testPod(running, true, func(p *corev1.Pod) { p.DeletionTimestamp = &t0 }),
			version: engine.PinnedVersion, restarts: 2},
		{name: "older image runs", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonUpdating,
			pod: testPod(running, true, func(p *corev1.Pod) {
				p.Annotations[agentsv1.AnnotationConfigHash] = "old"
				p.Spec.Containers[0].Image = "ghcr.io/openclaw/openclaw:2026.9.1"
			}), version: "2026.9.1", restarts: 2},
		{name: "node stopped reporting", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonNodeNotReady,
			message: "node n1 is not ready: Kubelet stopped posting node status.",
			pod: testPod(running, true, func(p *corev1.Pod) {
				// The node controller marks the pod not Ready; the container status is the
				// kubelet's last word.
				p.Status.Conditions[0].Status = corev1.ConditionFalse
			}),
			node: testNode(corev1.ConditionUnknown), version: engine.PinnedVersion, restarts: 2},
		{name: "not ready on a Ready node", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonStarting,
			pod: testPod(running, false), node: testNode(corev1.ConditionTrue), version: engine.PinnedVersion, restarts: 2},
		{name: "restarted after a crash, starting up", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonCrashed,
			message: "restarting after container gateway exited with code 137 (Error)",
			pod: testPod(running, false, func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].Started = ptr.To(false)
				p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
					ExitCode: 137, Reason: "Error", FinishedAt: t0}
			}), version: engine.PinnedVersion, restarts: 2},
		{name: "started long after a crash, not ready", sts: one, phase: runtime.PhaseStarting, reason: agentsv1.ReasonStarting,
			pod: testPod(running, false, func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].Started = ptr.To(true)
				p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
					ExitCode: 137, Reason: "Error", FinishedAt: t0}
			}), version: engine.PinnedVersion, restarts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := observeWant()
			w.Stopped = tc.stopped
			o := observe(tc.sts, tc.pod, tc.node, w)
			if o.Phase != tc.phase || o.Reason != tc.reason {
				t.Errorf("phase %s/%s, want %s/%s (%s)", o.Phase, o.Reason, tc.phase, tc.reason, o.Message)
			}
			if !strings.Contains(o.Message, tc.message) {
				t.Errorf("message %q, want it to contain %q", o.Message, tc.message)
			}
			if o.EngineVersion != tc.version || o.Restarts != tc.restarts || o.Endpoint != w.Endpoint {
				t.Errorf("version %q restarts %d endpoint %q", o.EngineVersion, o.Restarts, o.Endpoint)
			}
			if tc.pod != nil && tc.phase != runtime.PhaseStopped && o.Since.IsZero() {
				t.Error("Since not set")
			}
		})
	}
}
