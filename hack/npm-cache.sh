#!/usr/bin/env bash
# Installs the npm packages pinned by SRC/package.json + SRC/package-lock.json into a cache
# directory outside the repository, copies SRC/*.mjs into a directory below it, and prints
# that directory.
#
#   hack/npm-cache.sh NAME SRC        e.g. hack/npm-cache.sh pinata-sdk test/sdk
#
# Idempotent: the install is keyed by NAME and the hash of the lock file, and a finished
# install is marked with .installed. The scripts' directory (scripts/<hash>) is keyed by their
# names and contents: two checkouts testing at once (a clone in CI beside a working copy) never
# run each other's scripts, as they did when every run copied its scripts over the one set.
# Scripts run from that directory find the packages in the install's node_modules (Node looks
# in the parent directories). npm output goes to stderr.
set -euo pipefail
name="${1:?usage: npm-cache.sh NAME SRC}"
src="$(cd "${2:?usage: npm-cache.sh NAME SRC}" && pwd)"
command -v npm >/dev/null 2>&1 || { echo "npm-cache.sh: npm not found on PATH" >&2; exit 1; }

hash="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-12)"
dir="${AGENTPLANE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentplane}/npm/$name-$hash"

# scripts copies SRC's scripts into their own directory under the install (made once, whole:
# a concurrent run keeps whichever landed) and prints it.
scripts() {
  local sum out tmp f
  sum="$(for f in "$src"/*.mjs; do [[ -e "$f" ]] && { basename "$f"; cat "$f"; }; done | sha256sum | cut -c1-12)"
  out="$dir/scripts/$sum"
  if [[ ! -d "$out" ]]; then
    mkdir -p "$dir/scripts"
    tmp="$(mktemp -d "$dir/scripts/.tmp.XXXXXX")"
    for f in "$src"/*.mjs; do [[ -e "$f" ]] && cp "$f" "$tmp/"; done
    mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
  fi
  echo "$out"
}

if [[ ! -f "$dir/.installed" ]]; then
  mkdir -p "$(dirname "$dir")"
  tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  cp "$src/package.json" "$src/package-lock.json" "$tmp/"
  echo "[npm] installing $name from the npm registry into $dir" >&2
  (cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
  touch "$tmp/.installed"
  # A concurrent run may have finished first; keep whichever landed.
  if ! mv -T "$tmp" "$dir" 2>/dev/null; then
    [[ -f "$dir/.installed" ]] || { echo "npm-cache.sh: could not move the install into $dir" >&2; exit 1; }
  fi
fi
scripts
