#!/usr/bin/env bash
# Installs the independent JavaScript UnixFS importer (ipfs-unixfs-importer and
# friends, pinned by npm/package.json + npm/package-lock.json) into a cache
# directory outside the repository and prints that directory on stdout.
#
# Idempotent: the directory name is derived from the pinned versions and the
# lock file hash, and a completed install is marked with .installed, so a
# second run only prints the path. Everything npm prints goes to stderr.
#
# Used by internal/cid tests (TestAgainstNodeImporter); run cidvectors.mjs
# with NODE_PATH unset, from anywhere:
#   node "$(internal/cid/testdata/install.sh)/cidvectors.mjs" FILE...
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/npm"

command -v npm >/dev/null 2>&1 || { echo "install.sh: npm not found on PATH" >&2; exit 1; }
command -v node >/dev/null 2>&1 || { echo "install.sh: node not found on PATH" >&2; exit 1; }

ver() { # version of a direct dependency pinned in package.json
	node -e 'const p=require(process.argv[1]);process.stdout.write(p.dependencies[process.argv[2]])' \
		"$src/package.json" "$1"
}
lockhash="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-12)"
name="cidvectors-importer$(ver ipfs-unixfs-importer)-blockstore$(ver blockstore-core)-mf$(ver multiformats)-$lockhash"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/npm/$name"

# The script is not part of the hash: refresh it on every run (cheap, atomic).
refresh_script() {
	cp "$here/cidvectors.mjs" "$dir/.cidvectors.mjs.$$"
	mv -f "$dir/.cidvectors.mjs.$$" "$dir/cidvectors.mjs"
}

if [[ -f "$dir/.installed" ]]; then
	refresh_script
	echo "$dir"
	exit 0
fi

mkdir -p "$(dirname "$dir")"
tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$src/package.json" "$src/package-lock.json" "$tmp/"
(cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
touch "$tmp/.installed"
# Another run may have finished first; keep whichever landed (the trap
# removes ours then).
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
	[[ -f "$dir/.installed" ]] || { echo "install.sh: could not move install into $dir" >&2; exit 1; }
fi
refresh_script
echo "$dir"
