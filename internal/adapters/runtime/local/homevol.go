package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"

	"github.com/agentplane/agentplane/internal/adapters/archive"
	"github.com/agentplane/agentplane/internal/adapters/loopfs"
)

// A home of a bounded size (as root): each home is an ext4 filesystem in a sparse image file
// beside it (<dir>/home.img), loop-mounted at the home with nosuid, nodev and discard (what an
// agent deletes goes back to the host). An agent that fills its home gets ENOSPC there and
// nowhere else: the other homes, the state dir and the control plane's data keep their space.
// An empty home's image takes about 3 MiB of disk. The image is outside the home, so nothing
// in the sandbox reaches it; the mount outlives the manager (a gateway kept running keeps its
// home) and is undone when the home is removed or the runtime stops its gateways.

const (
	// DefaultHomeSize bounds an agent's home on the local runtime (Options.HomeSize), as the
	// kube runtime's home volume is sized (kube.DefaultStorageSize).
	DefaultHomeSize = 5 << 30
	homeImageName   = "home.img"
	// homeProbeSize is the size of the volume made at start to check that this host can.
	homeProbeSize = 16 << 20
)

// errUnbounded: a home that holds files but has no image was made before homes had a size.
var errUnbounded = errors.New("the home was made before homes had a size limit")

// homeVolumes makes and mounts the homes' images.
type homeVolumes struct {
	size  int64
	tools loopfs.Tools
	// mu serialises attach: two callers must not mount one image twice.
	mu sync.Mutex
}

// newHomeVolumes returns homeVolumes of size bytes once a probe volume was made, mounted and
// unmounted on this host; the error says why not.
func newHomeVolumes(size int64) (*homeVolumes, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the manager is not root: it cannot mount a volume per home")
	}
	tools, err := loopfs.Find()
	if err != nil {
		return nil, err
	}
	v := &homeVolumes{size: size, tools: tools}
	dir, err := os.MkdirTemp("", "agentplane-home-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	probe := &homeVolumes{size: homeProbeSize, tools: tools}
	home := filepath.Join(dir, homeDirName)
	if err := probe.attach(home); err != nil {
		return nil, err
	}
	if err := detachHome(home); err != nil {
		return nil, fmt.Errorf("unmount a probe volume: %w", err)
	}
	return v, nil
}

// attach mounts home's image at home, making the image first when there is none and home is
// missing or empty. A home already mounted is left as it is; one with files and no image is
// errUnbounded (migrate moves it into a volume once nothing runs in it).
func (v *homeVolumes) attach(home string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if loopfs.Mounted(home) {
		return nil
	}
	img := imageOf(home)
	switch _, err := os.Lstat(img); {
	case errors.Is(err, fs.ErrNotExist):
		if entries, err := os.ReadDir(home); err == nil && len(entries) > 0 {
			return errUnbounded
		}
		if err := v.tools.Make(img, v.size); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if err := v.tools.Mount(img, home); err != nil {
		return err
	}
	return os.Chmod(home, 0o700)
}

// migrate moves the files of a home made before homes had a size (one nothing runs in) into a
// volume of its own, which then takes its place. The image is made and filled beside the
// home and only named home.img once it holds every file; a home that does not fit stays as
// it was, unbounded, and the error says why.
func (v *homeVolumes) migrate(home string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	img := imageOf(home)
	if _, err := os.Lstat(img); err == nil || loopfs.Mounted(home) {
		return nil
	}
	staging, tmpImg := home+".migrating", img+".migrating"
	_ = detachHome(staging) // left by a manager that stopped half-way
	_ = os.RemoveAll(staging)
	err := v.tools.Make(tmpImg, v.size)
	if err == nil {
		err = v.fill(tmpImg, staging, home)
	}
	if err == nil {
		err = os.Rename(tmpImg, img)
	}
	if err != nil {
		_ = os.Remove(tmpImg)
		return fmt.Errorf("move the home into a volume of %d bytes: %w", v.size, err)
	}
	// The volume holds every file: the former home goes, the volume takes its place.
	old := home + ".premigration"
	if err := os.Rename(home, old); err != nil {
		return err
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	if err := v.tools.Mount(img, home); err != nil {
		return err
	}
	return archive.RemoveAll(old)
}

// fill mounts img at staging and copies the tree of home into it (owners, modes, times and
// links as they are: cp -a follows no link), then unmounts it.
func (v *homeVolumes) fill(img, staging, home string) error {
	if err := os.Mkdir(staging, 0o700); err != nil {
		return err
	}
	defer os.Remove(staging)
	if err := v.tools.Mount(img, staging); err != nil {
		return err
	}
	out, err := exec.Command("cp", "-a", "--", home+"/.", staging+"/").CombinedOutput()
	if uerr := detachHome(staging); err == nil && uerr != nil {
		return uerr
	}
	if err != nil {
		return fmt.Errorf("copy the home: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// imageOf is the image of the volume of home, beside it.
func imageOf(home string) string { return filepath.Join(filepath.Dir(home), homeImageName) }

// detachHome unmounts the volume mounted at home, if any.
func detachHome(home string) error { return loopfs.Unmount(home) }

// removeHomeDir removes dir, an agent's or a warm gateway's, after unmounting its home.
func removeHomeDir(dir string) error {
	if err := detachHome(filepath.Join(dir, homeDirName)); err != nil {
		return err
	}
	return archive.RemoveAll(dir)
}

// mountedHomes lists the homes mounted under stateDir (as the kernel names them: links in
// stateDir's path resolved).
func mountedHomes(stateDir string) []string {
	if real, err := filepath.EvalSymlinks(stateDir); err == nil {
		stateDir = real
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(stateDir))
	if err != nil {
		return nil
	}
	var homes []string
	for _, m := range mounts {
		if m.Mountpoint != stateDir && filepath.Base(m.Mountpoint) == homeDirName {
			homes = append(homes, m.Mountpoint)
		}
	}
	return homes
}

// attachHome gives home its volume when homes have a size here. A home made before homes had
// one is used as it is: errUnbounded, for the caller to report or ignore.
func (r *Runtime) attachHome(home string) error {
	if r.vols == nil {
		return nil
	}
	return r.vols.attach(home)
}

// mountExisting mounts home's volume when it has one that is not mounted (a manager that
// restarted mounts it on first use); it makes none.
func (r *Runtime) mountExisting(home string) {
	if r.vols == nil {
		return
	}
	if _, err := os.Lstat(imageOf(home)); err != nil {
		return
	}
	if err := r.vols.attach(home); err != nil {
		r.opts.Log.Error(err, "cannot mount the home's volume", "home", home)
	}
}

// setupHomeVolumes bounds each home at HomeSize where this host lets the manager mount a
// volume per home (as root), and says at start whether it does.
func (r *Runtime) setupHomeVolumes() {
	v, err := newHomeVolumes(r.opts.HomeSize)
	if err != nil {
		r.noHomeLimit = err.Error()
		r.opts.Log.Info("agents' homes have no size limit", "why", r.noHomeLimit)
		return
	}
	r.vols = v
	r.opts.Log.Info("each agent's home is a volume of its own", "size", r.opts.HomeSize)
}

// HomeLimit reports whether each home has a size limit and, when not, why.
func (r *Runtime) HomeLimit() (bool, string) { return r.vols != nil, r.noHomeLimit }
