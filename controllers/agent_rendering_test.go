package controllers_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

// The Agent controller on the kube runtime with no RenderingRollout running (the platform's
// next-restart setting): it reports the gateway's rendering, restarts nothing for a rendering
// alone, and passes agentplane.io/allowed-rendering on to the runtime.
var _ = Describe("Agent rendering (kube runtime, next-restart)", Ordered, func() {
	var stop context.CancelFunc
	BeforeAll(func() { stop = startAgentManager() })
	AfterAll(func() { stop() })

	It("reports Current and Outdated, keeps an outdated pod, restarts it once allowed", func() {
		ns := agentWorkspace("agents-rendering", 5)
		a := createAgent(ns, "rnd")
		playKubelet(a, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, true, 0)
		Eventually(func() agentsv1.AgentRendering { return getAgent(a).Status.Rendering }).Should(Equal(agentsv1.RenderingCurrent))
		target := getAgent(a).Status.RenderingTarget
		Expect(target).NotTo(BeEmpty())

		// The pod an earlier manager rendered differently.
		pod := &corev1.Pod{}
		key := client.ObjectKey{Namespace: ns, Name: "rnd-0"}
		Expect(k8sClient.Get(ctx, key, pod)).To(Succeed())
		base := pod.DeepCopy()
		pod.Annotations[kube.AnnotationRendering] = "earlier.0123456789abcdef"
		Expect(k8sClient.Patch(ctx, pod, client.MergeFrom(base))).To(Succeed())
		uid := pod.UID
		pokeAgents([]*agentsv1.Agent{a})
		Eventually(func() agentsv1.AgentRendering { return getAgent(a).Status.Rendering }).Should(Equal(agentsv1.RenderingOutdated))
		podUID := func() types.UID {
			p := &corev1.Pod{}
			if err := k8sClient.Get(ctx, key, p); err != nil {
				return ""
			}
			return p.UID
		}
		// The pass that reported Outdated kept the pod; so does a pass that began after it.
		Expect(podUID()).To(Equal(uid))
		agentPasses.settle(a)
		Expect(podUID()).To(Equal(uid))

		// A rollout's allowance restarts it.
		Eventually(func() error {
			got := getAgent(a)
			got.Annotations[agentsv1.AnnotationAllowedRendering] = target
			return k8sClient.Update(ctx, got)
		}).Should(Succeed())
		Eventually(podUID).ShouldNot(Equal(uid))
	})
})
