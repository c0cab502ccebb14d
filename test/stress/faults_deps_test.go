package stress

import (
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/storage"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
)

// TestStorageOutageDuringSnapshotSync: with storage unreachable sync and the history answer
// 503; with storage failing only the archive upload (mid-sync) sync answers 503 and leaves no
// snapshot behind; once storage is back sync succeeds and the history holds every snapshot
// taken, each readable from storage.
func TestStorageOutageDuringSnapshotSync(t *testing.T) {
	const ws = "storage-outage"
	workspace(t, ws, agentsv1.PlanFree)
	tok := token(t, ws)
	t.Cleanup(func() { files.down.Store(false); files.putDown.Store(false) })
	agent := newAgent(t, mainURL, tok, "archivist")
	base := "/v0/agents/" + agent
	write := func(content string) {
		t.Helper()
		expect(t, call(mainURL, "POST", base+"/files/upload", tok, map[string]any{
			"filename": "notes.txt", "contentBase64": base64.StdEncoding.EncodeToString([]byte(content)),
		}), 201, "upload notes")
	}
	sync := func(base string) reply { return call(base, "POST", "/v0/agents/"+agent+"/snapshots/sync", tok, nil) }

	write("before the outage")
	first := expect(t, sync(mainURL), 201, "first sync").obj("snapshot")["cid"].(string)

	files.down.Store(true)
	for _, f := range facades() {
		for _, r := range []reply{sync(f), call(f, "GET", base+"/snapshots", tok, nil)} {
			if r.Status != 503 {
				t.Errorf("storage down: want 503, got %s", r)
			}
		}
	}
	files.down.Store(false)

	write("during the outage")
	files.putDown.Store(true) // the archive upload fails once the sync has started
	for _, f := range facades() {
		if r := sync(f); r.Status != 503 {
			t.Errorf("storage failing mid-sync: want 503, got %s", r)
		}
	}
	files.putDown.Store(false)
	if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
		return snapshotsAre(ws, agent, first)
	}); err != nil {
		t.Fatal("after the failed syncs:", err)
	}

	second := expect(t, sync(replicaURL), 201, "sync after the outage").obj("snapshot")["cid"].(string)
	if second == first {
		t.Fatalf("the workspace changed but the snapshot CID did not: %s", first)
	}
	if err := snapshotsAre(ws, agent, first, second); err != nil {
		t.Fatal(err)
	}
	r := expect(t, call(mainURL, "GET", base+"/snapshots", tok, nil), 200, "history")
	var listed []string
	for _, s := range r.Body["snapshots"].([]any) {
		listed = append(listed, s.(map[string]any)["cid"].(string))
	}
	if !slices.Equal(listed, []string{second, first}) {
		t.Fatalf("the history lists %v, want [%s %s]", listed, second, first)
	}
	for _, c := range listed {
		if _, err := files.Stat(bg(), storage.SnapshotSpace(ws), c); err != nil {
			t.Errorf("snapshot %s is listed but not in storage: %v", c, err)
		}
	}
}

// snapshotsAre checks that the agent's Snapshot objects are exactly the completed ones with
// the given CIDs.
func snapshotsAre(ns, agent string, cids ...string) error {
	var list agentsv1.SnapshotList
	if err := k8s.List(bg(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	var got []string
	for _, s := range list.Items {
		if s.Spec.AgentRef.Name != agent {
			continue
		}
		if s.Status.Phase != agentsv1.SnapshotCompleted {
			return fmt.Errorf("snapshot %s is %q", s.Name, s.Status.Phase)
		}
		got = append(got, s.Status.CID)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(cids))
	if !slices.Equal(got, want) {
		return fmt.Errorf("snapshots %v, want %v", got, want)
	}
	return nil
}

// TestDNSOutage: a custom domain created while DNS is down stays pending_ownership (the
// controller keeps looking, with backoff) and becomes active once DNS answers with the token.
func TestDNSOutage(t *testing.T) {
	const ws = "dns-outage"
	workspace(t, ws, agentsv1.PlanPro)
	tok := token(t, ws)
	agent := newAgent(t, mainURL, tok, "webmaster")
	dnsServer.Stop()
	restarted := false
	defer func() {
		if !restarted {
			_ = dnsServer.Restart()
		}
	}()

	r := expect(t, call(replicaURL, "POST", "/v0/agents/"+agent+"/domains", tok, map[string]any{"customDomain": "shop.example.test"}), 201, "create domain")
	d := r.obj("domain")
	path := "/v0/agents/" + agent + "/domains/" + d["id"].(string)
	ver := d["verification"].(map[string]any)
	get := func() map[string]any {
		t.Helper()
		return expect(t, call(mainURL, "GET", path, tok, nil), 200, "get domain").obj("domain")
	}
	// While DNS is down: look-ups keep failing as DNSUnavailable (waited for: two of them in a
	// row), and the domain stays put at every look.
	if err := eventually(settleTimeout, domainCheckInterval/2, func() error {
		cur := get()
		if cur["status"] != "pending_ownership" {
			t.Fatalf("DNS is down, yet the domain is %v", cur)
		}
		if cur["statusReason"] != string(dnsverify.Unavailable) || cur["checks"].(float64) < 2 {
			return fmt.Errorf("want repeated DNSUnavailable checks, domain %v", cur)
		}
		return nil
	}); err != nil {
		t.Fatalf("DNS is down: %v", err)
	}
	v := call(mainURL, "POST", path+"/verify", tok, nil)
	if (v.Status != 200 && v.Status != 202) || v.obj("domain")["status"] != "pending_ownership" {
		t.Fatalf("verify while DNS is down: %s", v)
	}

	dnsServer.SetTXT(ver["name"].(string), ver["value"].(string))
	if err := dnsServer.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
		if cur := get(); cur["status"] != "active" || cur["verified"] != true {
			return fmt.Errorf("DNS is back, the domain is %v", cur)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
