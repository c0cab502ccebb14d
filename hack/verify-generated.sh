#!/usr/bin/env bash
# Regenerates deepcopy code, CRDs, RBAC, the REST API docs (OpenAPI document, README route
# table), the Go client generated from that document (pkg/client) and the Helm chart
# (dist/chart, from config/), and fails when the result
# differs from the tree: generated files must be committed as the generators make them.
set -euo pipefail
cd "$(dirname "$0")/.."
# agentplane envtest-assets embeds a copy of the control plane's pins.
for f in go.mod go.sum; do
  if ! cmp -s "hack/tools/controlplane/$f" "internal/devtools/controlplane/pins/$f.txt"; then
    echo "internal/devtools/controlplane/pins/$f.txt differs from hack/tools/controlplane/$f; copy it:" >&2
    echo "  cp hack/tools/controlplane/$f internal/devtools/controlplane/pins/$f.txt" >&2
    exit 1
  fi
done
files() {
  {
    find api config/crd/bases config/rbac -type f \( -name 'zz_generated*.go' -o -name '*.yaml' \) 2>/dev/null
    find dist/chart -type f 2>/dev/null
    ls docs/openapi.json facade/openapi/openapi.json README.md pkg/client/client.gen.go 2>/dev/null
  } | sort
}
before=$(files | xargs -r sha256sum)
make -s generate manifests docs client chart >/dev/null
after=$(files | xargs -r sha256sum)
if [[ "$before" != "$after" ]]; then
  echo "generated files are stale; run 'make generate manifests docs client chart' and commit the result:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
echo "generated files are up to date"
