package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local/nethelper"
)

// Sandbox modes (Options.Sandbox).
const (
	// SandboxAuto sandboxes every gateway and command when this host can, and otherwise runs
	// them unsandboxed but serves one workspace only (Options.SingleWorkspace is then forced).
	SandboxAuto = "auto"
	// SandboxRequired refuses to start the runtime when this host cannot sandbox.
	SandboxRequired = "required"
	// SandboxOff runs gateways and commands as plain processes of the manager's user, one
	// workspace only: for hosts without namespaces where a single tenant is all there is.
	SandboxOff = "off"
)

// ReadOnlyPathsEnv lists (colon-separated) host paths every sandbox shows read-only
// (Options.ReadOnlyPaths).
const ReadOnlyPathsEnv = "AGENTPLANE_SANDBOX_READONLY"

// sandboxUIDBase and sandboxUIDSpan: as root, each agent home runs as its own uid in
// [base, base+span), allocated machine-wide (uids.go), above the system's and the usual
// subordinate ranges.
const (
	sandboxUIDBase = 1 << 30
	sandboxUIDSpan = 1 << 29
)

// sandbox runs a gateway or a command in a sandbox of Linux namespaces made by bubblewrap
// (bwrap, Debian's package): its own mount namespace that shows the system's files and the
// engine read-only, the agent's home read-write and nothing else of this host's files (not
// the state dir, not other homes, not the kubeconfig); its own PID namespace, so it sees and
// signals only its own processes and everything in it dies with it; its own IPC, UTS and
// cgroup namespaces. As root the processes run as a uid of their own per home (setpriv drops
// every capability and sets no_new_privs); as an ordinary user bwrap makes an unprivileged
// user namespace. Each gateway has a network namespace of its own (netns.go), which as root its
// agent's commands join; as an ordinary user a network helper in the sandbox makes the
// manager's sockets in it (nethelper.go).
type sandbox struct {
	bwrap   string // bwrap's path
	setpriv string // setpriv's path (root only)
	nsenter string // nsenter's path (root only): commands join their gateway's network
	root    bool   // the manager runs as root: per-home uids
	netns   bool   // a network namespace per sandbox (where bwrap can make one: netns.go)
	// helper is this executable's path, the network helper of an ordinary user's sandboxes
	// (nethelper.go); "" as root, whose manager makes their sockets itself.
	helper string
	uids   *uidTable // the homes' uids (root only)
	// system is the bwrap arguments that show the host's system files.
	system []string
}

// sandboxSpec is one process to run in a sandbox.
type sandboxSpec struct {
	home string // bound read-write at its own path, or at homeAt
	// homeAt, when set, is where the sandbox shows home (a gateway born from a template and
	// its agent's other sandboxes: templateHome); dir is then a path under it.
	homeAt   string
	readOnly []string // bound read-only at their own paths (the engine dir)
	dir      string   // working directory (inside home)
	binary   string   // what to run (a path that is visible inside)
	args     []string
	// dieWithParent kills the sandbox when the process that started it (bwrap's parent)
	// dies: commands, not gateways (those outlive a manager restart).
	dieWithParent bool
	// joinNet, when set, is the network namespace the sandbox joins (a running gateway's, for
	// its agent's commands: nsPath of a copy of its fd) instead of an empty one of its own.
	joinNet string
	// uid, when not 0, is the uid the processes run as (as root) instead of the home's own
	// (inSandbox sets it; the manager's own probes and warm-ups set warmUID).
	uid int
	// mounts are further binds into the sandbox's private /tmp (the engine's compile cache).
	mounts []mount
	// net, when set (an ordinary user's gateways and commands), runs the network helper in
	// the sandbox's network namespace (nethelper.go).
	net *sandboxNet
	// template, when set (a template gateway and its copies), shows the template's hooks
	// their dir and the reseed addon (template_freeze.go).
	template *sandboxTemplate
	// checkpoint makes the sandbox one CRIU can checkpoint and restore (checkpoint.go):
	// tini is its PID 1 (not bwrap, whose binary is not visible inside), in a session of its
	// own, in the host's cgroup namespace, with io_uring refused (seccomp filter on fd 3),
	// and its stdin, stdout and stderr opened inside (a file of this host's outside the
	// sandbox's mounts cannot be restored): the log file is bound in and appended to.
	checkpoint *checkpointSpec
}

// sandboxNet is the network helper of an ordinary user's sandbox (nethelper.go).
type sandboxNet struct {
	dir  string // the host dir bound at nethelper.SandboxDir, where the helper listens
	gate bool   // the command waits on netGateFD for the manager to serve its namespace
}

