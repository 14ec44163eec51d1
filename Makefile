# fscrypt per-extent keys on btrfs: kernel series and benchmarking lab.
# `make help` lists the targets. Every target installs the Debian packages it
# needs (apt-get) when they are missing.

SHELL := /bin/bash
TOP := $(CURDIR)
BUILD := $(TOP)/build
FLAVOR ?= debug
WORKLOAD ?=
# The linux-source the series applies to: 6.12, the only one since the move
# from 6.1 (issue #23). A build's files carry it in their names
# (build/linux-6.12, build/obj-6.12-debug, build/bzImage-6.12-debug).
BASE ?= 6.12
export BASE
TAG := -$(BASE)
KERNEL_TREE := $(BUILD)/linux$(TAG)
# The kernel patches: those of every series patches/series lists.
SERIES_PATCHES = $(foreach d,$(shell grep -v '^\#' patches/series 2>/dev/null),$(wildcard patches/$(d)/*.patch))
export ACCEL
# The history store of make bench / bench-history (reports/lab/history.py).
ifdef HISTORY_DIR
export LAB_HISTORY_DIR := $(abspath $(HISTORY_DIR))
endif

# Debian's python3, where python3-matplotlib/-scipy/-ply live (a pyenv or
# venv python3 earlier in PATH would not see them).
export PATH := /usr/bin:$(PATH)

APT_KERNEL := linux-source-$(BASE) bc flex bison libelf-dev libssl-dev dwarves \
	cpio ccache gcc make git xz-utils python3-ply python3-git
APT_IMAGE := debootstrap e2fsprogs
APT_VM := qemu-system-x86 qemu-utils
APT_TESTS := gcc make libssl-dev zlib1g-dev libzstd-dev liblzo2-dev
# btrfs-progs from Debian's source (patches/progs.sh): dpkg-source for
# apt-get source, autogen.sh's tools, and the static libraries it links.
APT_PROGS := dpkg-dev autoconf automake pkg-config gcc make git ccache \
	libblkid-dev uuid-dev zlib1g-dev libzstd-dev liblzo2-dev
APT_BENCH := python3-matplotlib python3-scipy python3-numpy
# Host tests (tests/host/): shellcheck over every script, pyflakes over every
# Python file, the report in a headless browser.
APT_HOST_TESTS := shellcheck pyflakes3 chromium

# $(call need,packages): install the missing ones, after an apt-get update.
define need
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | \
		grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "apt: installing" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $$missing >/dev/null || \
		{ echo "apt-get could not install:" $$missing "(run as root, with working apt sources)"; exit 1; }; \
	fi
endef

.PHONY: help kernel image progs progs-export progs-checkpatch tests-bin test reliability shell bench bench-check \
	bench-nightly bench-ab bench-history bench-tools check-series export-series checkpatch clean distclean

help:
	@echo "make test                    build the debug kernel, image and tests; run them in QEMU"
	@echo "make reliability [PARTS=\"fuzz powercut powercut-rekey keyload stress rekey-adversary logwrites\"] [FUZZ_IMAGES=1000] [POWERCUT_CUTS=100] [KEYLOAD_SECONDS=300] [STRESS_SECONDS=600] [REKEY_ADVERSARY_SECONDS=1800] [FUZZ_REPLAY=bug-dir]  issue #14 reliability figures on the debug kernel (build/reliability/)"
	@echo "make bench WORKLOAD=NAME     run a benchmark (make bench WORKLOAD=list to list)"
	@echo "make bench-nightly [WORKLOAD=fragmented] [BOOTS=2]  the nightly: a set of boots of the perf kernel, checked against reports/baselines/WORKLOAD-nightly.json"
	@echo "make bench-check [WORKLOAD=fragmented]  check its latest nightly set against that baseline again"
	@echo "make bench-ab OLD=K NEW=K [BOOTS=4] [WORKLOAD=fragmented]  did NEW make the per-extent premium worse? (K: a bzImage, a patches dir or a commit)"
	@echo "make bench-history WORKLOAD=NAME  trend of its tracked ratios over all recorded runs (reports/generated/history-NAME/)"
	@echo "make kernel [FLAVOR=debug|perf]  build build/bzImage-6.12-FLAVOR from patches/"
	@echo "make image                   build the guest root image build/root.img (with the patched progs)"
	@echo "make progs                   build btrfs-progs + patches/btrfs-progs/ into build/progs/bin"
	@echo "make progs-export            regenerate patches/btrfs-progs/ from build/btrfs-progs's history"
	@echo "make progs-checkpatch        checkpatch.pl --strict (no tree) on patches/btrfs-progs/"
	@echo "make shell [FLAVOR=...]      boot to a root shell in the guest"
	@echo "make check-series [FROM=N]   build every prefix of the series (from prefix N)"
	@echo "make export-series           regenerate patches/ from build/linux's history"
	@echo "make checkpatch              scripts/checkpatch.pl --strict on patches/"
	@echo "make clean | distclean       remove build outputs | also the kernel tree and image"
	@echo "Variables: ACCEL=auto|kvm|tcg|icount  TIMEOUT=seconds  ONLY=test1,test2"

kernel:
	$(call need,$(APT_KERNEL))
	@patches/kernel.sh build $(FLAVOR)

# Rebuilt only when the package list, the image scripts or the btrfs-progs
# series change.  The image gets the patched btrfs and mkfs.btrfs.
PROGS_SERIES := patches/progs.sh patches/btrfs-progs/series $(wildcard patches/btrfs-progs/*.patch)
image: $(BUILD)/root.img
$(BUILD)/root.img: vm-images/packages.txt vm-images/build-rootfs.sh vm-images/lab-init $(PROGS_SERIES)
	@$(MAKE) -s progs
	$(call need,$(APT_IMAGE))
	@PROGS_BIN=$(BUILD)/progs/bin vm-images/build-rootfs.sh $@

# Debian bookworm's btrfs-progs source plus patches/btrfs-progs/ (static
# btrfs and mkfs.btrfs only); the host's own btrfs-progs is not touched.
progs:
	$(call need,$(APT_PROGS))
	@patches/progs.sh build

progs-export:
	@patches/progs.sh export

# Uses the kernel tree's checkpatch.pl (make kernel first); never touches
# the kernel tree itself.
progs-checkpatch:
	@[ -x $(KERNEL_TREE)/scripts/checkpatch.pl ] || { echo "no $(KERNEL_TREE)/scripts/checkpatch.pl: run make kernel first"; exit 2; }
	@rc=0; for p in patches/btrfs-progs/*.patch; do \
		out=$$($(KERNEL_TREE)/scripts/checkpatch.pl --no-tree --strict --quiet \
			--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG,NEW_TYPEDEFS - <$$p); \
		echo "$$p: $${out:-clean}" | tail -n 1; [ -z "$$out" ] || { echo "$$out"; rc=1; }; \
	done; exit $$rc

tests-bin:
	$(call need,$(APT_TESTS))
	@$(MAKE) -s -C tests OUT=$(BUILD)/tests/bin

test:
	@$(MAKE) -s kernel FLAVOR=debug
	@$(MAKE) -s image tests-bin
	$(call need,$(APT_VM) $(APT_BENCH) $(APT_HOST_TESTS))
	@KERNEL=$(BUILD)/bzImage$(TAG)-debug tests/run-tests.sh

# Issue #14's reliability figures on the debug kernel (tests/run-reliability.sh):
# fuzzed images, power cuts (during writes; during rekeys, part powercut-rekey,
# also POWERCUT_CUTS cuts), key removal under load, concurrent stress, rekeys
# beside a concurrent adversary (issue #33; at least 30 minutes); one table in
# build/reliability/<date>-<time>/summary.md. PARTS picks some.
FUZZ_IMAGES ?= 1000
POWERCUT_CUTS ?= 100
KEYLOAD_SECONDS ?= 300
STRESS_SECONDS ?= 600
REKEY_ADVERSARY_SECONDS ?= 1800
reliability:
	@$(MAKE) -s kernel FLAVOR=debug
	@$(MAKE) -s image tests-bin
	$(call need,$(APT_VM))
	@FUZZ_IMAGES="$(FUZZ_IMAGES)" FUZZ_SEED="$(FUZZ_SEED)" FUZZ_REPLAY="$(FUZZ_REPLAY)" \
		POWERCUT_CUTS="$(POWERCUT_CUTS)" KEYLOAD_SECONDS="$(KEYLOAD_SECONDS)" \
		STRESS_SECONDS="$(STRESS_SECONDS)" REKEY_ADVERSARY_SECONDS="$(REKEY_ADVERSARY_SECONDS)" \
		RELIABILITY_PARTS="$(PARTS)" \
		tests/run-reliability.sh

shell:
	@$(MAKE) -s kernel image tests-bin
	$(call need,$(APT_VM))
	@vm-images/run-vm.sh --kernel $(BUILD)/bzImage$(TAG)-$(FLAVOR) --job $(BUILD)/tests \
		--out $(BUILD)/runs/shell --scratch 4G --scratch 4G --shell

bench:
	@if [ ! -f "bench/workloads/$(WORKLOAD)/workload.conf" ]; then \
		bench/run-bench.sh "$(WORKLOAD)"; rc=$$?; [ "$(WORKLOAD)" = list ] || exit 2; exit $$rc; fi
	@$(MAKE) -s kernel FLAVOR=perf
	@$(MAKE) -s image bench-tools
	$(call need,$(APT_VM) $(APT_BENCH))
	@bench/run-bench.sh "$(WORKLOAD)"

# The regression gate (reports/lab/gate.py, bench/README.md "The nightly"):
# a nightly is a set of BOOTS boots of the perf kernel, checked against the
# baseline made of A/A nightlies; bench-ab boots OLD and NEW in turn.
GATE_WORKLOAD = $(if $(WORKLOAD),$(WORKLOAD),fragmented)
GATE_BASE = reports/baselines/$(GATE_WORKLOAD)-nightly.json
bench-nightly:
	@$(MAKE) -s kernel FLAVOR=perf
	@$(MAKE) -s image bench-tools
	$(call need,$(APT_VM) $(APT_BENCH))
	@WORKLOAD=$(GATE_WORKLOAD) bench/run-boots.sh nightly nightly=$(BUILD)/bzImage$(TAG)-perf
	@$(MAKE) -s bench-check WORKLOAD=$(GATE_WORKLOAD)

bench-check:
	$(call need,$(APT_BENCH))
	@set=$(BUILD)/bench/latest-set-nightly-$(GATE_WORKLOAD); \
	[ -d "$$set" ] || { echo "bench-check: no nightly set of '$(GATE_WORKLOAD)' yet: make bench-nightly WORKLOAD=$(GATE_WORKLOAD)"; exit 2; }; \
	[ -f "$(GATE_BASE)" ] || { echo "bench-check: no baseline $(GATE_BASE) (make one from 8 or more A/A nightlies: /usr/bin/python3 -m reports.lab.gate baseline $(GATE_BASE) SET_DIR...)"; exit 2; }; \
	/usr/bin/python3 -m reports.lab.gate check "$$set" "$(GATE_BASE)" --junit "$$set/junit.xml"

bench-ab:
	@[ -n "$(OLD)" ] && [ -n "$(NEW)" ] || { echo "usage: make bench-ab OLD=<bzImage|patches dir|commit> NEW=<...> [BOOTS=4] [WORKLOAD=fragmented]"; exit 2; }
	@$(MAKE) -s image bench-tools
	$(call need,$(APT_VM) $(APT_BENCH) $(APT_KERNEL))
	@WORKLOAD=$(GATE_WORKLOAD) bench/run-boots.sh ab "old=$(OLD)" "new=$(NEW)" || exit 2
	@set=$(BUILD)/bench/latest-set-ab-$(GATE_WORKLOAD); \
	/usr/bin/python3 -m reports.lab.gate ab "$$set" --junit "$$set/junit.xml" \
		$$([ -f "$(GATE_BASE)" ] && echo --baseline "$(GATE_BASE)")

# Trend page of WORKLOAD from the history store (HISTORY_DIR, default
# ~/.local/share/fscrypt-lab/history), then the reports/ index.
bench-history:
	$(call need,$(APT_BENCH))
	@[ -n "$(WORKLOAD)" ] || { echo "usage: make bench-history WORKLOAD=NAME [HISTORY_DIR=dir]"; exit 2; }
	@/usr/bin/python3 -m reports.lab.history plot "$(WORKLOAD)" reports/generated/history-$(WORKLOAD) \
		--baseline reports/baselines/$(WORKLOAD)-nightly.json && /usr/bin/python3 -m reports.lab.index

bench-tools:
	$(call need,$(APT_TESTS))
	@$(MAKE) -s -C bench/tools OUT=$(BUILD)/bench/tools

check-series:
	$(call need,$(APT_KERNEL))
	@FROM="$(FROM)" patches/kernel.sh check-series $(if $(filter command line,$(origin FLAVOR)),$(FLAVOR),perf)

export-series:
	@patches/kernel.sh export

# FILE_PATH_CHANGES ("does MAINTAINERS need updating?") is ignored: new
# files go under fs/crypto/, which MAINTAINERS already lists; the commit
# messages say so.
checkpatch:
	$(call need,$(APT_KERNEL))
	@patches/kernel.sh tree
	@rc=0; for p in $(SERIES_PATCHES); do \
		case $$p in */0000-cover-letter.patch) continue;; esac; \
		out=$$(cd $(KERNEL_TREE) && scripts/checkpatch.pl --strict --quiet --ignore FILE_PATH_CHANGES - <$(TOP)/$$p); \
		echo "$$p: $${out:-clean}" | tail -n 1; [ -z "$$out" ] || { echo "$$out"; rc=1; }; \
	done; exit $$rc

clean:
	rm -rf $(BUILD)/obj-* $(BUILD)/bzImage-* $(BUILD)/tests $(BUILD)/jobs $(BUILD)/runs $(BUILD)/progs

distclean:
	@patches/kernel.sh tree-is-exported
	rm -rf $(BUILD)
