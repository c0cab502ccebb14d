#!/usr/bin/env bash
# Builds Prometheus's promtool from the Go module pinned in hack/tools/promtool (never a
# downloaded release) and prints the path of the binary on stdout; `make promtool` links it as
# bin/promtool, which the alert rules' tests (test/monitoring) run. Cached under the user cache,
# keyed by the pins, the Go version and the flags (go_tool in hack/lib/cache.sh). Without the
# service discoveries (remove_all_sd: the cloud SDKs are most of its build), which rule tests
# never use.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib/cache.sh
mod=hack/tools/promtool
version=$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" { print $3 }' "$mod/go.mod")
go_tool promtool "$version" "$mod" github.com/prometheus/prometheus/cmd/promtool -tags remove_all_sd
