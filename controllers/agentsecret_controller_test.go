package controllers_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentsecretctrl "github.com/agentplane/agentplane/controllers/agentsecret"
)

var _ = Describe("AgentSecret status", Ordered, func() {
	const ns = "agentsecret-ctrl"
	var stop func()

	BeforeAll(func() {
		mgr := newManager()
		Expect((&agentsecretctrl.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr)).To(Succeed())
		stop = startManager(mgr)
		newWorkspaceNS(ns)
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-keys"},
			Data:       map[string][]byte{"openai": []byte("value-of-the-key")},
		})).To(Succeed())
	})
	AfterAll(func() { stop() })

	secretOf := func(name, specName, key string) *agentsv1.AgentSecret {
		s := &agentsv1.AgentSecret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: agentsv1.AgentSecretSpec{Name: specName, SecretRef: &agentsv1.SecretKeyReference{
				Name: "provider-keys", Key: key,
			}},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		return s
	}
	get := func(name string) *agentsv1.AgentSecret {
		s := &agentsv1.AgentSecret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		return s
	}
	// condition reports a condition of the secret's current generation as "Status/Reason".
	condition := func(name, typ string) func() string {
		return func() string {
			s := get(name)
			if c := meta.FindStatusCondition(s.Status.Conditions, typ); c != nil && c.ObservedGeneration == s.Generation && s.Status.ObservedGeneration == s.Generation {
				return string(c.Status) + "/" + c.Reason
			}
			return ""
		}
	}
	attachedTo := func(name string) func() []string {
		return func() []string { return get(name).Status.AttachedTo }
	}
	agentNaming := func(name string, secrets ...string) *agentsv1.Agent {
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1.AgentSpec{DisplayName: name, Stopped: true},
		}
		for _, s := range secrets {
			a.Spec.Secrets = append(a.Spec.Secrets, agentsv1.LocalObjectReference{Name: s})
		}
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		return a
	}
	setSecrets := func(a *agentsv1.Agent, secrets ...string) {
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		patch := client.MergeFrom(a.DeepCopy())
		a.Spec.Secrets = nil
		for _, s := range secrets {
			a.Spec.Secrets = append(a.Spec.Secrets, agentsv1.LocalObjectReference{Name: s})
		}
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
	}

	It("is Ready when the value is available and not when it is not", func() {
		secretOf("usable", "OPENAI_API_KEY", "openai")
		secretOf("dangling", "OTHER_KEY", "missing")
		Eventually(condition("usable", agentsv1.ConditionReady)).Should(Equal("True/" + agentsv1.ReasonValueAvailable))
		Eventually(condition("dangling", agentsv1.ConditionReady)).Should(Equal("False/" + agentsv1.ReasonValueUnavailable))
		Expect(condition("usable", agentsv1.SecretDuplicate)()).To(Equal("False/" + agentsv1.ReasonUnique))
	})

	It("derives attachedTo from the agents' specs: attach, a second agent, detach, agent deleted", func() {
		secretOf("shared", "SHARED_KEY", "openai")
		Eventually(condition("shared", agentsv1.ConditionReady)).Should(Equal("True/" + agentsv1.ReasonValueAvailable))
		Expect(get("shared").Status.AttachedTo).To(BeEmpty())

		a1 := agentNaming("holder-1", "shared")
		Eventually(attachedTo("shared")).Should(Equal([]string{"holder-1"}))
		a2 := agentNaming("holder-2", "usable", "shared")
		Eventually(attachedTo("shared")).Should(Equal([]string{"holder-1", "holder-2"}))
		Eventually(attachedTo("usable")).Should(Equal([]string{"holder-2"}))

		By("a detach through the spec reaches the secret the agent left")
		setSecrets(a1)
		Eventually(attachedTo("shared")).Should(Equal([]string{"holder-2"}))
		setSecrets(a2, "shared")
		Eventually(attachedTo("usable")).Should(BeEmpty())

		By("an agent deleted is no longer recorded")
		Expect(k8sClient.Delete(ctx, a2)).To(Succeed())
		Eventually(attachedTo("shared")).Should(BeEmpty())
		// A later attach is recorded by a pass that also sees holder-2 going (the agents'
		// events arrive in order); holder-2 stays out.
		agentNaming("holder-3", "shared")
		Eventually(attachedTo("shared")).Should(ContainElement("holder-3"))
		Expect(slices.Contains(get("shared").Status.AttachedTo, "holder-2")).To(BeFalse())
	})

	It("marks the newer of two secrets with one name Duplicate", func() {
		secretOf("first", "DUP_KEY", "openai")
		Eventually(condition("first", agentsv1.SecretDuplicate)).Should(Equal("False/" + agentsv1.ReasonUnique))
		secretOf("second", "DUP_KEY", "openai")
		Eventually(condition("second", agentsv1.SecretDuplicate)).Should(Equal("True/" + agentsv1.ReasonNameTaken))
		Expect(condition("first", agentsv1.SecretDuplicate)()).To(Equal("False/" + agentsv1.ReasonUnique))
	})
})