// sandboxTemplate is what a template gateway's sandbox, or a copy's, shows its hooks.
type sandboxTemplate struct {
	dir    string // the host dir of its FIFOs, bound read-write at templateRunDir
	reseed string // the reseed addon (a file, not a link), bound at templateReseed
}

// checkpointSpec is what a checkpointable sandbox needs besides a plain one.
type checkpointSpec struct {
	tini string // tini's path (under /usr)
	log  string // the host file stdout and stderr are appended to
}

// tiniArgs run tini, a checkpointable sandbox's init: -v has it log how its child (the
// gateway) ended, "Main child exited ...", as the log's last line: the only word of the
// gateway's exit status when the manager is not its parent (initExit).
var tiniArgs = []string{"-v", "--"}

// sandboxLog is where a checkpointable sandbox shows its log file.
const sandboxLog = "/tmp/.agentplane-gateway.log"

// mount binds the host path src at dst (under /tmp) in a sandbox, read-only unless rw.
type mount struct {
	src, dst string
	rw       bool
}

// newSandbox finds bwrap (and setpriv as root) and checks that this kernel lets it build a
// sandbox, by running `true` in one. The error says why not.
func newSandbox(ctx context.Context) (*sandbox, error) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
	}
	s := &sandbox{bwrap: bw, root: os.Geteuid() == 0, system: systemBinds()}
	if s.root {
		if s.setpriv, err = exec.LookPath("setpriv"); err != nil {
			return nil, errors.New("setpriv (util-linux) is not installed")
		}
		if s.nsenter, err = exec.LookPath("nsenter"); err != nil {
			return nil, errors.New("nsenter (util-linux) is not installed")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tmp, err := os.MkdirTemp("", "agentplane-sandbox-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if s.root {
		if err := os.Chown(tmp, warmUID, warmUID); err != nil {
			return nil, err
		}
	}
	// A network namespace per sandbox too when bwrap can make one (netns.go); as an
	// ordinary user its sockets come from the network helper, this executable.
	s.netns = true
	if !s.root {
		if s.helper, err = os.Executable(); err != nil {
			s.netns = false
		}
	}
	err = s.probe(ctx, tmp)
	if err != nil && s.netns {
		s.netns = false
		err = s.probe(ctx, tmp)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// probe runs `test -w .` in a sandbox of dir.
func (s *sandbox) probe(ctx context.Context, dir string) error {
	bin, args := s.wrap(sandboxSpec{home: dir, dir: dir, uid: warmUID, binary: "/bin/sh", args: []string{"-c", "test -w ."}, dieWithParent: true})
	cmd := exec.CommandContext(ctx, bin, args...)
	files, err := sandboxFiles()
	if err != nil {
		return err
	}
	defer closeFiles(files)
	cmd.ExtraFiles = files
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bwrap cannot build a sandbox on this kernel (user or mount namespaces refused?): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sandboxFiles are the extra files (fd 3 on) every sandbox's bwrap is started with: the
// seccomp filter's pipe.
func sandboxFiles() ([]*os.File, error) {
	f, err := seccompPipe()
	if err != nil {
		return nil, err
	}
	return []*os.File{f}, nil
}

// closeFiles closes the files (the parent's copies, once the child has them).
func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// systemBinds shows the host's system dirs read-only (a merged-/usr system's /bin, /lib,
// /lib64 and /sbin are symlinks, and stay symlinks), /etc read-only, and a fresh /proc, /dev
// and /tmp (a tmpfs of runtime.TmpSize: unbounded, it could take half the host's RAM).
func systemBinds() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if target, err := os.Readlink(d); err == nil {
			args = append(args, "--symlink", target, d)
		} else if info, err := os.Stat(d); err == nil && info.IsDir() {
			args = append(args, "--ro-bind", d, d)
		}
	}
	return append(args, "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", strconv.Itoa(runtime.TmpSize), "--tmpfs", "/tmp")
}

// wrap returns the command line that runs spec in a sandbox.
func (s *sandbox) wrap(spec sandboxSpec) (string, []string) {
	// Every sandbox: a session of its own (no controlling terminal to push keystrokes into
	// with TIOCSTI) and the seccomp filter (seccomp.go) on fd 3, which the process that starts
	// it passes (sandboxFiles).
	common := []string{"--new-session", "--seccomp", strconv.Itoa(seccompFD), "--unshare-pid", "--unshare-ipc", "--unshare-uts"}
	args := append(common, "--unshare-cgroup-try", "--hostname", "agent")
	if spec.checkpoint != nil {
		args = append([]string{"--as-pid-1"}, append(common, "--hostname", "agent")...)
	}
	if !s.root {
		args = append(args, "--unshare-user", "--disable-userns")
	}
	if s.netns && spec.joinNet == "" {
		args = append(args, "--unshare-net")
	}
	if spec.dieWithParent {
		args = append(args, "--die-with-parent")
	}
	args = append(args, s.system...)
	made := map[string]bool{"/": true, "/tmp": true}
	bind := func(flag, p string) {
		args = append(args, parentDirs(p, made)...)
		args = append(args, flag, p, p)
	}
	for _, p := range spec.readOnly {
		for _, q := range realAndGiven(p) {
			if !underSystem(q) {
				bind("--ro-bind", q)
			}
		}
	}
	if spec.homeAt != "" {
		args = append(args, parentDirs(spec.homeAt, made)...)
		args = append(args, "--bind", spec.home, spec.homeAt)
	} else {
		for _, q := range realAndGiven(spec.home) {
			bind("--bind", q)
		}
	}
	for _, m := range spec.mounts {
		args = append(args, tmpDirs(m.dst, made)...)
		flag := "--ro-bind"
		if m.rw {
			flag = "--bind"
		}
		args = append(args, flag, m.src, m.dst)
	}
	if c := spec.checkpoint; c != nil {
		args = append(args, tmpDirs(sandboxLog, made)...)
		args = append(args, "--bind", c.log, sandboxLog)
	}
	binds, helper := s.netHelperArgs(spec, made)
	args = append(args, binds...)
	if tp := spec.template; tp != nil {
		args = append(args, parentDirs(templateRunDir, made)...)
		args = append(args, "--bind", tp.dir, templateRunDir, "--ro-bind", tp.reseed, templateReseed)
	}
	if spec.dir != "" {
		args = append(args, "--chdir", spec.dir)
	}
	args = append(args, "--")
	args = append(args, helper...)
	if spec.checkpoint != nil {
		// Still root in the sandbox: the log stays the manager's file (0600). Redirections
		// of a bare exec, which the shell keeps no copy of the former fds for.
		args = append(args, "/bin/sh", "-c", `exec </dev/null >>`+sandboxLog+` 2>&1; exec "$@"`, "sh")
	}
	if s.root {
		uid := strconv.Itoa(s.uidOf(spec))
		args = append(args, s.setpriv, "--reuid", uid, "--regid", uid, "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")
		// setpriv's uid/gid changes need these two; they are gone once it has changed them.
		args = append([]string{"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"}, args...)
	}
	if c := spec.checkpoint; c != nil {
		args = append(append(args, c.tini), tiniArgs...)
	}
	args = append(args, spec.binary)
	return s.bwrap, append(args, spec.args...)
}

// netHelperArgs are, for a sandbox with a network helper (nethelper.go), the bwrap arguments
// that show the helper's dir and program, and the shell that starts the helper in the
// background and then becomes spec's command (after its gate, for a command that needs its
// network at once); nil, nil for any other.
func (s *sandbox) netHelperArgs(spec sandboxSpec, made map[string]bool) (binds, command []string) {
	if spec.net == nil || !s.netns || s.helper == "" {
		return nil, nil
	}
	binds = append(parentDirs(nethelper.SandboxDir, made), "--bind", spec.net.dir, nethelper.SandboxDir, "--ro-bind", s.helper, nethelper.SandboxProgram)
	fd := strconv.Itoa(netGateFD)
	script := nethelper.Env + "=" + nethelper.SandboxDir + ` "$0" </dev/null >/dev/null ` + fd + `<&- & `
	if spec.net.gate {
		script += `read -r _ <&` + fd + ` || { echo "agentplane: the sandbox's network was not set up" >&2; exit 125; }; exec ` + fd + `<&-; `
	}
	return binds, []string{"/bin/sh", "-c", script + `exec "$@"`, nethelper.SandboxProgram}
}

// uidOf is the uid spec's processes have inside their sandbox: as root spec.uid (inSandbox
// sets the home's allocated uid there); as an ordinary user, that user's (bwrap maps it to
// itself).
func (s *sandbox) uidOf(spec sandboxSpec) int {
	switch {
	case !s.root:
		return os.Getuid()
	case spec.uid != 0:
		return spec.uid
	}
	panic("local: a root sandbox of " + spec.home + " without its uid (inSandbox allocates it)")
}

// tmpDirs creates p's missing ancestors below /tmp in the sandbox's private /tmp, writable by
// all (sticky): Node's compile cache makes its own dir with one mkdir, which an existing dir
// fails with EACCES instead of EEXIST when its parent is not writable.
func tmpDirs(p string, made map[string]bool) []string {
	var chain []string
	for d := filepath.Dir(p); !made[d] && within(d, "/tmp"); d = filepath.Dir(d) {
		chain = append(chain, d)
		made[d] = true
	}
	var args []string
	for i := len(chain) - 1; i >= 0; i-- {
		args = append(args, "--perms", "01777", "--dir", chain[i])
	}
	made[p] = true
	return args
}

// parentDirs creates p's missing ancestors in the sandbox's root, world-traversable (bwrap
// makes them 0700 otherwise, which a per-agent uid cannot pass).
func parentDirs(p string, made map[string]bool) []string {
	var args []string
	var chain []string
	for d := filepath.Dir(p); !made[d] && !underSystem(d); d = filepath.Dir(d) {
		chain = append(chain, d)
		made[d] = true
	}
	for i := len(chain) - 1; i >= 0; i-- {
		args = append(args, "--perms", "0755", "--dir", chain[i])
	}
	made[p] = true
	return args
}

// underSystem: p is inside a dir that systemBinds already shows.
func underSystem(p string) bool {
	for _, d := range []string{"/usr", "/etc", "/proc", "/dev"} {
		if within(p, d) {
			return true
		}
	}
	return false
}

// sandboxPath is where a sandbox that shows home at homeAt shows p, a path in home (or in the
// path home resolves to); p itself when homeAt is "" or p is not in home.
func sandboxPath(home, homeAt, p string) string {
	if homeAt == "" {
		return p
	}
	for _, h := range realAndGiven(home) {
		if rel, err := filepath.Rel(h, p); err == nil && within(p, h) {
			return filepath.Join(homeAt, rel)
		}
	}
	return p
}

// realAndGiven is p and, when it differs, the path p resolves to (symlinks in it).
func realAndGiven(p string) []string {
	p = filepath.Clean(p)
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		return []string{real, p}
	}
	return []string{p}
}

// ownTree gives rel (a path in home, "." for all of it), everything below it and the dirs
// between home and it to uid (as root, before a sandbox of that uid uses a home the manager
// wrote into). Entries already owned are left alone. Every path is resolved through an
// os.Root of the home: the home is the agent's, and a symlink it planted (or swaps in while
// this runs) must not lead a root chown out of it.
func ownTree(home, rel string, uid int) error {
	root, err := os.OpenRoot(home)
	if err != nil {
		return err
	}
	defer root.Close()
	for d := filepath.Dir(rel); d != "." && d != "/" && !strings.HasPrefix(d, ".."); d = filepath.Dir(d) {
		_ = root.Lchown(d, uid, uid)
	}
	if rel != "." {
		_ = root.Lchown(".", uid, uid)
	}
	return fs.WalkDir(root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == uid {
			return nil
		}
		return root.Lchown(p, uid, uid)
	})
}

