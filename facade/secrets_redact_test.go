package facade_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/logredact"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

var _ = Describe("Secret environment names, redaction and throwaway validation", Ordered, func() {
	const ws = "redact-a"
	var tok, agent string
	// attach creates a secret with value and attaches it, and waits for the gateway to see it.
	attach := func(name, value string) {
		GinkgoHelper()
		sec := call("POST", "/v0/secrets", tok, map[string]string{"name": name, "value": value})
		Expect(sec.Status).To(Equal(201), sec.Raw)
		Expect(call("POST", "/v0/agents/"+agent+"/secrets", tok, map[string]any{"secretIds": []string{secretID(sec)}}).Status).To(Equal(200))
		Eventually(func() string { return gatewayEnv(tok, agent, name) }).Should(Equal(value))
		Eventually(func() string { return strings.Join(logLines(tok, agent, "tail=1"), "") }).Should(ContainSubstring("[gateway] ready"))
	}

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "rae", Role: agentsv1.RoleOwner})
		tok = token(ws, "rae", "", auth.ScopeAll)
		agent = newAgentIn(tok, "Redactor")
	})

	It("refuses environment names that change how processes load code, at the REST door and in the CRD", func() {
		for _, env := range []string{"NODE_OPTIONS", "LD_PRELOAD", "PATH", "HOME", "BASH_ENV", "node_path",
			"OPENCLAW_GATEWAY_TOKEN", "AGENTPLANE_TELEGRAM_BOT_TOKEN", "PYTHONPATH", "OPENSSL_CONF", "LESSOPEN"} {
			r := call("POST", "/v0/secrets", tok, map[string]string{"name": "k-" + env, "value": "v", "envName": env})
			Expect(r.Status).To(Equal(400), env)
			Expect(r.v0Error()).To(HavePrefix("envName is reserved: it changes how the agent's processes load code"), env)
		}
		// The name an envName defaults to.
		r := call("POST", "/v0/secrets", tok, map[string]string{"name": "ld_preload", "value": "v"})
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(call("POST", "/v0/secrets", tok, map[string]string{"name": "nodex", "value": "v"}).Status).To(Equal(201))

		// kubectl apply gets the same answer.
		obj := func(name, secretName, envName string) *agentsv1.AgentSecret {
			return &agentsv1.AgentSecret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws},
				Spec: agentsv1.AgentSecretSpec{Name: secretName, EnvName: envName,
					SecretRef: &agentsv1.SecretKeyReference{Name: "core", Key: "k"}},
			}
		}
		for _, o := range []*agentsv1.AgentSecret{obj("crd-1", "x", "NODE_OPTIONS"), obj("crd-2", "ld-preload", ""),
			obj("crd-3", "x", "Ld_Library_Path"), obj("crd-4", "openclaw.home", ""), obj("crd-6", "x", "OPENSSL_CONF"),
			obj("crd-7", "openssl-modules", "")} {
			err := k8sClient.Create(ctx, o)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", o.Name, err)
			Expect(err.Error()).To(ContainSubstring("is reserved"))
		}
		ok := obj("crd-5", "team key", "")
		Expect(k8sClient.Create(ctx, ok)).To(Succeed())
		// The AgentSecret controller writes the object too: an update that meets its write
		// (a conflict) is tried again on the latest version.
		Eventually(func() error {
			cur := &agentsv1.AgentSecret{}
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ok.Namespace, Name: ok.Name}, cur); err != nil {
				return err
			}
			cur.Spec.EnvName = "LD_PRELOAD"
			return k8sClient.Update(ctx, cur)
		}).Should(Satisfy(apierrors.IsInvalid))
	})

	It("hides the agent's secrets in console exec output, also base64- and hex-encoded", func() {
		value := fmt.Sprintf("pass!%d", GinkgoRandomSeed())
		attach("CONSOLE_KEY", value)
		r := call("POST", "/v0/agents/"+agent+"/console/exec", tok, map[string]string{"command": `v=$CONSOLE_KEY
echo "plain $v"; echo "stderr $v" >&2
printf %s "$v" | base64; printf 'u:%s' "$v" | base64; printf 'us:%s' "$v" | base64 | tr '+/' '-_'
printf %s "$v" | od -An -tx1 | tr -d ' \n'; echo; printf %s "$v" | od -An -tx1 | tr -d ' \n' | tr a-f A-F; echo`})
		Expect(r.Status).To(Equal(200), r.Raw)
		out := r.Body["stdout"].(string) + r.Body["stderr"].(string)
		Expect(out).To(ContainSubstring("plain " + logredact.Marker))
		Expect(out).To(ContainSubstring("stderr " + logredact.Marker))
		hx := hex.EncodeToString([]byte(value))
		for _, form := range []string{value, hx, strings.ToUpper(hx), base64.StdEncoding.EncodeToString([]byte(value)),
			base64.StdEncoding.EncodeToString([]byte("u:" + value))[4:12], base64.URLEncoding.EncodeToString([]byte("us:" + value))[4:12]} {
			Expect(out).NotTo(ContainSubstring(form), out)
		}
	})

	It("hides in a follow a secret attached after it began, also split across two lines", func() {
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		s := followLogs(fctx, baseURL, tok, agent, "&tail=1")
		value := fmt.Sprintf("late.%d!secret", GinkgoRandomSeed())
		attach("FOLLOW_KEY", value)
		// The runtime splits a line longer than 16 KiB: the value straddles the split.
		filler := strings.Repeat(". ", (16<<10-6)/2)
		appendGatewayLog(agent, "seen "+value+" here", filler+value+" tail", "b64 "+base64.StdEncoding.EncodeToString([]byte(value)), "done")
		Eventually(func() string { return strings.Join(s.all(), "\n") }).Should(ContainSubstring("data: done"))
		stop()
		<-s.ended
		all := strings.Join(s.all(), "\n")
		Expect(all).To(ContainSubstring("seen " + logredact.Marker + " here"))
		Expect(all).To(ContainSubstring(logredact.Marker + " tail"))
		Expect(all).To(ContainSubstring("b64 " + logredact.Marker))
		for _, part := range []string{value, value[:8], value[len(value)-8:], base64.StdEncoding.EncodeToString([]byte(value))} {
			Expect(all).NotTo(ContainSubstring(part))
		}
	})

	It("validates a config in a throwaway place: the agent's home is unchanged", func() {
		home := strings.TrimSpace(shell(tok, agent, `echo "$HOME"`))
		list := `cd "$HOME" && find . -path ./.openclaw/logs -prune -o -print | sort | while read -r f; do
if [ -f "$f" ]; then echo "$f $(sha256sum < "$f")"; else echo "$f"; fi; done`
		before := shell(tok, agent, list)
		r := call("POST", "/v0/agents/"+agent+"/config/validate", tok, map[string]any{"config": map[string]any{"gateway": map[string]any{"mode": "local"}}})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body["valid"]).To(BeTrue(), r.Raw)
		var out map[string]any
		Expect(json.Unmarshal([]byte(r.Body["output"].(string)), &out)).To(Succeed())
		Expect(out["path"]).To(HaveSuffix("/openclaw.json"))
		Expect(out["path"]).NotTo(HavePrefix(home), "the candidate was written into the agent's home")
		Expect(shell(tok, agent, list)).To(Equal(before))
	})
})
