package realnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/test/e2e"
)

// checkModelProxyOnNode: on the real node, an attached openai key stays out of the pod (its
// environment, its spec, its config file) while another secret reaches the gateway; the pod
// reaches the model proxy on the node's address with the credential in its config, and the
// proxy forwards to the fake provider (p runs with --model-proxy-upstream openai=llm.URL)
// with the real key; a wrong credential is refused.
func checkModelProxyOnNode(t *testing.T, p *e2e.Platform, llm *providertest.Provider, k8s client.Client, ns, base string) {
	key := "sk-node-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	other := "ghp-node-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	oa := e2e.Must(t, p.Call("POST", "/v0/secrets", map[string]string{"name": "OPENAI_API_KEY", "value": key, "provider": "openai"}), 201, "create secret").Obj("secret")
	gh := e2e.Must(t, p.Call("POST", "/v0/secrets", map[string]string{"name": "GITHUB_TOKEN", "value": other, "provider": "github"}), 201, "create secret").Obj("secret")
	e2e.Must(t, p.Call("POST", base+"/secrets", map[string]any{"secretIds": []string{oa["id"].(string), gh["id"].(string)}}), 200, "attach")
	e2e.Eventually(t, "the rolled gateway to have its secrets", func() bool {
		r := p.Call("POST", base+"/console/exec", map[string]string{"command": `printenv GITHUB_TOKEN | tr A-Za-z N-ZA-Mn-za-m`})
		return r.Status == 200 && strings.TrimSpace(r.Str("stdout")) == e2e.Rot13(other)
	})
	var file string
	e2e.Eventually(t, "the config to point openai at the proxy", func() bool {
		file = e2e.Rot13(p.Call("POST", base+"/console/exec", map[string]string{"command": "tr A-Za-z N-ZA-Mn-za-m < ../openclaw.json"}).Str("stdout"))
		return strings.Contains(file, "/llm/openai/v1")
	})
	r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{
		"command": `{ env; tr '\0' '\n' < /proc/1/environ; } | tr A-Za-z N-ZA-Mn-za-m; grep -rlF '` + key + `' ../.. 2>/dev/null; echo searched`,
	}), 200, "search the pod for the key")
	if out := r.Str("stdout"); strings.Contains(out, e2e.Rot13(key)) || strings.Contains(out, key) || strings.Contains(file, key) || !strings.Contains(out, "searched") {
		t.Fatalf("the provider key is readable inside the pod:\n%s", out)
	}
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if s := fmt.Sprintf("%+v", pod.Spec); strings.Contains(s, key) || strings.Contains(s, other) {
			t.Errorf("pod %s has a secret value in its spec", pod.Name)
		}
	}
	// From inside the pod, with the credential of its config file, through the node network.
	call := `node -e 'const c=require(process.argv[1]).models.providers.openai;` +
		`fetch(c.baseUrl+"/chat/completions",{method:"POST",headers:{authorization:"Bearer "+(process.argv[2]||c.apiKey),"content-type":"application/json"},` +
		`body:JSON.stringify({model:"gpt-5",messages:[{role:"user",content:"ping"}]})}).then(async r=>console.log(r.status,await r.text()))' "$(cd .. && pwd)/openclaw.json" `
	before := len(llm.Requests())
	out := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": call}), 200, "call the proxy from the pod").Str("stdout")
	if !strings.HasPrefix(out, "200 ") || !strings.Contains(out, providertest.Reply) {
		t.Fatalf("the pod's call through the proxy: %q", out)
	}
	got := llm.Requests()[before:]
	if len(got) != 1 || got[0].Key != key || got[0].Path != "/v1/chat/completions" {
		t.Fatalf("the provider got %+v, want one chat completion with the real key", got)
	}
	out = e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": call + "apx1.forged.credential"}), 200, "a forged credential").Str("stdout")
	if !strings.HasPrefix(out, "401 ") {
		t.Fatalf("a forged credential through the proxy: %q", out)
	}
}
