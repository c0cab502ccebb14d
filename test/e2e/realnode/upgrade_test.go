package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/test/e2e"
)

// upgradeFrom is the commit whose chart and manager the upgrade test installs first: the last
// one before the platform's own rollouts (its gateways' StatefulSets roll on any change of
// the pod template). Move it forward to the previous release when one changes what an
// upgrade has to carry.
const upgradeFrom = "59755173820e9453fd9022c853a6e32362eb87bb"

// previousManager builds upgradeFrom's tree and manager image (from this repository's history).
func previousManager(t *testing.T) (e2e.Revision, images.Spec) {
	t.Helper()
	prev := e2e.BuildRevision(t, upgradeFrom)
	image, err := images.ManagerSpecAs(strings.Replace(images.ManagerImage, ":dev", ":prev-"+prev.Commit[:12], 1), prev.Bin)
	if err != nil {
		t.Fatal(err)
	}
	return prev, image
}

// upgradeWithHelm deploys the manager with the Helm chart and upgrades it, as a platform team
// does: `helm install` of upgradeFrom's chart and manager, agents running, suspended and
// mid-task, then `helm upgrade` to the chart under test with the same values. No agent is
// lost, no gateway restarts outside the platform's rendering rollout, every agent's files and
// config are byte-identical, the storage version migrated, the facade's routes answer.
func upgradeWithHelm(ctx context.Context, t *testing.T, d *deployment, h helmRelease, prev e2e.Revision, prevImage images.Spec) {
	_, tag, _ := strings.Cut(prevImage.Ref, ":")
	begin := time.Now()
	h.run("install", filepath.Join(prev.Src, "dist", "chart"), "--create-namespace",
		"-f", filepath.Join(prev.Src, "hack", "genchart", "testdata", "values", "local.yaml"), "--set", "image.tag="+tag)
	d.waitAvailable(ctx, prevImage.Ref)
	t.Logf("helm install: the earlier manager available after %s", time.Since(begin).Round(time.Second))
	fleet := startFleet(ctx, t, d)
	before := fleet.record(ctx, t)
	t.Logf("its fleet running, asleep and busy after %s", time.Since(begin).Round(time.Second))
	h.run("upgrade", filepath.Join(testenv.RepoRoot(), "dist", "chart"),
		"-f", filepath.Join(testenv.RepoRoot(), "hack", "genchart", "testdata", "values", "local.yaml"))
	d.waitAvailable(ctx, images.ManagerImage)
	t.Logf("helm upgrade: the manager under test available after %s", time.Since(begin).Round(time.Second))
	checkStorageMigrated(ctx, t, d)
	fleet.checkAfterUpgrade(ctx, t, before)
	d.agent = fleet.running // the common checks take it (one gateway boot less)
}

// helmRelease runs helm on the release agentplane in deployNamespace of the local cluster,
// with helm's own files in a directory of the test's.
type helmRelease struct {
	t                *testing.T
	helm, kubeconfig string
}

