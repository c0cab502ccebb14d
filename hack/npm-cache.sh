#!/usr/bin/env bash
# Installs the npm packages pinned by SRC/package.json + SRC/package-lock.json into a cache
# directory outside the repository, copies SRC/*.mjs next to them, and prints that directory.
#
#   hack/npm-cache.sh NAME SRC        e.g. hack/npm-cache.sh pinata-sdk test/sdk
#
# Idempotent: the directory is keyed by NAME and the hash of the lock file, and a finished
# install is marked with .installed, so later runs only refresh the scripts and print the path.
# Scripts run from that directory find the packages in its node_modules. npm output goes to
# stderr.
set -euo pipefail
name="${1:?usage: npm-cache.sh NAME SRC}"
src="$(cd "${2:?usage: npm-cache.sh NAME SRC}" && pwd)"
command -v npm >/dev/null 2>&1 || { echo "npm-cache.sh: npm not found on PATH" >&2; exit 1; }

hash="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-12)"
dir="${AGENTPLANE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentplane}/npm/$name-$hash"

refresh_scripts() {
  for f in "$src"/*.mjs; do
    [[ -e "$f" ]] || continue
    cp "$f" "$dir/.$(basename "$f").$$"
    mv -f "$dir/.$(basename "$f").$$" "$dir/$(basename "$f")"
  done
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
refresh_scripts
echo "$dir"
