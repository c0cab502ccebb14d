#!/usr/bin/env bash
# Installs the independent JavaScript UnixFS importer (pinned by npm/package.json and
# npm/package-lock.json) with npm/cidvectors.mjs into a cache directory and prints it:
#   node "$(internal/adapters/cid/testdata/install.sh)/cidvectors.mjs" FILE...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../../../../hack/npm-cache.sh" cidvectors "$here/npm"
