#!/usr/bin/env bash
# Builds CRIU (checkpoint/restore in userspace) for the local runtime's checkpointed suspend
# (issue 38 item 4) from Debian's source tarball of criu 4.1.1 (trixie's package), with the
# patches in hack/criu/patches, and links the `criu` binary into the directory given as $1
# (default bin). Bookworm's criu 3.17.1 fails `criu check` on kernels 6.x newer than it
# ("vdso: Unexpected rt vDSO area bounds"); trixie's binary package needs libc6 >= 2.38, so it
# is built here against bookworm's libraries instead.
#
# Build dependencies (Debian packages): gcc make pkgconf libbsd-dev libnet1-dev libnftables-dev
# libnl-3-dev libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler protobuf-compiler
# libgnutls28-dev uuid-dev python3-protobuf, and libcap-dev: when its header is missing, the
# package is unpacked into the build dir (installing it would upgrade the system's libcap2).
#
# Cached under ${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/criu/<version>-<key>, keyed by the
# tarball's digest, the patches and the compiler. `--print-dir` prints the cache dir.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.1.1
tarball=criu_$version.orig.tar.xz
sha256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
url=http://deb.debian.org/debian/pool/main/c/criu/$tarball
. hack/lib/cache.sh
cache="$cache_root/criu/$version-$( { echo "$sha256"; cat hack/criu/patches/*.patch; gcc --version | head -1; } | cache_key)"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$cache"
  exit 0
fi
out="${1:-bin}"
log() { echo "[criu] $*" >&2; }

if ! all_cached "$cache" criu; then
  missing=()
  for h in protobuf-c/protobuf-c.h libnl3/netlink/netlink.h libnet.h bsd/string.h nftables/libnftables.h google/protobuf/descriptor.proto; do
    [[ -e /usr/include/$h ]] || missing+=("$h")
  done
  for t in protoc protoc-c gcc make pkg-config; do
    command -v "$t" >/dev/null || missing+=("$t")
  done
  if ((${#missing[@]})); then
    log "missing build dependencies (${missing[*]}): apt-get install --no-install-recommends libbsd-dev libnet1-dev libnftables-dev libnl-3-dev libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler protobuf-compiler"
    exit 1
  fi
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$SECONDS
  log "fetching $url"
  if command -v curl >/dev/null; then
    curl -fsSL -o "$tmp/$tarball" "$url"
  else
    python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$url" "$tmp/$tarball"
  fi
  echo "$sha256  $tmp/$tarball" | sha256sum -c --quiet -
  tar -xf "$tmp/$tarball" -C "$tmp"
  src="$tmp/criu-$version"
  for p in hack/criu/patches/*.patch; do
    log "applying $(basename "$p")"
    patch --quiet --forward -d "$src" -p1 < "$p"
  done
  if [[ ! -e /usr/include/sys/capability.h ]]; then
    log "unpacking libcap-dev into the build dir"
    (cd "$tmp" && { apt-get download libcap-dev >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get download libcap-dev >/dev/null; }; } && dpkg -x libcap-dev_*.deb capdev)
    libdir=$tmp/capdev/usr/lib/x86_64-linux-gnu
    ln -sfn /usr/lib/x86_64-linux-gnu/libcap.so.2 "$libdir/libcap.so"
    # Through the environment, not make variables: CRIU's Makefiles append to LDFLAGS and
    # CFLAGS for its position-independent parasite code, which a command-line value overrides.
    export C_INCLUDE_PATH="$tmp/capdev/usr/include" LIBRARY_PATH="$libdir"
  fi
  log "building criu $version (about a minute on 2 cores)"
  make -C "$src" -j"$(nproc)" criu >"$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log" >&2; exit 1; }
  mv "$src/criu/criu" "$cache/criu"
  log "built in $((SECONDS - start))s into $cache"
fi

link_cached "$cache" "$out" criu
