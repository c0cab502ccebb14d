#!/usr/bin/env bash
# make test's run of every tier (the Makefile installs what they need first), in two lanes.
#
# The heavy lane runs, one package at a time, the packages that boot real gateways or a real
# node end to end: devmode's end-to-end tests and the real node (hack/testtiers engine and
# node). Side by side on a 2-core machine two of them starved each other (load average
# 15-20): a gateway's boot took 2 minutes instead of 20 seconds, the engine's own 5-second startup
# bounds failed (its state lease heartbeat, a gateway that exits 1) and a rollout halted on
# gateways that never came up. One at a time, each package gets the machine it was written for.
#
# The light lane runs the checks (make verify-generated vet lint) and then everything else (the
# envtest and unit tiers, which compute rather than boot) beside it, one package at a time too,
# the slowest first, so it leaves the heavy lane a core; then the example modules, then the rest
# of the engine tier: the local runtime's package and the engine's own. The local runtime's
# sandboxes and checkpoints ran in the heavy lane after devmode, while the light lane had ended
# and the real node waited for both (2026-12-03: light lane done at about 1,000 s, the heavy lane
# at 2,140 s; the real node's 860 s at 40-65% of the machine). At the light lane's end it runs
# beside the real node's first minutes instead, as it ran beside the light lane's envtest
# packages before.
# The local cluster's package (a minute: one cluster's start, pods and stop) runs in the light
# lane, not on the heavy lane's path (2026-12-04), and opens it, right after the checks: it
# holds the machine's cluster lock (localcluster.Lock) as the real node does, so whichever
# comes second waits for the other, and it must come before the real node. It used to follow
# the envtest packages. On a fresh machine (2026-12-06) the checks took 11.6 minutes
# (golangci-lint and go vet compiling), devmode ended before the light lane reached the
# cluster, and the cluster's test waited 7 minutes for the real node's deploy test, which made
# the light lane the run's critical path (it ended 7.3 minutes after the heavy lane). At the
# lane's head it runs beside devmode's first test: even there the checks ended well before
# devmode did (11.6 against 21.7 minutes).
# Devmode's agents (their own network namespaces and cgroups) are not the cluster's: its leak
# check counts only the cluster's kinds (cni- namespaces, its cgroup root, its chains).
# Neither a second heavy lane nor a light lane of low CPU weight beside this one shortened the
# run (2026-12-01): two heavy packages side by side each took three times as long, and the
# envtest packages, starved at a tenth of the CPU weight, missed their kube-apiserver's
# start-up bound.
# The example modules (EXAMPLE_MODULES: a consumer of the public test kit) end the light lane:
# they ran after the lanes, on the critical path, and with cgo on (outside this script) they
# shared no compiled package with the tests (up to a minute of a fresh machine's run,
# 2026-12-03; 19 s beside the tests' cache).
# $1 is the make command (the Makefile passes $(MAKE)). Environment: GO, TEST_TIMEOUT,
# GO_TEST_FLAGS, EXAMPLE_MODULES, and the Makefile's TEST_ENV (CGO_ENABLED=0), which the checks
# and every test build here inherit.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${1:-make}
go=${GO:-go}
timeout=${TEST_TIMEOUT:-45m}
read -r -a flags <<<"${GO_TEST_FLAGS:-}"
engine=$("$go" run ./hack/testtiers engine) || exit 1
node=$("$go" run ./hack/testtiers node) || exit 1
# go test starts packages in the order they are named. The real node goes last: its gateways
# boot under gVisor, the slowest boots of the suite and the first to miss the engine's own
# startup bounds when the machine is busy; the light lane is past its envtest packages by then.
heavy=(./test/e2e/devmode ./test/e2e/realnode)
light_first=(./test/stress ./facade ./controllers)
light_cluster=(./internal/devtools/localcluster)
light=$("$go" list ./... | grep -vxF -f <(printf '%s\n' $engine $node)) || exit 1
# The rest of the engine and node tiers end the light lane, the local runtime's package first.
light_last=$({ "$go" list ./internal/adapters/runtime/local && printf '%s\n' $engine $node; } |
	grep -vxF -f <("$go" list "${heavy[@]}" "${light_cluster[@]}") | awk '!seen[$0]++') || exit 1

# The example modules' tests, at the light lane's end (their own packages compiled there; the
# ones they share with this module come from the cache).
examples() {
	local m
	for m in ${EXAMPLE_MODULES:-}; do
		echo "$m:"
		(cd "$m" && "$go" test -timeout "$timeout" "${flags[@]}" ./...) || return 1
	done
}

# Every package and test package of the module is compiled once, with the machine's whole
# parallelism, before the lanes start. The lanes run `go test -p 1`, which also compiles one
# package at a time, and on a cold build cache both lanes and go vet compiled the same
# dependency graph side by side (two go processes compiling k8s.io/client-go at once, seen
# live on 2026-12-02): devmode's test binary took 12 minutes to build before its first test.
# `go list -export` compiles as go test does (the same cache entries) without linking or
# running anything; on a warm cache it only checks. A compile error is left to the lanes,
# which report it in their package's place.
compile_start=$SECONDS
"$go" list -e -export -deps -test ./... >/dev/null
echo "[test] packages compiled in $((SECONDS - compile_start))s" >&2

# The heavy lane runs in a process group of its own (set -m) that an interrupt is passed on to
# whole.
set -m
# shellcheck disable=SC2086 # package lists split on purpose
"$go" test -p 1 -timeout "$timeout" "${flags[@]}" "${heavy[@]}" &
heavy_pid=$!
set +m
trap 'kill -INT -- -$heavy_pid 2>/dev/null; wait $heavy_pid' INT TERM
# shellcheck disable=SC2086
"$make" --no-print-directory verify-generated vet lint &&
	"$go" test -p 1 -timeout "$timeout" "${flags[@]}" "${light_cluster[@]}" "${light_first[@]}" $light &&
	examples &&
	"$go" test -p 1 -timeout "$timeout" "${flags[@]}" $light_last
light_rc=$?
wait $heavy_pid
heavy_rc=$?
if [ $light_rc -ne 0 ] || [ $heavy_rc -ne 0 ]; then
	echo "make test: FAIL (heavy lane exit $heavy_rc, light lane exit $light_rc)" >&2
	exit 1
fi
