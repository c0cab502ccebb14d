#!/usr/bin/env bash
# make test's run of every tier at once (the Makefile installs what they need first).
#
# The node tier (hack/testtiers node: the packages that start a local cluster on this machine's
# kubelet and containerd, one cluster at a time) is most of a run's length and waits on
# containers more than it computes, so it runs in a `go test` of its own from the start (its
# packages side by side: one builds while the other holds the machine's cluster lock). The
# other tiers share two package slots beside it, the slowest packages first, in one CPU
# cgroup of their own: the kernel weighs each session (autogroup) and each cgroup alike, and
# those tiers' gateways run in sessions of their own, so without the group they would outweigh
# the node tier many times over (nice cannot help: it weighs only within a session). Without a
# writable cgroup hierarchy they run as they are.
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

# shellcheck disable=SC2086 # package lists split on purpose
"$go" test -p 2 -timeout "$timeout" "${flags[@]}" $node &
node_pid=$!
trap 'kill -INT $node_pid 2>/dev/null; wait $node_pid' INT TERM
# others_cgroup makes a cpu cgroup for the other tiers (cgroup v1 or v2) and prints its dir.
others_cgroup() {
	local dir
	if [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
		dir=/sys/fs/cgroup/cpu/agentplane-test-$$
	elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
		dir=/sys/fs/cgroup/agentplane-test-$$
	else
		return 1
	fi
	mkdir "$dir" 2>/dev/null && echo "$dir"
}
group=$(others_cgroup) || group=""
# shellcheck disable=SC2086,SC2016
if [ -n "$group" ]; then
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$group" \
		"$go" test -p 2 -timeout "$timeout" "${flags[@]}" "${slowest[@]}" $rest
else
	"$go" test -p 2 -timeout "$timeout" "${flags[@]}" "${slowest[@]}" $rest
fi
rest_rc=$?
if [ -n "$group" ] && ! rmdir "$group"; then
	echo "make test: processes the other tiers started are still running:" >&2
	cat "$group/cgroup.procs" >&2
	rest_rc=1
fi
wait $node_pid
node_rc=$?
if [ $rest_rc -ne 0 ] || [ $node_rc -ne 0 ]; then
	echo "make test: FAIL (node tier exit $node_rc, other tiers exit $rest_rc)" >&2
	exit 1
fi
