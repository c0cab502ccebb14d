package kube

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// The commands below run in the gateway container as `sh -c SCRIPT NAME ARGS...`. Every
// caller-supplied value is a positional argument, never part of the script text, so nothing a
// caller sends is parsed by the shell. Path checks resolve symlinks inside the pod (cd -P,
// pwd -P, readlink -f), where the files are.

// Exit codes and stderr markers of the path checks. Both must match to count, so a command
// that happens to exit 111 is not mistaken for a refused path.
const (
	exitInvalidPath   = 111
	exitNotFound      = 112
	markerInvalidPath = "agentplane: invalid path"
	markerNotFound    = "agentplane: not found"
)

const shCommon = `unset CDPATH
bad() { echo "agentplane: invalid path" >&2; exit 111; }
missing() { echo "agentplane: not found" >&2; exit 112; }
inside() { case "$1/" in "$root"/*) return 0;; esac; return 1; }
`

// execScript: $1 workspace, $2 dir, $3 timeout seconds (0: none), $4 number of NAME=VALUE
// pairs that follow, then the command. `timeout` runs the command in its own process group
// and signals the whole group: SIGTERM at the deadline, SIGKILL 5 s later.
const execScript = shCommon + `ws=$1 dir=$2 t=$3 n=$4
shift 4
while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n - 1)); done
cd -P -- "$ws" 2>/dev/null || bad
root=$(pwd -P)
cd -P -- "$dir" 2>/dev/null || bad
inside "$(pwd -P)" || bad
if [ "$t" -gt 0 ] && command -v timeout >/dev/null 2>&1; then
	exec timeout -k 5 "$t" "$@"
fi
exec "$@"
`

// readScript: $1 home, $2 file relative to home. Prints the file.
const readScript = shCommon + `cd -P -- "$1" 2>/dev/null || missing
root=$(pwd -P)
d=$(dirname -- "$2") b=$(basename -- "$2")
cd -P -- "$d" 2>/dev/null || missing
inside "$(pwd -P)" || bad
if [ -L "$b" ]; then
	t=$(readlink -f -- "$b") || missing
	inside "$t" || bad
fi
[ -e "$b" ] || missing
[ -f "$b" ] || bad
exec cat -- "$b"
`

// writeScript: $1 home, $2 file relative to home; the content on stdin. Parent directories
// are created one at a time, each checked after resolving symlinks; the content goes to a
// temporary file in the same directory that is renamed over the target (a symlink at the
// target is replaced, not followed).
const writeScript = shCommon + `cd -P -- "$1" 2>/dev/null || bad
root=$(pwd -P)
d=$(dirname -- "$2") b=$(basename -- "$2")
set -f
IFS=/
for c in $d; do
	if [ -z "$c" ] || [ "$c" = . ]; then continue; fi
	[ -d "$c" ] || mkdir -- "$c" 2>/dev/null || bad
	cd -P -- "$c" 2>/dev/null || bad
	inside "$(pwd -P)" || bad
done
unset IFS
set +f
if [ -d "$b" ] && [ ! -L "$b" ]; then bad; fi
mode=644
if [ -f "$b" ] && [ ! -L "$b" ]; then mode=$(stat -c %a -- "$b" 2>/dev/null || echo 644); fi
tmp=$(mktemp "./.$b.XXXXXX") || exit 1
if cat >"$tmp" && chmod "$mode" "$tmp" && mv -f -- "$tmp" "$b"; then exit 0; fi
rm -f -- "$tmp"
exit 1
`

// archiveScript: $1 workspace. A deterministic tar of the workspace on stdout.
const archiveScript = shCommon + `cd -P -- "$1" 2>/dev/null || missing
exec tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$(pwd -P)" -cf - .
`

// restoreScript: $1 workspace; a tar on stdin. Extracts into a fresh directory next to the
// workspace and swaps it in only when the whole archive extracted.
const restoreScript = shCommon + `parent=$(dirname -- "$1") name=$(basename -- "$1")
mkdir -p -- "$parent" && cd -P -- "$parent" || exit 1
new=".$name.restore.$$" old=".$name.old.$$"
rm -rf -- ".$name.restore."* ".$name.old."*
mkdir -- "$new" || exit 1
if ! tar -xf - -C "$new" --no-same-owner; then rm -rf -- "$new"; exit 1; fi
if [ -e "$name" ] || [ -L "$name" ]; then
	mv -- "$name" "$old" || { rm -rf -- "$new"; exit 1; }
fi
if ! mv -- "$new" "$name"; then mv -- "$old" "$name"; rm -rf -- "$new"; exit 1; fi
rm -rf -- "$old"
`

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// execCommand is the argv that runs argv in dir (relative to workspace) with env added and the
// timeout enforced in the pod.
func execCommand(workspace, dir string, timeout time.Duration, env map[string]string, argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: empty command", runtime.ErrExec)
	}
	if dir == "" {
		dir = "."
	}
	if strings.ContainsRune(dir, 0) {
		return nil, runtime.ErrInvalidPath
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("%w: invalid environment variable name %q", runtime.ErrExec, k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	secs := int64(0)
	if timeout > 0 {
		secs = int64(math.Ceil(timeout.Seconds()))
	}
	cmd := []string{"sh", "-c", execScript, "agentplane-exec", workspace, dir,
		strconv.FormatInt(secs, 10), strconv.Itoa(len(keys))}
	for _, k := range keys {
		cmd = append(cmd, k+"="+env[k])
	}
	return append(cmd, argv...), nil
}

// checkRel accepts a path relative to the home that stays inside it lexically (symlinks are
// checked in the pod) and returns it cleaned.
func checkRel(p string) (string, error) {
	c := path.Clean(p)
	if p == "" || path.IsAbs(p) || c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(p, 0) {
		return "", runtime.ErrInvalidPath
	}
	return c, nil
}

func readCommand(home, rel string) []string {
	return []string{"sh", "-c", readScript, "agentplane-read", home, rel}
}

func writeCommand(home, rel string) []string {
	return []string{"sh", "-c", writeScript, "agentplane-write", home, rel}
}

func archiveCommand(workspace string) []string {
	return []string{"sh", "-c", archiveScript, "agentplane-archive", workspace}
}

func restoreCommand(workspace string) []string {
	return []string{"sh", "-c", restoreScript, "agentplane-restore", workspace}
}

// pathError maps the path checks' exit code and stderr marker to runtime errors (nil: the
// exit was the command's own).
func pathError(code int, stderr []byte) error {
	s := strings.TrimSpace(string(stderr))
	switch {
	case code == exitInvalidPath && s == markerInvalidPath:
		return runtime.ErrInvalidPath
	case code == exitNotFound && s == markerNotFound:
		return runtime.ErrNotFound
	}
	return nil
}
