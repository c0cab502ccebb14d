package devmode

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/test/e2e"
)

// gatewayEnvValue is the value of name in the environment the runtime gave the agent's
// running gateway ("" when unset), read on this host: inside the agent's sandbox the gateway's
// process and the runtime's gateway.pid are not visible. ok is false when no gateway runs.
func gatewayEnvValue(p *e2e.Platform, base, name string) (value string, ok bool) {
	id := strings.TrimPrefix(base, "/v0/agents/")
	raw, err := os.ReadFile(filepath.Join(p.StateDir, "runtime", "agents", "dev", id, "gateway.pid"))
	if err != nil {
		return "", false
	}
	env, err := os.ReadFile("/proc/" + strings.TrimSpace(string(raw)) + "/environ")
	if err != nil {
		return "", false
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, found := strings.CutPrefix(kv, name+"="); found {
			return v, true
		}
	}
	return "", true
}

// gatewayHealthy reports whether the agent is running and its gateway answers /healthz.
func gatewayHealthy(p *e2e.Platform, base string) bool {
	a := p.Call("GET", base, nil).Obj("agent")
	endpoint, _ := a["endpoint"].(string)
	if a["status"] != "running" || endpoint == "" {
		return false
	}
	resp, err := http.Get(endpoint + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// checkChannels connects the agent to telegram with a dummy bot token on the real engine: the
// config holds an env SecretRef (never the token), `openclaw config validate` accepts it, the
// restarted gateway has the token in its environment and keeps answering; removing the
// channel takes it out of the config and the environment again.
func checkChannels(t *testing.T, p *e2e.Platform, base string) {
	token := "987654321:e2e-dummy-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	start := time.Now()
	r := e2e.Must(t, p.Call("POST", base+"/channels/telegram", map[string]any{"botToken": token, "dmPolicy": "pairing"}), 201, "telegram setup")
	t.Logf("telegram configured after %s", time.Since(start).Round(time.Millisecond))
	if ch := r.Obj("channel"); ch["configured"] != true || ch["botTokenHint"] != "****"+token[len(token)-4:] || strings.Contains(r.Raw, token) {
		t.Fatalf("setup answer: %s", r.Raw)
	}

	disk := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "cat ../openclaw.json"}), 200, "read config").Str("stdout")
	if strings.Contains(disk, token) {
		t.Fatal("the bot token is in the engine config file")
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(disk), &cfg); err != nil {
		t.Fatalf("config on disk: %v\n%s", err, disk)
	}
	tg, _ := cfg["channels"].(map[string]any)["telegram"].(map[string]any)
	want := map[string]any{"source": "env", "provider": "default", "id": "AGENTPLANE_TELEGRAM_BOT_TOKEN"}
	if !reflect.DeepEqual(tg["botToken"], want) || tg["enabled"] != true || tg["dmPolicy"] != "pairing" {
		t.Fatalf("channels.telegram: %v", tg)
	}
	v := e2e.Must(t, p.Call("POST", base+"/config/validate", map[string]any{"config": cfg}), 200, "validate")
	if v.Body["valid"] != true {
		t.Fatalf("openclaw config validate refuses the channel config: %s", v.Raw)
	}
	if got := p.Call("GET", base+"/channels", nil); !strings.Contains(got.Raw, `"configured":true`) || strings.Contains(got.Raw, token) {
		t.Fatalf("channel list: %s", got.Raw)
	}

	e2e.Eventually(t, "the gateway to restart with the bot token", func() bool {
		v, ok := gatewayEnvValue(p, base, "AGENTPLANE_TELEGRAM_BOT_TOKEN")
		return ok && v == token
	})
	e2e.Eventually(t, "the gateway with the channel to answer /healthz", func() bool { return gatewayHealthy(p, base) })
	t.Logf("gateway up with the channel after %s", time.Since(start).Round(time.Millisecond))

	e2e.Must(t, p.Call("DELETE", base+"/channels/telegram", nil), 200, "telegram removal")
	after := e2e.Must(t, p.Call("GET", base+"/config", nil), 200, "read config").Obj("config")
	if chans, _ := after["channels"].(map[string]any); chans["telegram"] != nil {
		t.Fatalf("the removed channel is still configured: %v", chans)
	}
	e2e.Eventually(t, "the gateway to restart without the bot token", func() bool {
		v, ok := gatewayEnvValue(p, base, "AGENTPLANE_TELEGRAM_BOT_TOKEN")
		return ok && v == "" && gatewayHealthy(p, base)
	})
	if strings.Contains(p.Log.String(), token) {
		t.Fatal("the bot token appears in the platform's log")
	}
}
