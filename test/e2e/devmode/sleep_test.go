package devmode

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/test/e2e"
)

// treeSums is the sha256 of every regular file under root, by relative path.
func treeSums(t *testing.T, root string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		rel, _ := filepath.Rel(root, p)
		sums[rel] = hex.EncodeToString(h[:])
		return nil
	})
	if err != nil {
		t.Fatalf("sums of %s: %v", root, err)
	}
	return sums
}

// sameSums expects after to hold every file of before unchanged and nothing new but the files
// the engine seeds itself at the workspace's root (e2e.FilesChanged: a gateway awake across
// 03:00 runs the engine's dreaming sweep, which writes them into a workspace without them).
func sameSums(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if d := e2e.FilesChanged(before, after); d != "" {
		t.Errorf("%s: %s", what, d)
	}
}

// TestRealEngineSuspendResumeAndTaskWake suspends a real gateway (its process ends, its home
// stays byte for byte), resumes it, and lets the platform wake it ahead of a scheduled task,
// which the engine then runs on time.
func TestRealEngineSuspendResumeAndTaskWake(t *testing.T) {
	// The lead and the task's margin are what the platform's part needs, not what a boot
	// takes: the test asserts when the platform wakes the agent and that the engine never runs
	// the task early, not how soon the woken gateway serves (a restore takes seconds, a cold
	// boot on a loaded machine longer: the engine then runs the overdue one-shot at its start).
	const lead, margin = 20 * time.Second, 15 * time.Second
	p := e2e.StartDev(t, e2e.EngineDir(t), "--wake-lead", lead.String(), "--wake-window", "20s")
	start := time.Now()
	id := e2e.CreateRunning(t, p, map[string]any{"name": "Sleeper"})["id"].(string)
	t.Logf("cold create: %s", time.Since(start).Round(time.Millisecond))
	home := filepath.Join(p.StateDir, "runtime", "agents", "dev", id, "home")
	workspace, config := filepath.Join(home, ".openclaw", "workspace"), filepath.Join(home, ".openclaw")
	e2e.Must(t, p.Call("POST", "/v0/agents/"+id+"/console/exec", map[string]any{
		"command": "mkdir -p notes && head -c 200000 /dev/urandom > notes/blob && echo 'remember the milk' > notes/a.txt",
	}), 200, "write files")
	tasksBefore := e2e.Must(t, p.Call("GET", "/v0/agents/"+id+"/tasks", nil), 200, "list tasks").Raw
	wsBefore := treeSums(t, workspace)
	cfgBefore := treeSums(t, filepath.Join(config, "openclaw.json"))
	pid := pidOf(t, p, id)

	// Suspend: the gateway drains and exits, the agent holds no process, the files stay.
	start = time.Now()
	got := e2e.Must(t, p.Call("POST", "/v0/agents/"+id+"/suspend", nil), 200, "suspend").Obj("agent")
	t.Logf("suspend: %s", time.Since(start).Round(time.Millisecond))
	if got["status"] != "suspended" {
		t.Fatalf("suspended agent: %v", got)
	}
	e2e.Eventually(t, "the gateway process to end", func() bool { return !e2e.Alive(pid) })
	sameSums(t, "workspace while suspended", wsBefore, treeSums(t, workspace))
	sameSums(t, "config while suspended", cfgBefore, treeSums(t, filepath.Join(config, "openclaw.json")))

	// Resume: a cold start of the same home.
	start = time.Now()
	got = e2e.Must(t, p.Call("POST", "/v0/agents/"+id+"/resume", nil), 200, "resume").Obj("agent")
	t.Logf("resume (cold): %s", time.Since(start).Round(time.Millisecond))
	if got["status"] != "running" {
		t.Fatalf("resumed agent: %v", got)
	}
	sameSums(t, "workspace after resume", wsBefore, treeSums(t, workspace))
	sameSums(t, "config after resume", cfgBefore, treeSums(t, filepath.Join(config, "openclaw.json")))
	if after := e2e.Must(t, p.Call("GET", "/v0/agents/"+id+"/tasks", nil), 200, "list tasks").Raw; after != tasksBefore {
		t.Errorf("tasks changed across suspend/resume:\n%s\n%s", tasksBefore, after)
	}

	// A task due a margin after its lead begins, then sleep: the platform wakes the agent the
	// lead ahead and the engine runs it. Where the task's add and the suspend outlast the
	// margin (a loaded machine), the explicit suspend is still honoured and the platform wakes
	// the agent at once, within the lead too: either way it is woken from the lead's start
	// and before the task's time.
	due := time.Now().Add(lead + margin).UTC().Truncate(time.Second)
	e2e.Must(t, p.Call("POST", "/v0/agents/"+id+"/tasks", map[string]any{
		"name": "wake-check", "schedule": map[string]any{"kind": "at", "at": due.Format(time.RFC3339)},
		"payload": map[string]any{"kind": "agentTurn", "message": "say hello"},
	}), 201, "add task")
	pid = pidOf(t, p, id)
	got = e2e.Must(t, p.Call("POST", "/v0/agents/"+id+"/suspend", nil), 200, "suspend again").Obj("agent")
	// The answer shows the wake the suspend planned, unless that wake has come already.
	if nw, ok := got["nextWakeAt"]; ok && nw != due.Add(-lead).Format(time.RFC3339) {
		t.Fatalf("next wake %v, want %s (task at %s)", nw, due.Add(-lead).Format(time.RFC3339), due.Format(time.RFC3339))
	}
	e2e.Eventually(t, "the gateway process to end", func() bool { return !e2e.Alive(pid) })
	// The platform's part: it wakes the agent for its task once the lead has begun, before the
	// task's time. (How long the gateway then takes to serve is the machine's: a restore takes
	// seconds, a cold boot on a loaded machine can outlast the lead, and the engine then
	// reschedules the overdue one-shot at its start and runs it a little later.)
	k8s := p.KubeClient()
	var woken time.Time
	e2e.Eventually(t, "the platform to wake the agent for its task", func() bool {
		sl := e2e.GetAgent(t, k8s, id).Status.Sleep
		if sl == nil || sl.WokenAt == nil || sl.WakeReason != agentsv1.WakeForTask {
			return false
		}
		if sl.NextTaskAt != nil && !sl.NextTaskAt.Time.Equal(due) {
			t.Fatalf("woken for a task at %v, want %s", sl.NextTaskAt, due.Format(time.RFC3339))
		}
		woken = sl.WokenAt.Time
		return true
	})
	// Never before the lead began. How soon after is the machine's: on a loaded one the wake
	// can come after the task's time, and the engine then runs the overdue one-shot at its
	// start (checked below), so the order of the events is asserted, not their delay.
	if woken.Before(due.Add(-lead)) {
		t.Fatalf("woken for the task at %s, before its lead began at %s (task at %s)",
			woken.Format(time.RFC3339), due.Add(-lead).Format(time.RFC3339), due.Format(time.RFC3339))
	}
	e2e.Eventually(t, "the woken agent to run", func() bool {
		return p.Call("GET", "/v0/agents/"+id, nil).Obj("agent")["status"] == "running"
	})
	t.Logf("woken %s ahead of the task; running %s ahead", due.Sub(woken).Round(time.Second), time.Until(due).Round(time.Second))
	// The engine fires the job, never before its time: its state records the run.
	var ranAt time.Time
	e2e.Eventually(t, "the engine to run the task", func() bool {
		r := p.Call("POST", "/v0/agents/"+id+"/console/exec", map[string]any{"command": "openclaw cron list --all --json"})
		var out struct {
			Jobs []struct {
				Name  string `json:"name"`
				State struct {
					LastRunAtMs int64 `json:"lastRunAtMs"`
				} `json:"state"`
			} `json:"jobs"`
		}
		if r.Status != 200 || json.Unmarshal([]byte(strings.TrimSpace(r.Str("stdout"))), &out) != nil {
			return false
		}
		for _, j := range out.Jobs {
			if j.Name == "wake-check" && j.State.LastRunAtMs > 0 {
				ranAt = time.UnixMilli(j.State.LastRunAtMs)
				return true
			}
		}
		return false
	})
	if ranAt.Before(due.Add(-time.Second)) {
		t.Errorf("the task ran at %s, before its time %s", ranAt, due)
	}
	t.Logf("task due %s ran at %s", due.Format(time.RFC3339), ranAt.UTC().Format(time.RFC3339Nano))
	p.Stop()
}
