package local

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// slotOf is the uid a home's allocation tries first.
func slotOf(home string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(home))
	return sandboxUIDBase + int(h.Sum32()%sandboxUIDSpan)
}

// TestSandboxUIDsNeverCollide: homes get uids of their own machine-wide (two tables on one
// dir stand for two runtimes, in two processes), a home keeps its uid across runtimes, a
// uid another home holds is never handed out (the next slot is), and a released or
// abandoned uid is given again only once its home is gone.
func TestSandboxUIDsNeverCollide(t *testing.T) {
	dir, homes := t.TempDir(), t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(homes, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := newUIDTable(dir), newUIDTable(dir)

	t.Run("many homes from two runtimes at once get distinct uids", func(t *testing.T) {
		var mu sync.Mutex
		seen := map[int]string{}
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				tbl := a
				if i%2 == 1 {
					tbl = b
				}
				home := mk(fmt.Sprint("h", i))
				uid, err := tbl.of(home)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if other, dup := seen[uid]; dup {
					t.Errorf("uid %d given to %s and %s", uid, other, home)
				}
				seen[uid] = home
			})
		}
		wg.Wait()
	})

	t.Run("a home keeps its uid in another runtime", func(t *testing.T) {
		home := mk("kept")
		u1, err := a.of(home)
		if err != nil {
			t.Fatal(err)
		}
		if u2, err := newUIDTable(dir).of(home); err != nil || u2 != u1 {
			t.Fatalf("another runtime's uid for %s: %d (%v), want %d", home, u2, err, u1)
		}
	})

	t.Run("a slot another home holds is skipped", func(t *testing.T) {
		holder, home := mk("holder"), mk("wants-holders-slot")
		slot := slotOf(home)
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(slot)), []byte(holder), 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		_ = os.Chtimes(filepath.Join(dir, strconv.Itoa(slot)), old, old) // old, but its home is there
		uid, err := newUIDTable(dir).of(home)
		if err != nil || uid == slot {
			t.Fatalf("uid %d (%v): the slot %d belongs to %s", uid, err, slot, holder)
		}
	})

	t.Run("an abandoned uid is taken over once its home is gone", func(t *testing.T) {
		home := mk("heir")
		slot := slotOf(home)
		entry := filepath.Join(dir, strconv.Itoa(slot))
		if err := os.WriteFile(entry, []byte(filepath.Join(homes, "gone")), 0o600); err != nil {
			t.Fatal(err)
		}
		// Fresh: its home may be about to be made.
		c := newUIDTable(dir)
		if uid, err := c.of(home); err != nil || uid == slot {
			t.Fatalf("uid %d (%v): a minute-old entry must stay its home's", uid, err)
		}
		c.release(home)
		old := time.Now().Add(-2 * uidStaleAfter)
		if err := os.Chtimes(entry, old, old); err != nil {
			t.Fatal(err)
		}
		if uid, err := newUIDTable(dir).of(home); err != nil || uid != slot {
			t.Fatalf("uid %d (%v), want the abandoned slot %d", uid, err, slot)
		}
	})

	t.Run("a new runtime removes the entries of homes that are gone", func(t *testing.T) {
		kept, gone := mk("still-here"), filepath.Join(homes, "removed-without-release")
		old := time.Now().Add(-2 * uidStaleAfter)
		for uid, home := range map[int]string{sandboxUIDBase + 1: kept, sandboxUIDBase + 2: gone} {
			p := filepath.Join(dir, strconv.Itoa(uid))
			if err := os.WriteFile(p, []byte(home), 0o600); err != nil {
				t.Fatal(err)
			}
			_ = os.Chtimes(p, old, old)
		}
		if _, err := newUIDTable(dir).of(mk("newcomer")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(sandboxUIDBase+2))); !os.IsNotExist(err) {
			t.Errorf("the entry of a home that is gone is still there (%v)", err)
		}
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(sandboxUIDBase+1))); err != nil {
			t.Errorf("the entry of a home that is there was removed: %v", err)
		}
	})

	t.Run("a removed dir's homes release their uids", func(t *testing.T) {
		agent := mk("agent-dir")
		home := filepath.Join(agent, homeDirName)
		uid, err := a.of(home)
		if err != nil {
			t.Fatal(err)
		}
		a.releaseUnder(agent)
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(uid))); !os.IsNotExist(err) {
			t.Fatalf("uid %d still allocated after its dir was released (%v)", uid, err)
		}
	})
}
