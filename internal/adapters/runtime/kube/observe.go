package kube

import (
	"fmt"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// crashReasons are container waiting reasons that mean the gateway cannot run without help.
var crashReasons = map[string]bool{
	"CrashLoopBackOff":           true,
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
	"PreStartHookError":          true,
	"PostStartHookError":         true,
}

// want is what observe compares the StatefulSet and its pod with.
type want struct {
	Hash, Image, Version, Endpoint, ImageTemplate string
	Stopped                                       bool
}

// observe computes what the runtime reports from the StatefulSet, its pod and the pod's node
// (nil: none, or not known).
func observe(sts *appsv1.StatefulSet, pod *corev1.Pod, node *corev1.Node, w want) runtime.Observed {
	o := runtime.Observed{Endpoint: w.Endpoint}
	var gw *corev1.ContainerStatus
	if pod != nil {
		gw = containerStatus(pod.Status.ContainerStatuses, ContainerGateway)
		if gw != nil {
			o.Restarts = gw.RestartCount
		}
		if gw != nil && gw.State.Running != nil {
			o.EngineVersion = runningVersion(pod, w)
		}
	}
	switch {
	case w.Stopped || (sts != nil && sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0):
		o.Phase, o.Reason, o.Message = runtime.PhaseStopped, agentsv1.ReasonStopped, "the gateway is stopped"
		return o
	case pod == nil:
		o.Phase, o.Reason, o.Message = runtime.PhaseStarting, agentsv1.ReasonPodNotCreated, "waiting for the pod to be created"
		if sts != nil {
			o.Since = sts.CreationTimestamp.Time
		}
		return o
	case pod.DeletionTimestamp != nil:
		return starting(o, pod, agentsv1.ReasonPodTerminating, "the previous pod is shutting down")
	case pod.Annotations[agentsv1.AnnotationConfigHash] != w.Hash:
		return starting(o, pod, agentsv1.ReasonUpdating, "the pod is being replaced with the new configuration")
	}
	if c, ok := crashed(pod); ok {
		c.Endpoint, c.EngineVersion, c.Restarts = o.Endpoint, o.EngineVersion, o.Restarts
		return c
	}
	if cond := podCondition(pod, corev1.PodReady); cond != nil && cond.Status == corev1.ConditionTrue && gw != nil && gw.Ready {
		o.Phase, o.Reason, o.Message = runtime.PhaseRunning, agentsv1.ReasonHealthy, "the gateway answers its health check"
		o.Since = cond.LastTransitionTime.Time
		return o
	}
	// A node that stopped reporting: the node controller marks its pods not Ready, and what
	// the gateway does is unknown until the kubelet reports again.
	if cond := nodeNotReady(node); cond != nil {
		o = starting(o, pod, agentsv1.ReasonNodeNotReady, fmt.Sprintf("node %s is not ready: %s", node.Name, cond.Message))
		o.Since = cond.LastTransitionTime.Time
		return o
	}
	if cond := podCondition(pod, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionFalse {
		o = starting(o, pod, agentsv1.ReasonUnschedulable, cond.Message)
		if !cond.LastTransitionTime.IsZero() {
			o.Since = cond.LastTransitionTime.Time
		}
		return o
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			return starting(o, pod, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
	}
	// A gateway the kubelet restarted after it exited, not yet through its startup probe.
	if gw != nil && gw.State.Running != nil && gw.LastTerminationState.Terminated != nil && (gw.Started == nil || !*gw.Started) {
		o = starting(o, pod, agentsv1.ReasonCrashed, "restarting after "+exitMessage(gw.Name, gw.LastTerminationState.Terminated))
		o.Since = lastFinished(*gw, pod)
		return o
	}
	return starting(o, pod, agentsv1.ReasonStarting, "the gateway is starting")
}

// nodeNotReady is the Ready condition of a node that is not Ready, or nil.
func nodeNotReady(node *corev1.Node) *corev1.NodeCondition {
	if node == nil {
		return nil
	}
	for i := range node.Status.Conditions {
		if c := &node.Status.Conditions[i]; c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func starting(o runtime.Observed, pod *corev1.Pod, reason, msg string) runtime.Observed {
	o.Phase, o.Reason, o.Message = runtime.PhaseStarting, reason, msg
	o.Since = pod.CreationTimestamp.Time
	return o
}

// crashed reports a failed pod, an init or gateway container that keeps failing, or a gateway
// that exited with an error.
func crashed(pod *corev1.Pod) (runtime.Observed, bool) {
	if pod.Status.Phase == corev1.PodFailed {
		reason := pod.Status.Reason
		if reason == "" {
			reason = agentsv1.ReasonPodFailed
		}
		return runtime.Observed{Phase: runtime.PhaseCrashed, Reason: reason, Message: pod.Status.Message,
			Since: pod.CreationTimestamp.Time}, true
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && crashReasons[w.Reason] {
			msg := w.Message
			if t := cs.LastTerminationState.Terminated; t != nil {
				msg = joinMsg(msg, exitMessage(cs.Name, t))
			}
			return runtime.Observed{Phase: runtime.PhaseCrashed, Reason: w.Reason, Message: msg,
				Since: lastFinished(cs, pod)}, true
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			reason := t.Reason
			if reason == "" {
				reason = agentsv1.ReasonPodExited
			}
			since := t.FinishedAt.Time
			if since.IsZero() {
				since = pod.CreationTimestamp.Time
			}
			return runtime.Observed{Phase: runtime.PhaseCrashed, Reason: reason, Message: exitMessage(cs.Name, t),
				Since: since}, true
		}
	}
	return runtime.Observed{}, false
}

func exitMessage(container string, t *corev1.ContainerStateTerminated) string {
	msg := fmt.Sprintf("container %s exited with code %d", container, t.ExitCode)
	if t.Reason != "" {
		msg += " (" + t.Reason + ")"
	}
	return joinMsg(msg, t.Message)
}

func joinMsg(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}

func lastFinished(cs corev1.ContainerStatus, pod *corev1.Pod) time.Time {
	if t := cs.LastTerminationState.Terminated; t != nil && !t.FinishedAt.IsZero() {
		return t.FinishedAt.Time
	}
	return pod.CreationTimestamp.Time
}

// runningVersion is the engine version of the running gateway: the desired one when the pod
// runs the desired image, otherwise what the image tag says.
func runningVersion(pod *corev1.Pod, w want) string {
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerGateway {
			continue
		}
		if c.Image == w.Image {
			return w.Version
		}
		return versionFromImage(w.ImageTemplate, c.Image)
	}
	return ""
}

func containerStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
