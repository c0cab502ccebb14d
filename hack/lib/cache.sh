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
