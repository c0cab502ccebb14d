package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
)

// The checks below drive one agent's workspace through the facade; both runtimes' suites run
// them (the local runtime's processes and the kube runtime's real node).

// checkConfig validates a good and a bad engine config, writes a change and reads it back,
// and expects a refused write to change nothing.
func checkConfig(t *testing.T, p *platform, base string) {
	t.Helper()
	r := must(t, p.call("POST", base+"/config/validate", map[string]any{"config": map[string]any{"gateway": map[string]any{"mode": "local"}}}), 200, "validate")
	if r.body["valid"] != true {
		t.Fatalf("valid config judged invalid: %s", r.raw)
	}
	r = must(t, p.call("POST", base+"/config/validate", map[string]any{"config": map[string]any{"bogusKey": 1}}), 200, "validate invalid")
	if r.body["valid"] != false || !strings.Contains(r.str("output"), "bogusKey") {
		t.Fatalf("invalid config: %s", r.raw)
	}
	cfg := must(t, p.call("GET", base+"/config", nil), 200, "read config").obj("config")
	if strings.Contains(p.call("GET", base+"/config", nil).raw, "gw_") {
		t.Fatal("the config answer shows the gateway token")
	}
	cfg["agents"].(map[string]any)["entries"].(map[string]any)["main"].(map[string]any)["description"] = "written by e2e"
	must(t, p.call("PUT", base+"/config", map[string]any{"config": cfg}), 200, "write config")
	back := p.call("GET", base+"/config", nil)
	if !strings.Contains(back.raw, "written by e2e") {
		t.Fatalf("config did not round-trip: %s", back.raw)
	}
	bad := p.call("PUT", base+"/config", map[string]any{"config": map[string]any{"bogusKey": true}})
	if bad.status != 400 {
		t.Fatalf("invalid config was written: %s", bad.raw)
	}
	if !strings.Contains(p.call("GET", base+"/config", nil).raw, "written by e2e") {
		t.Fatal("a refused write changed the config")
	}
}

// checkTasks adds a cron task, lists it (the engine's system jobs must not show) and expects
// a bad cron expression refused with the contract's string.
func checkTasks(t *testing.T, p *platform, base string) {
	t.Helper()
	task := map[string]any{
		"name":     "e2e-report",
		"schedule": map[string]any{"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Berlin"},
		"payload":  map[string]any{"kind": "agentTurn", "message": "write the report"},
	}
	must(t, p.call("POST", base+"/tasks", task), 201, "cron add")
	list := must(t, p.call("GET", base+"/tasks", nil), 200, "cron list")
	tasks, _ := list.body["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["name"] != "e2e-report" {
		t.Fatalf("tasks (system jobs must not show): %s", list.raw)
	}
	bad := p.call("POST", base+"/tasks", map[string]any{"name": "x", "schedule": map[string]any{"kind": "cron", "expr": "99 * * *"}, "payload": task["payload"]})
	if bad.status != 400 || bad.str("error") != "Invalid parameters" {
		t.Fatalf("bad cron: %s", bad.raw)
	}
}

// uploadedFile is what checkUpload writes (checkSnapshots expects it in the workspace).
const uploadedFile = "docs/in.txt"

// checkUpload uploads a file into the workspace and reads it back in the gateway's home.
func checkUpload(t *testing.T, p *platform, base string) {
	t.Helper()
	content := "uploaded into the workspace\n"
	must(t, p.call("POST", base+"/files/upload", map[string]string{"filename": uploadedFile, "contentBase64": base64.StdEncoding.EncodeToString([]byte(content))}), 201, "upload")
	r := must(t, p.call("POST", base+"/console/exec", map[string]string{"command": "cat " + uploadedFile}), 200, "cat")
	if r.str("stdout") != content {
		t.Fatalf("uploaded file reads %q", r.str("stdout"))
	}
}
