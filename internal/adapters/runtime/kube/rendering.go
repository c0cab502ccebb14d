package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Annotations of the gateway pod (its StatefulSet's pod template), next to
// agentsv1.AnnotationConfigHash.
const (
	// AnnotationRendering is the rendering of the pod (Rendering): which manager's rendering
	// of the gateway the pod runs. A pod without it was made by an earlier version.
	AnnotationRendering = "agentplane.io/rendering"
	// AnnotationPodSettings digests the agent's own settings that its pod spec carries and
	// the config hash does not (podSettings): a change of them restarts the pod at once.
	AnnotationPodSettings = "agentplane.io/pod-settings"
)

// Every agent's StatefulSet is OnDelete: the StatefulSet controller never replaces a pod by
// itself, the runtime decides when a gateway restarts (settlePod), so a new manager that
// renders the pods differently restarts none of them at once:
//
//   - the pod's config hash (ConfigHash: the agent's config, restart nonce, engine version,
//     secrets) or pod settings (the agent's resources, RuntimeClass) differ from the agent's:
//     the agent asked for the change, the pod is restarted now (and gets the new rendering);
//   - only the rendering differs: the pod is restarted when runtime.Desired.AllowedRendering
//     names the rendering the manager renders now (a rollout's wave allows it), otherwise it
//     keeps running and Observed.RenderingOutdated says so;
//   - only the labels differ: they are patched onto the live pod (network policies select
//     pods by them); nothing restarts.

// renderingDigest digests what a pod is made of as the manager renders it: the pod
// template's spec, with the agent's initial engine config (the seed container's SeedEnv, which
// only seeds a home that has no config yet) held out, and without the template's metadata
// (labels and annotations reach a live pod without a restart). What the agent's desired state
// changes of the spec is covered by the config hash and the pod settings, which restart the pod
// on their own; so two renderings of one agent differ, for the same desired state, only when
// the manager renders the pod differently (a probe, an init step, a default resource, an
// image template, the pod's security).
func renderingDigest(spec corev1.PodSpec) string {
	spec = *spec.DeepCopy()
	for i := range spec.InitContainers {
		for j := range spec.InitContainers[i].Env {
			if spec.InitContainers[i].Env[j].Name == SeedEnv {
				spec.InitContainers[i].Env[j].Value = ""
			}
		}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		panic(fmt.Sprintf("kube runtime: encode a pod spec: %v", err)) // a PodSpec always encodes
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// podSettings digests the agent's own settings its pod spec carries outside the config hash:
// its resources and its (or its workspace's) RuntimeClass. Their values stay as the agent
// gave them: a change of the platform's defaults is a change of the rendering, not of these.
func podSettings(a *agentsv1.Agent, d runtime.Desired) string {
	raw, _ := json.Marshal(struct {
		Resources        *agentsv1.AgentResources `json:"r,omitempty"`
		RuntimeClassName string                   `json:"c,omitempty"`
	}{a.Spec.Resources, d.RuntimeClassName})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// referenceAgent is the agent the runtime renders to name its rendering of every agent
// (PlatformRendering): the same for every manager.
var referenceAgent = &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "reference", Namespace: "reference"}}

// PlatformRendering names how this runtime renders gateway pods: the rendering digest of a
// fixed reference agent. Two managers that render pods the same way have the same name; a
// manager that renders any part of the pod differently has another. It prefixes every
// agent's Rendering, so a rendering also says which manager computed it.
func (r *Runtime) PlatformRendering() string {
	sts, err := buildStatefulSet(referenceAgent, runtime.Desired{EngineVersion: "0.0.0", GatewayTokenSecret: "reference"}, r.opts)
	if err != nil {
		return ""
	}
	return renderingDigest(sts.Spec.Template.Spec)[:10]
}

// stampRendering annotates the built pod template with its rendering and the agent's pod
// settings.
func (r *Runtime) stampRendering(a *agentsv1.Agent, d runtime.Desired, tmpl *corev1.PodTemplateSpec) {
	tmpl.Annotations[AnnotationRendering] = r.platform + "." + renderingDigest(tmpl.Spec)
	tmpl.Annotations[AnnotationPodSettings] = podSettings(a, d)
}

// podDecision is what settlePod does with a live pod.
type podDecision int

const (
	keepPod      podDecision = iota // the pod runs what the agent wants (at most labels differ)
	keepOutdated                    // only the rendering differs and no rollout allows it yet
	restartPod                      // the pod is to be replaced
)

// decide compares the live pod with the pod template the runtime built (want).
func decide(pod *corev1.Pod, want *corev1.PodTemplateSpec, d runtime.Desired) podDecision {
	have, tmpl := pod.Annotations, want.Annotations
	if have[agentsv1.AnnotationConfigHash] != tmpl[agentsv1.AnnotationConfigHash] {
		return restartPod
	}
	// A pod of an earlier version has no settings stamp: what it runs of the agent's settings
	// is not known, so only its rendering decides.
	if s := have[AnnotationPodSettings]; s != "" && s != tmpl[AnnotationPodSettings] {
		return restartPod
	}
	if have[AnnotationRendering] == tmpl[AnnotationRendering] {
		return keepPod
	}
	if d.AllowedRendering != "" && d.AllowedRendering == tmpl[AnnotationRendering] {
		return restartPod
	}
	return keepOutdated
}

// settlePod restarts the agent's live pod when decide says so, otherwise gives it the
// template's labels in place, and reports whether the pod runs an outdated rendering.
func (r *Runtime) settlePod(ctx context.Context, d runtime.Desired, want *corev1.PodTemplateSpec, pod *corev1.Pod) (outdated bool, err error) {
	if d.Stopped || pod == nil || pod.DeletionTimestamp != nil {
		return false, nil
	}
	switch decide(pod, want, d) {
	case restartPod:
		err := r.opts.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("restart the gateway: %w", err)
		}
		if pod.Annotations[agentsv1.AnnotationConfigHash] == want.Annotations[agentsv1.AnnotationConfigHash] {
			// Observed as going away (a config change is observed as Updating).
			pod.DeletionTimestamp = &metav1.Time{Time: r.opts.Clock.Now()}
		}
		return false, nil
	case keepOutdated:
		outdated = true
	}
	return outdated, r.relabelPod(ctx, want.Labels, pod)
}

// relabelPod sets the template's labels on the live pod when one is missing or differs (a
// label the manager no longer renders is left: it selects nothing of the platform's).
func (r *Runtime) relabelPod(ctx context.Context, labels map[string]string, pod *corev1.Pod) error {
	missing := false
	for k, v := range labels {
		if pod.Labels[k] != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	base := pod.DeepCopy()
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	maps.Copy(pod.Labels, labels)
	if err := r.opts.Client.Patch(ctx, pod, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("label the gateway pod: %w", err)
	}
	return nil
}
