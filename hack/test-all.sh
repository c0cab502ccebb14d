#!/usr/bin/env bash
# make test's run of every tier at once (the Makefile installs what they need first).
#
# The node tier (hack/testtiers node: the packages that start a local cluster on this machine's
# kubelet and containerd, one cluster at a time) is most of a run's length and waits on
# containers more than it computes, so it runs in a `go test` of its own from the start (its
# packages side by side: one builds while the other holds the machine's cluster lock). The
# other tiers share two package slots beside it, the slowest packages first. The real node's
# binaries are make test-prereqs' (hack/test-prereqs.sh). (A lower CPU
# priority for them does not help: with the kernel's autogroups, nice weighs only within a
# session, and gateways and pods run in sessions of their own.)
# Environment: GO, TEST_TIMEOUT, GO_TEST_FLAGS.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
timeout=${TEST_TIMEOUT:-45m}
read -r -a flags <<<"${GO_TEST_FLAGS:-}"
node=$("$go" run ./hack/testtiers node) || exit 1
# Slowest first: go test starts packages in the order they are named.
slowest=(./test/e2e/devmode ./test/stress ./internal/adapters/runtime/local ./controllers ./apiserver)
rest=$("$go" list ./... | grep -vxF -f <(printf '%s\n' $node)) || exit 1

# The node tier runs in a process group of its own (set -m) that an interrupt is passed on to
# whole.
set -m
# shellcheck disable=SC2086 # package lists split on purpose
"$go" test -p 2 -timeout "$timeout" "${flags[@]}" $node &
node_pid=$!
set +m
trap 'kill -INT -- -$node_pid 2>/dev/null; wait $node_pid' INT TERM
# shellcheck disable=SC2086
"$go" test -p 2 -timeout "$timeout" "${flags[@]}" "${slowest[@]}" $rest
rest_rc=$?
wait $node_pid
node_rc=$?
if [ $rest_rc -ne 0 ] || [ $node_rc -ne 0 ]; then
	echo "make test: FAIL (node tier exit $node_rc, other tiers exit $rest_rc)" >&2
	exit 1
fi
