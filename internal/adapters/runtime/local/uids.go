package local

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Sandbox uids, as root: each home runs as a uid of its own in [sandboxUIDBase,
// sandboxUIDBase+sandboxUIDSpan), allocated machine-wide so that no two homes share one,
// whichever runtime (platform, test, dev server) on this host made them.
//
// The table is a directory (DefaultUIDDir) with one file per allocated uid, named by it and
// holding its home's path; allocation and release hold an flock on the directory's lock file,
// so runtimes in other processes agree. A home's allocation starts at a hash of its path and
// probes on from there, so a home's uid is stable and a lookup is one read in the common
// case. An entry whose home no longer exists (a runtime that died before it released it) is
// taken over once it is older than uidStaleAfter (a home is made right after its uid is
// allocated, never a minute later).
const (
	// DefaultUIDDir is where the machine's sandbox uids are allocated (Options.UIDDir).
	DefaultUIDDir = "/var/lib/agentplane/sandbox-uids"
	uidLockFile   = ".lock"
	uidStaleAfter = time.Minute
	// uidProbes bounds the slots a lookup tries: more homes than that in one run of taken
	// slots means the table is full in practice.
	uidProbes = 1 << 16
)

// uidTable allocates homes' uids in dir.
type uidTable struct {
	dir    string
	mu     sync.Mutex
	byHome map[string]int
	swept  bool // the abandoned entries were removed (at the first allocation)
}

func newUIDTable(dir string) *uidTable {
	if dir == "" {
		dir = DefaultUIDDir
	}
	return &uidTable{dir: dir, byHome: map[string]int{}}
}

// of is home's uid, allocated now if home has none.
func (t *uidTable) of(home string) (int, error) {
	home = filepath.Clean(home)
	t.mu.Lock()
	defer t.mu.Unlock()
	if uid, ok := t.byHome[home]; ok {
		return uid, nil
	}
	unlock, err := t.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	if !t.swept {
		t.sweepLocked()
		t.swept = true
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(home))
	start := h.Sum32() % sandboxUIDSpan
	for i := range uint32(uidProbes) {
		uid := sandboxUIDBase + int((start+i)%sandboxUIDSpan)
		ok, err := t.claim(uid, home)
		if err != nil {
			return 0, err
		}
		if ok {
			t.byHome[home] = uid
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no free sandbox uid in %d slots from %d (%s)", uidProbes, sandboxUIDBase+int(start), t.dir)
}

// claim takes uid for home unless another home holds it (the lock is held).
func (t *uidTable) claim(uid int, home string) (bool, error) {
	p := filepath.Join(t.dir, strconv.Itoa(uid))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, werr := f.WriteString(home)
		return werr == nil, errors.Join(werr, f.Close())
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	if string(b) == home {
		return true, nil
	}
	if !abandoned(p, string(b)) {
		return false, nil
	}
	return true, os.WriteFile(p, []byte(home), 0o600) // its home is gone: take it over
}

// abandoned says whether the entry at p, held by the home holder, was left by a runtime that
// ended without releasing it: its home is gone and it is older than uidStaleAfter (a fresh
// entry's home may be about to be made).
func abandoned(p, holder string) bool {
	info, err := os.Stat(p)
	if err != nil || time.Since(info.ModTime()) < uidStaleAfter || !filepath.IsAbs(holder) {
		return false
	}
	_, err = os.Lstat(holder)
	return errors.Is(err, fs.ErrNotExist)
}

// sweepLocked removes the entries whose homes are gone (runtimes that ended without
// releasing them: a crash, or a test's platform whose temp dirs went with it).
func (t *uidTable) sweepLocked() {
	ents, err := os.ReadDir(t.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(t.dir, e.Name())
		if b, err := os.ReadFile(p); err == nil && abandoned(p, string(b)) {
			_ = os.Remove(p)
		}
	}
}

// allocated reports whether some home on the machine holds uid (its file in the table).
func (t *uidTable) allocated(uid int) bool {
	_, err := os.Stat(filepath.Join(t.dir, strconv.Itoa(uid)))
	return err == nil
}

// release frees home's uid (its home is removed).
func (t *uidTable) release(home string) {
	home = filepath.Clean(home)
	t.mu.Lock()
	defer t.mu.Unlock()
	uid, ok := t.byHome[home]
	if !ok {
		return // never looked up here: a later allocation takes it over once its home is gone
	}
	delete(t.byHome, home)
	unlock, err := t.lock()
	if err != nil {
		return
	}
	defer unlock()
	p := filepath.Join(t.dir, strconv.Itoa(uid))
	if b, err := os.ReadFile(p); err == nil && string(b) == home {
		_ = os.Remove(p)
	}
}

// releaseUnder frees the uids of the homes at or below dir (a removed agent or member dir),
// and returns them.
func (t *uidTable) releaseUnder(dir string) []int {
	dir = filepath.Clean(dir)
	t.mu.Lock()
	var homes []string
	var uids []int
	for h, uid := range t.byHome {
		if h == dir || strings.HasPrefix(h, dir+string(filepath.Separator)) {
			homes = append(homes, h)
			uids = append(uids, uid)
		}
	}
	t.mu.Unlock()
	for _, h := range homes {
		t.release(h)
	}
	return uids
}

// releaseUIDs frees the sandbox uids of the homes at or below dir, which was just removed,
// and their cgroups.
func (r *Runtime) releaseUIDs(dir string) {
	if r.sbx != nil && r.sbx.root {
		for _, uid := range r.sbx.uids.releaseUnder(dir) {
			if r.cg != nil {
				// Its processes may still be exiting: then the shutdown's sweep removes it.
				r.cg.track(uid)
				r.cg.remove(uid)
			}
		}
	}
}

// endStragglers kills what is left in the cgroups of home (if it is there), which is about to
// be removed with its agent's or member's dir once its gateway and commands were stopped
// (cgroups.end). Its uid is looked up in the table: after a restart of the manager, this
// runtime may not have looked it up yet.
func (r *Runtime) endStragglers(ctx context.Context, home string) {
	if r.sbx == nil || !r.sbx.root || r.cg == nil {
		return
	}
	if _, err := os.Stat(home); err != nil {
		return
	}
	if uid, err := r.sbx.uids.of(home); err == nil {
		ctx, cancel := context.WithTimeout(ctx, r.opts.StopTimeout)
		defer cancel()
		r.cg.end(ctx, uid)
	}
}

// lock makes the table's dir (root's alone) and takes its flock.
func (t *uidTable) lock() (func(), error) {
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox uid table: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(t.dir, uidLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox uid table: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox uid table: %w", err)
	}
	return func() { _ = f.Close() }, nil
}
