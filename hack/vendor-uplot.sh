#!/usr/bin/env bash
# Vendors uPlot (MIT, https://github.com/leeoniya/uPlot), the console's charting library, from
# its npm package into the embedded console (internal/console/ui/vendor/uplot/): the pinned
# version's tarball, checked against the pinned integrity, unpacked; its ES module, its
# stylesheet and its licence are copied, and MANIFEST records the version, the integrity and
# each copied file's sha256 (internal/console's test checks the files against it).
#
#   hack/vendor-uplot.sh          re-vendor the pinned version (run after changing the pin)
set -euo pipefail
VERSION=1.6.32
INTEGRITY=sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw==

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/internal/console/ui/vendor/uplot"
command -v npm >/dev/null 2>&1 || { echo "vendor-uplot.sh: npm not found on PATH" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "uplot@$VERSION" >/dev/null)
tgz="$tmp/uplot-$VERSION.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [[ "$got" != "$INTEGRITY" ]]; then
  echo "vendor-uplot.sh: uplot@$VERSION integrity mismatch: got $got, want $INTEGRITY" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$tmp"
mkdir -p "$dest"
cp "$tmp/package/dist/uPlot.esm.js" "$dest/uPlot.esm.js"
cp "$tmp/package/dist/uPlot.min.css" "$dest/uPlot.min.css"
cp "$tmp/package/LICENSE" "$dest/LICENSE"
{
  echo "uplot $VERSION $INTEGRITY"
  (cd "$dest" && sha256sum LICENSE uPlot.esm.js uPlot.min.css)
} > "$dest/MANIFEST"
echo "vendored uplot@$VERSION into ${dest#"$root"/}" >&2
