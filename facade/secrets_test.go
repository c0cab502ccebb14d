package facade_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// agentObject creates an Agent directly (no runtime runs in this suite's platform).
func agentObject(ns, name string) *agentsv1.Agent {
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: agentsv1.AgentSpec{DisplayName: name}}
	Expect(k8sClient.Create(ctx, a)).To(Succeed())
	return a
}

func secretID(r reply) string {
	s, _ := r.Body["secret"].(map[string]any)
	id, _ := s["id"].(string)
	return id
}

var _ = Describe("Secrets", func() {
	var tok string
	ws := "secrets-a"

	BeforeEach(func() {
		workspace(ws, agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "sue", Role: agentsv1.RoleOwner})
		tok = token(ws, "sue", "", auth.ScopeSecretsWrite, auth.ScopeAgentsWrite)
	})

	It("creates a secret sealed with AES-GCM: no plaintext in the object or any answer", func() {
		value := "sk-plaintext-must-not-leak-" + fmt.Sprint(GinkgoRandomSeed())
		r := call("POST", "/v0/secrets", tok, map[string]string{"name": "OPENAI_API_KEY", "value": value, "provider": "openai"})
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(r.Raw).NotTo(ContainSubstring(value))
		id := secretID(r)
		Expect(r.Body["secret"]).To(HaveKeyWithValue("envName", "OPENAI_API_KEY"))

		obj := &agentsv1.AgentSecret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: id}, obj)).To(Succeed())
		Expect(obj.Spec.EncryptedValue).NotTo(BeNil())
		raw, err := env.Client.Scheme().ConvertToVersion(obj, agentsv1.GroupVersion)
		Expect(err).NotTo(HaveOccurred())
		Expect(fmt.Sprintf("%+v", raw)).NotTo(ContainSubstring(value))
		Expect(obj.Spec.EncryptedValue.Ciphertext).NotTo(ContainSubstring(value))

		list := call("GET", "/v0/secrets", tok, nil)
		Expect(list.Status).To(Equal(200))
		Expect(list.Raw).NotTo(ContainSubstring(value))
		Expect(list.Raw).To(ContainSubstring("OPENAI_API_KEY"))
	})

	DescribeTable("refuses bad secrets with 400",
		func(body map[string]string, msg string) {
			r := call("POST", "/v0/secrets", tok, body)
			Expect(r.Status).To(Equal(400), r.Raw)
			Expect(r.v0Error()).To(Equal(msg))
		},
		Entry("empty name", map[string]string{"name": "", "value": "v"}, "Secret name is required"),
		Entry("blank name", map[string]string{"name": "   ", "value": "v"}, "Secret name is required"),
		Entry("empty value", map[string]string{"name": "X", "value": ""}, "Secret value is required"),
		Entry("missing value", map[string]string{"name": "X"}, "Secret value is required"),
		Entry("bad provider", map[string]string{"name": "X", "value": "v", "provider": "Open AI"}, "Invalid provider"),
	)

	It("answers 409 Duplicate secret name to exactly 19 of 20 concurrent creates", func() {
		var wg sync.WaitGroup
		codes := make(chan reply, 20)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				codes <- call("POST", "/v0/secrets", tok, map[string]string{"name": "RACE_SECRET", "value": fmt.Sprint(i)})
			}()
		}
		wg.Wait()
		close(codes)
		count := map[int]int{}
		for r := range codes {
			count[r.Status]++
			if r.Status == 409 {
				Expect(r.v0Error()).To(Equal("Duplicate secret name"))
			}
		}
		Expect(count).To(Equal(map[int]int{201: 1, 409: 19}))
		var all agentsv1.AgentSecretList
		Expect(k8sClient.List(ctx, &all, client.InNamespace(ws))).To(Succeed())
		n := 0
		for _, s := range all.Items {
			if s.Spec.Name == "RACE_SECRET" {
				n++
			}
		}
		Expect(n).To(Equal(1))
	})

	It("attaches secrets, refuses two of one provider, and refuses deleting an attached secret", func() {
		a := agentObject(ws, "agt-secrets-1")
		s1 := secretID(call("POST", "/v0/secrets", tok, map[string]string{"name": "ANTHROPIC_KEY_1", "value": "a1", "provider": "anthropic"}))
		s2 := secretID(call("POST", "/v0/secrets", tok, map[string]string{"name": "ANTHROPIC_KEY_2", "value": "a2", "provider": "anthropic"}))
		s3 := secretID(call("POST", "/v0/secrets", tok, map[string]string{"name": "PLAIN", "value": "p"}))

		Expect(call("POST", "/v0/agents/"+a.Name+"/secrets", tok, map[string]any{"secretIds": []string{"sec-missing"}}).Status).To(Equal(404))
		Expect(call("POST", "/v0/agents/agt-nope/secrets", tok, map[string]any{"secretIds": []string{s1}}).Status).To(Equal(404))
		Expect(call("POST", "/v0/agents/"+a.Name+"/secrets", tok, map[string]any{"secretIds": []string{}}).Status).To(Equal(400))

		r := call("POST", "/v0/agents/"+a.Name+"/secrets", tok, map[string]any{"secretIds": []string{s1, s3}})
		Expect(r.Status).To(Equal(200), r.Raw)
		r = call("POST", "/v0/agents/"+a.Name+"/secrets", tok, map[string]any{"secretIds": []string{s2}})
		Expect(r.Status).To(Equal(409))
		Expect(r.v0Error()).To(Equal("Conflicting secrets"))

		r = call("DELETE", "/v0/secrets/"+s1, tok, nil)
		Expect(r.Status).To(Equal(409), r.Raw)
		Expect(call("DELETE", "/v0/agents/"+a.Name+"/secrets/"+s1, tok, nil).Status).To(Equal(200))
		Expect(call("DELETE", "/v0/secrets/"+s1, tok, nil).Status).To(Equal(200))
		Expect(call("DELETE", "/v0/secrets/"+s1, tok, nil).Status).To(Equal(404))
	})

	It("never leaves an agent attached to a deleted secret when delete and attach race", func() {
		for i := range 10 {
			a := agentObject(ws, fmt.Sprintf("agt-race-%d", i))
			id := secretID(call("POST", "/v0/secrets", tok, map[string]string{"name": fmt.Sprintf("RACE_%d", i), "value": "v"}))
			var wg sync.WaitGroup
			var attach, del reply
			wg.Add(2)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				attach = call("POST", "/v0/agents/"+a.Name+"/secrets", tok, map[string]any{"secretIds": []string{id}})
			}()
			go func() { defer GinkgoRecover(); defer wg.Done(); del = call("DELETE", "/v0/secrets/"+id, tok, nil) }()
			wg.Wait()
			Expect([]int{attach.Status, del.Status}).To(Or(Equal([]int{200, 409}), Equal([]int{404, 200})), "attach %s / delete %s", attach.Raw, del.Raw)
			got := &agentsv1.Agent{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
			if del.Status == 200 {
				Expect(got.Spec.Secrets).To(BeEmpty(), "the agent must not reference the deleted secret")
			} else {
				Expect(got.Spec.Secrets).To(ConsistOf(agentsv1.LocalObjectReference{Name: id}))
			}
		}
	})

	It("answers 503 Secrets not configured without a key, and works once the key is provisioned", func() {
		const sysNS = "secrets-nokey-system"
		p2, url := startPlatform(ctx, platform.Options{SystemNamespace: sysNS, APIOnly: true})
		tok, _, err := auth.CreateKey(ctx, k8sClient, p2.Signer, auth.KeyRequest{Workspace: ws, UserID: "sue", Scopes: []string{auth.ScopeSecretsWrite}})
		Expect(err).NotTo(HaveOccurred())
		post := func() reply {
			return callURL(url, "POST", "/v0/secrets", tok, map[string]string{"name": "LATE_KEY", "value": "v"})
		}
		r := post()
		Expect(r.Status).To(Equal(503), r.Raw)
		Expect(r.v0Error()).To(Equal("Secrets not configured"))
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secrets.KeySecretName, Namespace: sysNS},
			Data:       map[string][]byte{"key": bytes.Repeat([]byte{1}, 32)},
		})).To(Succeed())
		Expect(post().Status).To(Equal(201))
	})

	It("keeps secrets apart between workspaces", func() {
		workspace("secrets-b", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "sam", Role: agentsv1.RoleOwner})
		other := token("secrets-b", "sam", "", auth.ScopeSecretsWrite)
		id := secretID(call("POST", "/v0/secrets", tok, map[string]string{"name": "MINE_ONLY", "value": "v"}))
		Expect(call("DELETE", "/v0/secrets/"+id, other, nil).Status).To(Equal(404))
		Expect(strings.Contains(call("GET", "/v0/secrets", other, nil).Raw, "MINE_ONLY")).To(BeFalse())
	})
})