// inSandbox turns a process of a home into the command line that runs it in the home's
// sandbox (as it is when the runtime runs unsandboxed), with the engine's compile cache
// read-only once it is warm. As root the home is given to its uid first when own is set (a
// gateway start: the manager may have written into it since); a gateway start also has the
// compile cache warmed when it is not yet.
func (r *Runtime) inSandbox(spec sandboxSpec, engineDir string, own bool) (string, []string, error) {
	if r.sbx == nil {
		return spec.binary, spec.args, nil
	}
	var procs []string // an agent's home (not the runtime's own warmUID): its cgroup
	if r.sbx.root && spec.uid == 0 {
		uid, err := r.sbx.uids.of(spec.home)
		if err != nil {
			return "", nil, fmt.Errorf("allocate the home's sandbox uid: %w", err)
		}
		spec.uid = uid
		if r.cg != nil {
			if procs, err = r.cg.join(uid); err != nil {
				return "", nil, fmt.Errorf("the agent's cgroup: %w", err)
			}
		}
	}
	if engineDir != "" {
		spec.readOnly = append(spec.readOnly, engineDir)
		spec.mounts = append(spec.mounts, r.compileCacheMounts(engineDir, r.sbx.uidOf(spec), own)...)
	}
	spec.readOnly = append(spec.readOnly, r.opts.ReadOnlyPaths...)
	if r.sbx.root && own {
		if err := ownTree(spec.home, ".", spec.uid); err != nil {
			return "", nil, fmt.Errorf("give the home to its sandbox's uid: %w", err)
		}
	}
	bin, args := r.sbx.wrap(spec)
	if spec.joinNet != "" && r.sbx.netns {
		bin, args = r.sbx.nsenter, append([]string{"--net=" + spec.joinNet, "--", bin}, args...)
	}
	if procs != nil {
		bin, args = cgroupWrap(procs, bin, args)
	}
	return bin, args, nil
}

