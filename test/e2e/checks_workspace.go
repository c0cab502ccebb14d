package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The checks below drive one agent's home through the facade; both runtimes' suites run
// them (the local runtime's processes and the kube runtime's real node).

// CheckConfig validates a good and a bad engine config, writes a change and reads it back,
// and expects a refused write to change nothing.
func CheckConfig(t *testing.T, p *Platform, base string) {
	t.Helper()
	r := Must(t, p.Call("POST", base+"/config/validate", map[string]any{"config": map[string]any{"gateway": map[string]any{"mode": "local"}}}), 200, "validate")
	if r.Body["valid"] != true {
		t.Fatalf("valid config judged invalid: %s", r.Raw)
	}
	r = Must(t, p.Call("POST", base+"/config/validate", map[string]any{"config": map[string]any{"bogusKey": 1}}), 200, "validate invalid")
	if r.Body["valid"] != false || !strings.Contains(r.Str("output"), "bogusKey") {
		t.Fatalf("invalid config: %s", r.Raw)
	}
	cfg := Must(t, p.Call("GET", base+"/config", nil), 200, "read config").Obj("config")
	if strings.Contains(p.Call("GET", base+"/config", nil).Raw, "gw_") {
		t.Fatal("the config answer shows the gateway token")
	}
	cfg["agents"].(map[string]any)["entries"].(map[string]any)["main"].(map[string]any)["description"] = "written by e2e"
	Must(t, p.Call("PUT", base+"/config", map[string]any{"config": cfg}), 200, "write config")
	back := p.Call("GET", base+"/config", nil)
	if !strings.Contains(back.Raw, "written by e2e") {
		t.Fatalf("config did not round-trip: %s", back.Raw)
	}
	bad := p.Call("PUT", base+"/config", map[string]any{"config": map[string]any{"bogusKey": true}})
	if bad.Status != 400 {
		t.Fatalf("invalid config was written: %s", bad.Raw)
	}
	if !strings.Contains(p.Call("GET", base+"/config", nil).Raw, "written by e2e") {
		t.Fatal("a refused write changed the config")
	}
}

// CheckTasks adds a cron task, lists it (the engine's system jobs must not show) and expects
// a bad cron expression refused with the contract's string.
//
// The task runs at a whole hour half a day from now, never while the tests run: the agent
// keeps it, and a task due within the sleep controller's lead or grace keeps an agent awake
// for it, so a later suspend check would wait for the task instead of the suspend (with the
// fixed "0 9 * * 1-5" Berlin time, the real node's suspend check run at 09:01 Berlin on
// 2026-12-03 waited five minutes for the wake window).
func CheckTasks(t *testing.T, p *Platform, base string) {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("the task's time zone: %v", err)
	}
	hour := (time.Now().In(berlin).Hour() + 12) % 24
	task := map[string]any{
		"name":     "e2e-report",
		"schedule": map[string]any{"kind": "cron", "expr": fmt.Sprintf("0 %d * * 1-5", hour), "tz": "Europe/Berlin"},
		"payload":  map[string]any{"kind": "agentTurn", "message": "write the report"},
	}
	Must(t, p.Call("POST", base+"/tasks", task), 201, "cron add")
	list := Must(t, p.Call("GET", base+"/tasks", nil), 200, "cron list")
	tasks, _ := list.Body["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["name"] != "e2e-report" {
		t.Fatalf("tasks (system jobs must not show): %s", list.Raw)
	}
	bad := p.Call("POST", base+"/tasks", map[string]any{"name": "x", "schedule": map[string]any{"kind": "cron", "expr": "99 * * *"}, "payload": task["payload"]})
	if bad.Status != 400 || bad.Str("error") != "Invalid parameters" {
		t.Fatalf("bad cron: %s", bad.Raw)
	}
}

// UploadedFile is what CheckUpload writes (CheckSnapshots expects it in the home).
const UploadedFile = "docs/in.txt"

// CheckUpload uploads a file into the agent's home and reads it back in the gateway's home.
func CheckUpload(t *testing.T, p *Platform, base string) {
	t.Helper()
	content := "uploaded into the workspace\n"
	Must(t, p.Call("POST", base+"/files/upload", map[string]string{"filename": UploadedFile, "contentBase64": base64.StdEncoding.EncodeToString([]byte(content))}), 201, "upload")
	r := Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "cat " + UploadedFile}), 200, "cat")
	if r.Str("stdout") != content {
		t.Fatalf("uploaded file reads %q", r.Str("stdout"))
	}
}
