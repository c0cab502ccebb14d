#!/usr/bin/env bash
# Installs Debian's chromium package when `chromium` is not on PATH: the web console's browser
# tests (test/browser) drive it with playwright-core. Installing needs root; without it the
# script says so and fails, since those tests run in `make test` and are not skipped.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "[chromium] the browser tests need Debian's chromium: run 'sudo apt-get install chromium' (or this script as root)" >&2
  exit 1
fi
echo "[chromium] installing chromium from Debian's packages (once; a few minutes)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 ||
  { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null; }
command -v chromium >/dev/null 2>&1 || { echo "[chromium] chromium is still not on PATH after the install" >&2; exit 1; }