// own gives what the manager just wrote into a home to the home's sandbox uid (as root): the
// trees at paths (inside home), and the dirs between the home and them.
func (r *Runtime) own(home string, paths ...string) {
	if r.sbx == nil || !r.sbx.root {
		return
	}
	uid, err := r.sbx.uids.of(home)
	if err != nil {
		r.opts.Log.Error(err, "cannot allocate the home's sandbox uid", "home", home)
		return
	}
	for _, p := range paths {
		rel, err := filepath.Rel(home, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if err := ownTree(home, rel, uid); err != nil {
			r.opts.Log.Error(err, "cannot give a file to the agent's sandbox uid", "path", p)
		}
	}
}

// setupSandbox applies Options.Sandbox: it finds the sandbox, or says why there is none and
// then serves one workspace only (the one whose agents are already on disk, if any).
func (r *Runtime) setupSandbox() error {
	mode := r.opts.Sandbox
	if mode == "" {
		mode = SandboxAuto
	}
	for _, p := range filepath.SplitList(os.Getenv(ReadOnlyPathsEnv)) {
		if filepath.IsAbs(p) {
			r.opts.ReadOnlyPaths = append(r.opts.ReadOnlyPaths, p)
		}
	}
	if err := r.setupCAFile(); err != nil {
		return err
	}
	switch mode {
	case SandboxAuto, SandboxRequired:
		sbx, err := newSandbox(context.Background())
		if err == nil {
			r.sbx = sbx
			sbx.uids = newUIDTable(r.opts.UIDDir)
			r.opts.Log.Info("agents run in sandboxes (bubblewrap: mount, PID, IPC and UTS namespaces)", "perAgentUID", sbx.root)
			r.setupCgroups()
			r.setupNetns()
			r.setupHomeVolumes()
			return nil
		}
		if mode == SandboxRequired {
			return fmt.Errorf("local runtime: agents must run in sandboxes but %v", err)
		}
		r.unsandboxed = err.Error()
	case SandboxOff:
		r.unsandboxed = "sandboxes are turned off (--sandbox=off)"
	default:
		return fmt.Errorf("local runtime: unknown sandbox mode %q (auto, required or off)", mode)
	}
	if nss, err := os.ReadDir(filepath.Join(r.opts.StateDir, "agents")); err == nil {
		for _, ns := range nss {
			if names, _ := os.ReadDir(filepath.Join(r.opts.StateDir, "agents", ns.Name())); ns.IsDir() && len(names) > 0 {
				r.tenant = ns.Name()
				break
			}
		}
	}
	r.noHomeLimit = "agents are not sandboxed"
	r.opts.Log.Info("AGENTS ARE NOT SANDBOXED: this runtime serves one workspace only", "why", r.unsandboxed, "workspace", r.tenant)
	return nil
}

// Sandboxed reports whether agents run in sandboxes and, when not, why.
func (r *Runtime) Sandboxed() (bool, string) { return r.sbx != nil, r.unsandboxed }

// ErrOtherWorkspace is returned for an agent of a second workspace on a runtime that cannot
// sandbox its agents.
var ErrOtherWorkspace = errors.New("this host cannot sandbox agents, so it serves one workspace only")

// admitTenant lets an agent of namespace ns run: always when sandboxed, else when ns is the
// one workspace this runtime serves (the first one asked for).
func (r *Runtime) admitTenant(ns string) error {
	if r.sbx != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tenant == "" {
		r.tenant = ns
	}
	if r.tenant != ns {
		return fmt.Errorf("%w (%s): workspace %q is served here, %q is not", ErrOtherWorkspace, r.unsandboxed, r.tenant, ns)
	}
	return nil
}

// setupCgroups gives every agent a cgroup of its own with the memory and pids limits
// (cgroup.go) where this host lets the manager make them, and says at start whether it does.
func (r *Runtime) setupCgroups() {
	cg, err := newCgroups(cgroupRoot, r.opts.MemoryLimit, r.opts.PidsLimit)
	if err != nil {
		r.noCgroups = err.Error()
		r.opts.Log.Info("agents share the manager's cgroup: no memory or pids limit per agent", "why", r.noCgroups)
		return
	}
	r.cg = cg
	cg.sweepOrphans(r.sbx.uids.allocated)
	r.opts.Log.Info("each agent runs in a cgroup of its own", "memoryLimit", cg.mem, "pidsLimit", cg.pids, "cgroupV2", cg.v2)
}
