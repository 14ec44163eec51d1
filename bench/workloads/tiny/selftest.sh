# shellcheck shell=bash disable=SC2154 # top: set by the test that sources this
# The tiny workload's own checks. Sourced by tests/host/bench-workloads.sh
# (which defines top, ok, bad, same and in_workload).
same "tiny: 1024 blocks by default, its one parameter recorded" \
	"$(in_workload tiny sh -c 'echo $FILE_SIZE') $(in_workload tiny bench_params)" "4096k TINY_BLOCKS=1024"
same "tiny: TINY_BLOCKS=4096 gives a 16 MiB file, 90% of it promised as extents" \
	"$(TINY_BLOCKS=4096 in_workload tiny sh -c 'echo $FILE_SIZE') $(TINY_BLOCKS=4096 in_workload tiny wl_checks /m)" \
	"16384k frag /m/bench/frag 3686 - 0"
