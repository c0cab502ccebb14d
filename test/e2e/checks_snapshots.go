package e2e

import (
	"strings"
	"testing"
	"time"
)

// SnapshotTree lists every entry of the workspace (type, mode, path, link target) and the
// SHA-256 of every regular file: equal listings mean byte-for-byte equal workspaces.
const SnapshotTree = `find . -mindepth 1 -printf '%y %m %p %l\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum`

// CheckSnapshots syncs the real gateway's workspace, changes it, resets it to the snapshot and
// expects the same bytes back, with the gateway restarted and running.
func CheckSnapshots(t *testing.T, p *Platform, base string) {
	tree := func() string {
		r := Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": SnapshotTree}), 200, "hash the workspace")
		if r.Body["exitCode"] != 0.0 {
			t.Fatalf("hashing the workspace: %s", r.Raw)
		}
		return r.Str("stdout")
	}
	before := tree()
	if !strings.Contains(before, "./docs/in.txt") {
		t.Fatalf("the workspace lacks the uploaded file:\n%s", before)
	}
	start := time.Now()
	first := Must(t, p.Call("POST", base+"/snapshots/sync", nil), 201, "sync").Obj("snapshot")
	t.Logf("synced %v bytes as %v in %s", first["size"], first["cid"], time.Since(start).Round(time.Millisecond))
	cid, _ := first["cid"].(string)
	if again := Must(t, p.Call("POST", base+"/snapshots/sync", nil), 201, "sync again").Obj("snapshot"); again["cid"] != cid {
		t.Fatalf("unchanged workspace synced to %v, then %v", cid, again["cid"])
	}

	Must(t, p.Call("POST", base+"/console/exec", map[string]string{
		"command": `printf 'edited\n' >> docs/in.txt && printf new > added.txt && rm -f IDENTITY.md`,
	}), 200, "change the workspace")
	if tree() == before {
		t.Fatal("the change did not change the workspace")
	}
	if r := p.Call("POST", base+"/snapshots/reset", map[string]string{"snapshotCid": "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"}); r.Status != 404 || r.Str("error") != "Snapshot not found" {
		t.Fatalf("reset to a CID outside the history: %s", r.Raw)
	}

	start = time.Now()
	r := Must(t, p.Call("POST", base+"/snapshots/reset", map[string]string{"snapshotCid": cid}), 200, "reset")
	t.Logf("reset and gateway back in %s", time.Since(start).Round(time.Millisecond))
	if a := r.Obj("agent"); a["snapshotCid"] != cid || a["status"] != "running" {
		t.Fatalf("agent after reset: %s", r.Raw)
	}
	if after := tree(); after != before {
		t.Fatalf("the reset workspace differs from the snapshot:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	list := Must(t, p.Call("GET", base+"/snapshots", nil), 200, "history")
	if items, _ := list.Body["snapshots"].([]any); len(items) != 2 {
		t.Fatalf("history: %s", list.Raw)
	}
	Eventually(t, "the gateway to run after the reset", func() bool {
		return p.Call("GET", base, nil).Obj("agent")["status"] == "running"
	})
}
