# Sourced by the build scripts that keep what they build under the user cache dir, keyed by
# their inputs, and link it into a directory of the checkout (bin/k8s).

cache_root="${AGENTPLANE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentplane}"

# cache_key prints a short hash of its input (the pinned module graph, the toolchain versions).
cache_key() { sha256sum | cut -c1-16; }

# all_cached DIR FILE... succeeds when every FILE is in DIR and not empty.
all_cached() {
  local dir=$1 f
  shift
  for f in "$@"; do [[ -s "$dir/$f" ]] || return 1; done
}

# link_cached DIR OUT FILE... links each FILE of DIR into OUT (unless it already is).
link_cached() {
  local dir=$1 out=$2 f
  shift 2
  mkdir -p "$out"
  for f in "$@"; do
    if [[ "$(readlink -f "$out/$f" 2>/dev/null)" != "$dir/$f" ]]; then
      ln -sfn "$dir/$f" "$out/$f"
    fi
  done
}

# go_tool NAME VERSION MODDIR PKG [GO BUILD FLAGS...] prints the path of NAME built from the Go
# package PKG of the module pinned in MODDIR (never a downloaded release), kept under
# $cache_root/tools/NAME-VERSION-<key>/NAME where <key> covers MODDIR's go.mod and go.sum, the
# Go version and the build's flags: built once per pin and toolchain. Progress goes to stderr.
# Built as make test's packages and the control plane are (-trimpath, cgo off), so the packages
# their modules share at one version (the Kubernetes client libraries, which the tests of
# internal/devtools/controlplane keep at the control plane's) are compiled once.
go_tool() {
  local name=$1 version=$2 mod=$3 pkg=$4 key dir bin tmp start
  shift 4
  key=$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; echo "CGO_ENABLED=0 -trimpath $*"; } | cache_key)
  dir="$cache_root/tools/$name-$version-$key"
  bin="$dir/$name"
  if [[ ! -x "$bin" ]]; then
    mkdir -p "$dir"
    tmp=$(mktemp "$dir/$name.tmp.XXXXXX")
    start=$SECONDS
    echo "[$name] building $name $version from $mod (a few minutes on 2 cores the first time)" >&2
    if ! (cd "$mod" && CGO_ENABLED=0 go build -trimpath "$@" -o "$tmp" "$pkg"); then
      rm -f "$tmp"
      return 1
    fi
    chmod +x "$tmp"
    mv -f "$tmp" "$bin"
    echo "[$name] built in $((SECONDS - start))s: $bin" >&2
  fi
  echo "$bin"
}