// run runs `helm <verb> agentplane <args>` (install and upgrade: the chart first).
func (h helmRelease) run(verb string, args ...string) {
	h.t.Helper()
	home := h.t.TempDir()
	cmd := exec.Command(h.helm, append([]string{verb, "agentplane", "--namespace", deployNamespace,
		"--kubeconfig", h.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("helm %s %v: %v\n%s", verb, args, err, out)
	}
}

// fleet is the agents the upgrade carries: one running, one suspended, one mid-task (a job
// of its own running in the gateway while the manager is replaced).
type fleet struct {
	d                     *deployment
	p                     *e2e.Platform
	running, asleep, busy string
	ids                   []string
	jobEnds               time.Time // when the busy agent's job has written taskFile
}

// agentState is what must come through an upgrade unchanged.
type agentState struct {
	status string
	pod    string            // the gateway pod's UID and restarts ("" when it has none)
	files  map[string]string // digest by path: the engine config and the workspace's files
	config string            // the config as the facade answers it
}

// digests reads `sha256sum` output: digest by path.
func digests(t *testing.T, out string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for line := range strings.Lines(out) {
		sum, path, ok := strings.Cut(strings.TrimRight(line, "\n"), "  ")
		if !ok {
			t.Fatalf("sha256sum line %q", line)
		}
		files[path] = sum
	}
	return files
}

// taskFile is what the busy agent's job writes in its workspace when it finishes (exec runs
// in the workspace).
const taskFile = "task.out"

func startFleet(ctx context.Context, t *testing.T, d *deployment) *fleet {
	t.Helper()
	f := &fleet{d: d, p: d.client(ctx, t)}
	for _, name := range []string{"Running", "Asleep", "Busy"} {
		f.ids = append(f.ids, createOnPrevious(t, f.p, name))
	}
	f.running, f.asleep, f.busy = f.ids[0], f.ids[1], f.ids[2]
	for _, id := range f.ids {
		e2e.Eventually(t, "agent "+id+" to run", func() bool { return f.status(id) == "running" })
		f.exec(t, id, "printf 'written before the upgrade by %s' \"$(cat /etc/hostname)\" > before.txt")
	}
	e2e.Must(t, f.p.Call("POST", "/v0/agents/"+f.asleep+"/suspend", nil), 200, "suspend")
	e2e.Eventually(t, "the suspended agent's pod to be gone", func() bool { return f.pod(ctx, t, f.asleep) == "" })
	// The job outlives the exec (the gateway image has no nohup): it finishes while (or after)
	// the manager is replaced.
	f.exec(t, f.busy, "(trap '' HUP; sleep 20; echo finished > "+taskFile+") </dev/null >/dev/null 2>&1 &")
	f.jobEnds = time.Now().Add(25 * time.Second)
	return f
}

// createOnPrevious creates an agent on the previous revision's manager and returns its id;
// the caller waits for it to run. That revision answers 500 `Gateway failed to start` at a
// gateway's first exit, though the kubelet restarts it (on a loaded node the engine's own
// 5-second state-lease bound fails a boot, and the restart boots); this revision waits
// through such a restart (ops.startDowns). The agent comes in the body either way.
func createOnPrevious(t *testing.T, p *e2e.Platform, name string) string {
	t.Helper()
	r := p.Call("POST", "/v0/agents", map[string]any{"name": name})
	id, _ := r.Obj("agent")["id"].(string)
	switch {
	case id == "":
		t.Fatalf("create agent %q: %s", name, r.Raw)
	case r.Status == 500 && r.Str("error") == "Gateway failed to start":
		t.Logf("the previous revision answered 500 at a first exit of %s's gateway; waiting for the restart", id)
	case r.Status != 201 && r.Status != 202:
		t.Fatalf("create agent %q: status %d, want 201 or 202: %s", name, r.Status, r.Raw)
	}
	return id
}

func (f *fleet) status(id string) string {
	r := f.p.Call("GET", "/v0/agents/"+id, nil)
	if r.Status != 200 {
		return ""
	}
	s, _ := r.Obj("agent")["status"].(string)
	return s
}

func (f *fleet) exec(t *testing.T, id, command string) string {
	t.Helper()
	r := e2e.Must(t, f.p.Call("POST", "/v0/agents/"+id+"/console/exec", map[string]string{"command": command}), 200, "exec in "+id)
	if code, _ := r.Body["exitCode"].(float64); code != 0 {
		t.Fatalf("exec %q in %s: %s", command, id, r.Raw)
	}
	return r.Str("stdout")
}

// pod is the UID of the agent's live gateway pod and its containers' restarts, or "".
func (f *fleet) pod(ctx context.Context, t *testing.T, id string) string {
	t.Helper()
	var pods corev1.PodList
	if err := f.d.k8s.List(ctx, &pods, client.InNamespace("demo"), client.MatchingLabels{agentsv1.LabelAgent: id}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			restarts := int32(0)
			for _, c := range p.Status.ContainerStatuses {
				restarts += c.RestartCount
			}
			return fmt.Sprintf("%s/%d", p.UID, restarts)
		}
	}
	return ""
}

// record is the state of every agent; the suspended one is read without waking it (no
// exec, no config: both would start its gateway).
func (f *fleet) record(ctx context.Context, t *testing.T) map[string]agentState {
	t.Helper()
	states := map[string]agentState{}
	for _, id := range f.ids {
		s := agentState{status: f.status(id), pod: f.pod(ctx, t, id)}
		if id != f.asleep {
			s.files = digests(t, f.exec(t, id, "sha256sum ../openclaw.json $(find . -type f ! -name task.out | sort)"))
			s.config = e2e.Must(t, f.p.Call("GET", "/v0/agents/"+id+"/config", nil), 200, "config").Raw
		}
		states[id] = s
	}
	return states
}

// checkAfterUpgrade waits for the new manager's rendering rollout and expects every agent as
// it was (status, files, config), its gateway restarted only by a wave of the rollout and once
// at most; the suspended one still without a gateway, then resumed with its files; the busy
// one's job finished unless its wave stopped it first.
func (f *fleet) checkAfterUpgrade(ctx context.Context, t *testing.T, before map[string]agentState) {
	t.Helper()
	var agents agentsv1.AgentList
	if err := f.d.k8s.List(ctx, &agents, client.InNamespace("demo")); err != nil || len(agents.Items) != len(f.ids) {
		t.Fatalf("agents after the upgrade: %d, %v", len(agents.Items), err)
	}
	waves := waitRenderingRollout(ctx, t, f.d)
	after := f.record(ctx, t)
	restarted := 0
	for _, id := range f.ids {
		b, a := before[id], after[id]
		if a.pod != b.pod {
			restarted++
			if _, ok := waves[id]; !ok {
				t.Errorf("agent %s's gateway restarted outside the rollout's waves (%s, then %s)", id, b.pod, a.pod)
			}
			if !strings.HasSuffix(a.pod, "/0") {
				t.Errorf("agent %s's new gateway restarted: %s", id, a.pod)
			}
		}
		if a.status != b.status || a.config != b.config {
			t.Errorf("agent %s changed across the upgrade:\nbefore %s %s\nafter  %s %s", id, b.status, b.config, a.status, a.config)
		}
		if d := e2e.FilesChanged(b.files, a.files); d != "" {
			t.Errorf("agent %s's files changed across the upgrade: %s\nbefore %v\nafter  %v", id, d, b.files, a.files)
		}
	}
	t.Logf("upgrade: %d of %d agents' gateways restarted, each in its wave (%d waves)", restarted, len(f.ids), len(waves))
	if started, ok := waves[f.busy]; !ok || started.After(f.jobEnds) {
		if got := strings.TrimSpace(f.exec(t, f.busy, "cat "+taskFile)); got != "finished" {
			t.Errorf("the busy agent's job: %q", got)
		}
	}
	e2e.Must(t, f.p.Call("POST", "/v0/agents/"+f.asleep+"/resume", nil), 200, "resume")
	e2e.Eventually(t, "the resumed agent to run", func() bool { return f.status(f.asleep) == "running" })
	if got := f.exec(t, f.asleep, "cat before.txt"); !strings.HasPrefix(got, "written before the upgrade") {
		t.Errorf("the suspended agent's file after resume: %q", got)
	}
	checkRoutes(t, f.p, f.running)
	// The workspace's agent limit leaves room for the checks that follow; the running agent
	// stays for the checks of every deployment, which delete it.
	gone := []string{f.asleep, f.busy}
	for _, id := range gone {
		e2e.Must(t, f.p.Call("DELETE", "/v0/agents/"+id, nil), 200, "delete "+id)
	}
	for _, id := range gone {
		e2e.Eventually(t, "agent "+id+" to be gone", func() bool {
			return f.p.Call("GET", "/v0/agents/"+id, nil).Status == 404
		})
	}
}

// checkRoutes expects the facade's read routes to answer 200 for the workspace and agent id.
func checkRoutes(t *testing.T, p *e2e.Platform, id string) {
	t.Helper()
	base := "/v0/agents/" + id
	for _, path := range []string{
		"/healthz", "/v0/me", "/v0/agents", "/v0/secrets", "/v0/templates", "/v3/files/public",
		base, base + "/config", base + "/tasks", base + "/snapshots", base + "/domains", base + "/secrets",
		base + "/versions", base + "/logs?tail=5",
	} {
		if r := p.Call("GET", path, nil); r.Status != 200 {
			t.Errorf("GET %s after the upgrade: %d %s", path, r.Status, r.Raw)
		}
	}
}

// checkStorageMigrated expects the new manager to move every agentplane CRD's stored objects
// to the storage version (README "API versions"): storedVersions is that version alone.
func checkStorageMigrated(ctx context.Context, t *testing.T, d *deployment) {
	t.Helper()
	e2e.Eventually(t, "every agentplane CRD to store "+agentsv1.StorageGroupVersion.Version+" alone", func() bool {
		var crds apiextensionsv1.CustomResourceDefinitionList
		if d.k8s.List(ctx, &crds) != nil {
			return false
		}
		n := 0
		for _, c := range crds.Items {
			if c.Spec.Group != agentsv1.GroupVersion.Group {
				continue
			}
			n++
			if !slices.Equal(c.Status.StoredVersions, []string{agentsv1.StorageGroupVersion.Version}) {
				return false
			}
		}
		return n > 0
	})
}

// waitRenderingRollout waits until the rollout the new manager made of its rendering
// succeeded with every agent current, and returns when each agent's wave started (by agent).
// The rollout bounds each wave itself (a snapshot and a restarted gateway have a health
// timeout each before the wave fails and the rollout halts), so the wait is sized from its
// spec, not from this machine's speed; a halted rollout fails the test at once with the
// rollout's own account of which agent stopped it and why.
func waitRenderingRollout(ctx context.Context, t *testing.T, d *deployment) map[string]time.Time {
	t.Helper()
	var rollout agentsv1.RenderingRollout
	start, bound := time.Now(), e2e.EventBound // until the rollout is there to size the wait
	for {
		var list agentsv1.RenderingRolloutList
		if d.k8s.List(ctx, &list, client.MatchingLabels{agentsv1.LabelRenderingRollout: "manager"}) == nil && len(list.Items) == 1 {
			rollout = list.Items[0]
			st := rollout.Status
			if st.Phase == agentsv1.UpgradeSucceeded && st.Current == st.Total && st.Total > 0 {
				break
			}
			if st.Phase == agentsv1.UpgradeHalted {
				t.Fatalf("the manager's rendering rollout halted: %s", rolloutAccount(rollout))
			}
			bound = max(e2e.EventBound, e2e.RolloutBound(int(st.Total), rollout.Spec.HealthTimeout))
		}
		if time.Since(start) > bound {
			t.Fatalf("the manager's rendering rollout is not done after %s: %s", bound, rolloutAccount(rollout))
		}
		time.Sleep(time.Second)
	}
	started := map[string]time.Time{}
	for _, w := range rollout.Status.Waves {
		for _, a := range w.Agents {
			_, id, _ := strings.Cut(a, "/")
			if w.StartedAt != nil {
				started[id] = w.StartedAt.Time
			}
		}
	}
	return started
}

// rolloutAccount is what a rollout's status says of itself: phase, counts, its Ready
// condition's message (what it waits for, or why it halted) and its failed agents.
func rolloutAccount(rr agentsv1.RenderingRollout) string {
	st := rr.Status
	msg := ""
	if c := meta.FindStatusCondition(st.Conditions, agentsv1.ConditionReady); c != nil {
		msg = c.Reason + ": " + c.Message
	}
	return fmt.Sprintf("phase %q, %d of %d current, wave %d, counts %+v, failed %v; %s", st.Phase, st.Current, st.Total, st.CurrentWave, st.Counts, st.FailedAgents, msg)
}
