#!/bin/bash
# Entry point of `make bench WORKLOAD=NAME`.
#
# A workload is a fio job set in bench/workloads/NAME/. Unknown names are
# refused with the list of known ones.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
workload=${1:-}

available() {
	local d
	for d in "$top"/bench/workloads/*/; do
		[ -d "$d" ] && basename "$d"
	done
	return 0
}

if [ -z "$workload" ] || [ "$workload" = list ] || [ ! -d "$top/bench/workloads/$workload" ]; then
	[ -n "$workload" ] && [ "$workload" != list ] &&
		echo "bench: error: unknown workload '$workload'" >&2
	list=$(available | paste -sd" " -)
	echo "bench: available workloads: ${list:-none yet}" >&2
	[ -z "$list" ] && echo "bench: the benchmark runner and its workloads (fragmented, sequential, shared, scaling) land with issue #5; nothing is measured yet." >&2
	echo "usage: make bench WORKLOAD=<name>" >&2
	[ "$workload" = list ] && exit 0
	exit 2
fi

echo "bench: workload '$workload' exists, but the runner that measures it lands with issue #5." >&2
exit 2
