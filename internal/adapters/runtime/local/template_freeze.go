package local

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// A template gateway's hooks (template.mjs) and the manager's half of them: before its dump,
// every Node process of the template is frozen (its threads held, the manager told); a copy
// restored from the image is thawed (each process reseeds OpenSSL from the kernel and drops
// what it drew before, then goes on).
const (
	// ReseedEnv names the reseed addon (hack/build-reseed.sh builds bin/agentplane-reseed.node)
	// when it is not beside this program's executable.
	ReseedEnv = "AGENTPLANE_RESEED"
	// ReseedName is the addon's file name.
	ReseedName = "agentplane-reseed.node"
	// templateRunDir is where a template's sandbox (and each copy's) shows its dir of FIFOs,
	// and templateReseed where it shows the addon (sandboxTemplate).
	templateRunDir = "/run/agentplane-template"
	templateReseed = "/run/agentplane-reseed.node"
	// The FIFOs of a template's dir: a frozen process writes one byte to frozenFIFO and then
	// waits for one from thawFIFO.
	frozenFIFO = "frozen"
	thawFIFO   = "thaw"
	// freezeSignal asks a template's Node process to freeze: one no process of the engine
	// listens to and whose default action is to do nothing.
	freezeSignal = syscall.SIGWINCH
	// The environment the hooks read (template.mjs).
	templateDirEnv    = "AGENTPLANE_TEMPLATE_DIR"
	templateReseedEnv = "AGENTPLANE_TEMPLATE_RESEED"
)

//go:embed template.mjs
var templateHooks string

// templateImport is template.mjs as an --import URL.
var templateImport = runtime.NodeImport(templateHooks)

// findReseed is the reseed addon's path: $AGENTPLANE_RESEED, else agentplane-reseed.node
// beside this program's executable; "" when there is none.
func findReseed() string {
	p := os.Getenv(ReseedEnv)
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return ""
		}
		p = filepath.Join(filepath.Dir(exe), ReseedName)
	}
	return resolvedFile(p)
}

// resolvedFile is path with its links resolved (a sandbox is shown the file, not a link to
// what it does not show) when it names a regular file, else "".
func resolvedFile(path string) string {
	p, err := filepath.EvalSymlinks(path)
	if err != nil || !fileExists(p) {
		return ""
	}
	return p
}

// templateEnv is what a template gateway's environment adds to nodeOptions (its NODE_OPTIONS
// otherwise): the hooks and where they find their dir and the addon in the sandbox.
func templateEnv(nodeOptions string) map[string]string {
	opts := "--import=" + templateImport
	if nodeOptions != "" {
		opts = nodeOptions + " " + opts
	}
	return map[string]string{"NODE_OPTIONS": opts, templateDirEnv: templateRunDir, templateReseedEnv: templateReseed}
}

// makeTemplateDir makes dir with its two FIFOs, for the sandbox's uid.
func makeTemplateDir(dir string, uid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{frozenFIFO, thawFIFO} {
		p := filepath.Join(dir, name)
		if err := unix.Mkfifo(p, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := os.Chown(p, uid, uid); err != nil {
			return err
		}
	}
	return os.Chown(dir, uid, uid)
}

// freezeBound is how long a freeze may take: each process gives its worker threads 10 s.
const freezeBound = 20 * time.Second

// freezeNodeTree freezes every Node process with the hooks in the tree under init (template
// dir dir) and returns how many it froze. An error leaves the processes that did freeze
// waiting: the tree is to be ended, not dumped.
func freezeNodeTree(ctx context.Context, init int, dir string) (int, error) {
	acks, err := os.OpenFile(filepath.Join(dir, frozenFIFO), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer acks.Close()
	procs := hookedNodeProcesses(init)
	if len(procs) == 0 {
		return 0, errors.New("no Node process of the template runs its hooks")
	}
	for _, pid := range procs {
		if err := syscall.Kill(pid, freezeSignal); err != nil {
			return 0, fmt.Errorf("process %d: %w", pid, err)
		}
	}
	if _, err := readAcks(ctx, acks, len(procs)); err != nil {
		return 0, err
	}
	return len(procs), nil
}

// readAcks reads n bytes from the non-blocking FIFO f, within freezeBound.
func readAcks(ctx context.Context, f *os.File, n int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, freezeBound)
	defer cancel()
	var got []byte
	buf := make([]byte, n)
	for len(got) < n {
		k, err := syscall.Read(int(f.Fd()), buf[:n-len(got)])
		if k > 0 {
			got = append(got, buf[:k]...)
			continue
		}
		if err != nil && !errors.Is(err, syscall.EAGAIN) {
			return got, err
		}
		// Nothing yet (EAGAIN), or no writer has opened the FIFO (0): poll it.
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("%d of %d processes froze in %s", len(got), n, freezeBound)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return got, nil
}

// hookPlan is what the hooks (template.mjs) of the process whose pid (in its sandbox) is PID
// do: at the template's freeze (freezePlanName), the engine's instance reset's statements SQL
// on its database DB; at a copy's thaw (thawPlanName), the signal that restarts it.
type hookPlan struct {
	PID    int      `json:"pid"`
	DB     string   `json:"db,omitempty"`
	SQL    []string `json:"sql,omitempty"`
	Signal string   `json:"signal,omitempty"`
}

// The plans' files in a template's (or copy's) hooks' dir.
const (
	freezePlanName = "freeze.json"
	thawPlanName   = "thaw.json"
)

// writeHookPlan writes the plan name into the hooks' dir dir.
func writeHookPlan(dir, name string, p hookPlan) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, name), b, 0o644)
}

// nsPID is the pid of the host's process pid in its own PID namespace (NSpid's last field).
func nsPID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "NSpid:" {
			return strconv.Atoi(f[len(f)-1])
		}
	}
	return 0, fmt.Errorf("process %d: no NSpid", pid)
}

// thawNodeTree lets the n frozen processes of a copy restored from a template go on (its
// template dir dir): one byte each.
func thawNodeTree(dir string, n int) error {
	f, err := os.OpenFile(filepath.Join(dir, thawFIFO), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("the copy's processes do not wait to be thawed: %w", err)
	}
	defer f.Close()
	_, err = f.Write(bytes.Repeat([]byte{'t'}, n))
	return err
}

// hookedNodeProcesses are the processes of the tree under init that run Node with the
// template's hooks (their environment names the template dir).
func hookedNodeProcesses(init int) []int {
	tree, _ := treeOf(init)
	var pids []int
	for pid := range tree {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		if err != nil || filepath.Base(exe) != "node" {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+templateDirEnv+"=")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
