# shellcheck shell=bash
# Benchmark arms as data: one file per arm, bench/arms/<arm>.conf (KEY=value
# lines, no shell expansion; also read by reports/lab/runmodel.py):
#   ORDER                 display and run order
#   DESCRIPTION           what the arm is
#   FS, MKFS              filesystem type and mkfs command (the device is appended)
#   MOUNT_OPTS            mount options
#   MOUNT_OPTS_ONLY_WITH  a file: MOUNT_OPTS only if the kernel has it
#   ENCRYPTED             1: an fscrypt v2 policy on the bench directory
#   KEY_MODE              the key mode the kernel must report (per-extent:
#                         key groups, per-extent-key: one key per extent,
#                         per-inode, none; see kernel_key_mode in
#                         bench/guest/lib.sh); the guest fails the run otherwise
#   (a MOUNT_OPTS the kernel refuses skips the arm, with the mount's error)
#   REQUIRES, UNSUPPORTED a file the kernel must have, and the skip reason if not
#   TUNING                shell command after mounting (@DEV@: the device name)
#   REFERENCE, COMPARISON the reference arm of this one and what A/B tells
#   COMPARISON_ORDER      the order of the comparisons in the report (1: main)
#   DEFAULT               0: run only when named in ARMS or in the
#                         workload's WORKLOAD_ARMS (lab-only prototypes, and
#                         arms of one workload: the compressed ones of
#                         compressible); every other arm is in DEFAULT_ARMS,
#                         what a run without ARMS runs unless the workload
#                         names its own arms
# Sourced by bench/guest/run (in the guest: /job/bench/arms.sh with
# /job/bench/arms/) and bench/run-bench.sh (arm names only). ARM_FEATURE_ROOT
# prefixes the feature files (tests/host/bench-workloads.sh).
arms_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/arms

arm_get() { # arm KEY: the value, quotes removed ("" if unset)
	sed -n "s/^$2=//p" "$arms_dir/$1.conf" 2>/dev/null | head -n 1 | sed 's/^"\(.*\)"$/\1/'
}

ALL_ARMS=$(for f in "$arms_dir"/*.conf; do
	n=$(basename "$f" .conf)
	echo "$(arm_get "$n" ORDER) $n"
done | sort -n | cut -d' ' -f2 | xargs)

# shellcheck disable=SC2034 # read by bench/run-bench.sh, which sources this
DEFAULT_ARMS=$(for n in $ALL_ARMS; do
	[ "$(arm_get "$n" DEFAULT)" = 0 ] || echo "$n"
done | xargs)

valid_arm() {
	case " $ALL_ARMS " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

arm_fs() { arm_get "$1" FS; }
arm_mkfs() { arm_get "$1" MKFS; }
arm_key_mode() { arm_get "$1" KEY_MODE; }
arm_encrypted() { [ "$(arm_get "$1" ENCRYPTED)" = 1 ]; }

arm_mount_opts() {
	local only
	only=$(arm_get "$1" MOUNT_OPTS_ONLY_WITH)
	if [ -n "$only" ] && [ ! -e "${ARM_FEATURE_ROOT:-}$only" ]; then
		echo ""
	else
		arm_get "$1" MOUNT_OPTS
	fi
}

# Prints why this kernel cannot run the arm, and fails if it can.
arm_unsupported() {
	local req
	req=$(arm_get "$1" REQUIRES)
	[ -z "$req" ] && return 1
	[ -e "${ARM_FEATURE_ROOT:-}$req" ] && return 1
	arm_get "$1" UNSUPPORTED
	return 0
}

arm_tuning() { # arm [dev]
	local t
	t=$(arm_get "$1" TUNING)
	echo "${t//@DEV@/${2:-<dev>}}"
}
