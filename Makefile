# p4rotor: build, run, test, bench.  `make deps && make test` on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY_SYS   ?= /usr/bin/python3
VENV     ?= .venv
PY       := $(VENV)/bin/python
P4C      ?= p4c
BUILD    ?= build
PROGRAMS := rotor tor oneswitch passthrough
P4_SRCS  := $(wildcard p4src/shared/*.p4 p4src/shared/control/*.p4 p4src/v1model/*.p4 p4src/v1model/include/*.p4 p4src/v1model/include/control/*.p4)
APT_PKGS := mininet iproute2 iputils-ping iperf3 ethtool tcpdump procps iptables curl python3-venv python3-pip python3-dev build-essential
APT_CMDS := mnexec ip ss ping ethtool iperf3 tcpdump iptables curl
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Where p4c/BMv2 come from when they are missing (scripts/install-toolchain.sh): an archive or a
# toolchain directory; a shared/toolchain directory beside the checkout is used by default.
P4_TOOLCHAIN ?= $(firstword $(wildcard ../shared/toolchain))

.PHONY: help deps venv toolchain native build build-ebpf build-tofino fixtures-tofino test test-unit test-ptf fuzz run bench bench-scale fct-sweep clean check-tools constants fixtures

help:
	@echo "make deps   apt + a venv in $(VENV) + p4c/BMv2 if missing (P4_TOOLCHAIN=archive|dir; docs/toolchain.md)"
	@echo "make native the RotorLB agents' compiled data path, $(BUILD)/rlbd, and the energy accounting's loop (make deps builds them)"
	@echo "make build  compile p4src/v1model/*.p4 to $(BUILD)/<program>.json + .p4info.txtpb (needs p4c)"
	@echo "make build-tofino  compile p4src/tna/{rotor,tor}.p4 with bf-p4c into $(BUILD)/tofino/ + resource report"
	@echo "make test   unit tests + ptf conformance against simple_switch_grpc (skipped loudly if absent)"
	@echo "make fuzz   the CLI input fuzz with FUZZ_SCALE (10) times make test's ~11 000 cases, random ones"
	@echo "make run    the default emulation (issue #4)"
	@echo "make bench  benchmarks into results/bench.json"
	@echo "make bench-scale  the opera-sim-scale rows: Opera 108x6 on one BMv2, RotorNet 128x4 on 132, Opera 108x6 on 114 eBPF pipelines (75 min, 16 GiB)"
	@echo "make fct-sweep  experiment fct at Opera's evaluation points (hours; FCT_POINTS, FCT_ARGS) + results/fct/table.md"

deps: venv toolchain native check-tools

# The RotorLB agents' compiled data path (docs/rotorlb.md): C, built with the machine's cc.
CC       ?= cc
native: $(BUILD)/rlbd $(BUILD)/liblinkstate.so

$(BUILD)/rlbd: control-plane/native/rlbd.c
	@mkdir -p $(BUILD)
	$(CC) -O2 -Wall -Wextra -o $@ $<

# The energy accounting's per-frame loop (energy/fast.py loads it; docs/energy.md). No -ffast-math:
# it must give the Python loop's numbers.
$(BUILD)/liblinkstate.so: control-plane/native/linkstate.c
	@mkdir -p $(BUILD)
	$(CC) -O2 -ffp-contract=off -Wall -Wextra -fPIC -shared -o $@ $< -lm

toolchain:
	@P4_TOOLCHAIN="$(P4_TOOLCHAIN)" bash scripts/install-toolchain.sh

venv:
	@missing=""; for c in $(APT_CMDS); do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ] || ! $(PY_SYS) -c 'import venv, ensurepip, mininet' 2>/dev/null; then \
	  echo "== installing Debian packages: $(APT_PKGS)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PKGS); \
	fi
	@test -x $(PY) || $(PY_SYS) -m venv --system-site-packages $(VENV)
	@echo "== installing the p4rotor package and its Python dependencies into $(VENV)"
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e 'control-plane[test]'
	@echo "== p4rotor CLI: $(VENV)/bin/p4rotor"

check-tools:
	@missing=""; for t in $(P4C) simple_switch_grpc; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "!! not found on PATH:$$missing"; \
	  echo "!! p4c and BMv2 (simple_switch_grpc) are not in Debian or PyPI: see docs/toolchain.md"; \
	  echo "!! (p4lang's packages, or a source build into /usr/local). Without them the ptf and"; \
	  echo "!! emulation tests are SKIPPED, with that reason."; \
	else echo "== toolchain: $$($(P4C) --version 2>&1 | head -1); $$(command -v simple_switch_grpc)"; fi

build: $(addprefix $(BUILD)/,$(addsuffix .json,$(PROGRAMS)))

$(BUILD)/%.json: p4src/v1model/%.p4 $(P4_SRCS)
	@command -v $(P4C) >/dev/null || { echo "p4c not found: see docs/toolchain.md"; exit 2; }
	@mkdir -p $(BUILD)
	$(P4C) --target bmv2 --arch v1model --std p4-16 -o $(BUILD)/$*.out \
	  --p4runtime-files $(BUILD)/$*.out/$*.p4info.txt $<
	@mv $(BUILD)/$*.out/$*.json $@ && mv $(BUILD)/$*.out/$*.p4info.txt $(BUILD)/$*.p4info.txtpb && rm -rf $(BUILD)/$*.out

# PSA on eBPF (docs/targets.md): p4c-ebpf writes C for the XDP hook, clang compiles it, NIKSS
# loads it.  p4c-ebpf writes no P4Info, so p4c-bm2-psa's front end writes it from the same
# source (its BMv2 back end then fails on this program: only the P4Info is kept).
P4C_EBPF    ?= p4c-ebpf
EBPF_RT     ?= /usr/local/share/p4c/ebpf/runtime
EBPF_PROGS  := rotor tor
# Masks a ternary table's lookup walks: the verifier follows that loop to its bound at every
# load (p4c-ebpf's default, 128, made a rotor's load 0.22 s; 2 makes it 0.08 s), and the
# controller writes two (control/nikss.py: TERNARY_MASKS, which refuses any other).
EBPF_TERNARY_MASKS := 2
# scripts/ebpf_trim.py then takes out two more pieces of load time the program never uses (a
# CRC table's initialisation, a DEVMAP's BTF): a restarted switch is back when its load is done.
PSA_SRCS    := $(wildcard p4src/shared/*.p4 p4src/shared/control/*.p4 p4src/psa/*.p4 p4src/psa/include/*.p4)
# As p4c's backends/ebpf/runtime/kernel.mk compiles it: clang to LLVM IR, then llc to BPF; and
# -fno-strict-aliasing: p4c-ebpf's ternary lookup reads a key struct through a u32 pointer, which
# clang may then read before the key's narrower fields are written (a 16-bit field looked up as 0:
# the ptf suite's per-matching loss test found it).
EBPF_CFLAGS := -O2 -g -fno-strict-aliasing -D__KERNEL__ -D__ASM_SYSREG_H -DBTF -I$(EBPF_RT) -I$(EBPF_RT)/usr/include \
               -I$(EBPF_RT)/contrib/libbpf/include/uapi -Wno-unused-value -Wno-pointer-sign \
               -Wno-compare-distinct-pointer-types -Wno-gnu-variable-sized-type-not-at-end \
               -Wno-address-of-packed-member -Wno-tautological-compare -Wno-unknown-warning-option \
               -Wno-parentheses-equality -Wno-incompatible-pointer-types

build-ebpf: $(addprefix $(BUILD)/ebpf/,$(addsuffix .o,$(EBPF_PROGS)) xdp_pass.o tc_stamp.o)

$(BUILD)/ebpf/%.o: p4src/psa/%.p4 $(PSA_SRCS) Makefile scripts/ebpf_trim.py
	@command -v $(P4C_EBPF) >/dev/null || { echo "p4c-ebpf not found: see docs/toolchain.md"; exit 2; }
	@command -v clang >/dev/null && command -v llc >/dev/null || { echo "clang/llc not found: see docs/toolchain.md"; exit 2; }
	@mkdir -p $(BUILD)/ebpf
	$(P4C_EBPF) --arch psa --xdp --xdp2tc head --max-ternary-masks $(EBPF_TERNARY_MASKS) --Wdisable -o $(BUILD)/ebpf/$*.c $<
	python3 scripts/ebpf_trim.py $(BUILD)/ebpf/$*.c
	clang $(EBPF_CFLAGS) -emit-llvm -c $(BUILD)/ebpf/$*.c -o $(BUILD)/ebpf/$*.bc
	llc -march=bpf -filetype=obj $(BUILD)/ebpf/$*.bc -o $@ && rm -f $(BUILD)/ebpf/$*.bc
	@rm -f $(BUILD)/ebpf/$*.p4info.txt; p4c-bm2-psa --Wdisable --p4runtime-files $(BUILD)/ebpf/$*.p4info.txt \
	  -o $(BUILD)/ebpf/$*.bm2 $< >/dev/null 2>&1; rm -rf $(BUILD)/ebpf/$*.bm2
	@test -s $(BUILD)/ebpf/$*.p4info.txt || { echo "no P4Info for $<"; rm -f $@; exit 2; }
	@mv $(BUILD)/ebpf/$*.p4info.txt $(BUILD)/ebpf/$*.p4info.txtpb

$(BUILD)/ebpf/xdp_pass.o $(BUILD)/ebpf/tc_stamp.o: $(BUILD)/ebpf/%.o: p4src/psa/%.c
	@mkdir -p $(BUILD)/ebpf
	clang -O2 -target bpf -I/usr/include/$(shell uname -m)-linux-gnu -c $< -o $@

# Tofino (TNA) with the open Tofino back end of p4c (docs/tofino.md): both programs, their
# P4Info and a resource report in $(BUILD)/tofino/.  Skips, saying so, without bf-p4c.
BF_P4C   ?= $(firstword $(shell command -v bf-p4c 2>/dev/null) $(wildcard /opt/p4c-tofino/bin/bf-p4c))
TNA_SRCS := $(wildcard p4src/shared/*.p4 p4src/tna/*.p4 p4src/tna/include/*.p4 p4src/tna/include/control/*.p4)
BF_FLAGS := --target tofino --arch tna --verbose 2 --p4runtime-force-std-externs \
            --Wdisable=unused --Wdisable=uninitialized-out-param --Wdisable=uninitialized-use

build-tofino:
	@if [ -z "$(BF_P4C)" ]; then \
	  echo "!! bf-p4c not found (PATH or /opt/p4c-tofino): Tofino build SKIPPED. docs/tofino.md says how to build it."; \
	else $(MAKE) --no-print-directory $(BUILD)/tofino/resources.md; fi

$(BUILD)/tofino/%/pipe/tofino.bin: p4src/tna/%.p4 $(TNA_SRCS)
	@mkdir -p $(BUILD)/tofino
	@echo "== bf-p4c $<"
	@$(BF_P4C) $(BF_FLAGS) -o $(BUILD)/tofino/$* --p4runtime-files $(BUILD)/tofino/$*.p4info.txtpb $< \
	  > $(BUILD)/tofino/$*.log 2>&1 || { cat $(BUILD)/tofino/$*.log; exit 1; }

$(BUILD)/tofino/resources.md: $(BUILD)/tofino/rotor/pipe/tofino.bin $(BUILD)/tofino/tor/pipe/tofino.bin
	$(PY) -m p4rotor.control.tofino_report $(BUILD)/tofino

# The TNA P4Info fixtures the unit tests use (a test checks they match $(BUILD)/tofino/).
fixtures-tofino: build-tofino
	cp $(BUILD)/tofino/rotor.p4info.txtpb $(BUILD)/tofino/tor.p4info.txtpb control-plane/tests/data/tna/

# The Python side's numeric P4 constants are generated from the P4 (a unit test checks they agree).
constants:
	$(PY) -m p4rotor.p4.generate p4src/shared/defines.p4 > control-plane/p4rotor/p4/constants.py

# The P4Info fixtures the unit tests use without p4c (a test checks they match build/).
fixtures: build
	cp $(BUILD)/rotor.p4info.txtpb $(BUILD)/tor.p4info.txtpb $(BUILD)/oneswitch.p4info.txtpb control-plane/tests/data/

# Build what can be built, then run every test; ptf tests skip (saying why) without p4c/BMv2.
test: native
	@if command -v $(P4C) >/dev/null; then $(MAKE) --no-print-directory build; \
	 else echo "!! p4c not found: P4 programs not built; switch tests will be skipped (docs/toolchain.md)"; fi
	@if command -v $(P4C_EBPF) >/dev/null && command -v clang >/dev/null; then $(MAKE) --no-print-directory build-ebpf; \
	 else echo "!! p4c-ebpf or clang not found: eBPF programs not built; eBPF tests will be skipped (docs/toolchain.md)"; fi
	$(PY) -m pytest

test-unit:
	$(PY) -m pytest control-plane/tests -ra

# The CLI input fuzz (docs/testing.md) with FUZZ_SCALE times the cases `make test` runs (~11 000),
# random rather than the same each time: ~20 min at the default 10.
FUZZ_SCALE ?= 10
fuzz:
	P4ROTOR_FUZZ_EXAMPLES=$(FUZZ_SCALE) $(PY) -m pytest control-plane/tests/test_fuzz_cli.py \
	  control-plane/tests/test_fuzz_cli_files.py control-plane/tests/test_fuzz_cli_flags.py -ra

test-ptf: build
	$(PY) -m pytest ptf-tests -ra

# The default emulation, with a RotorLB agent (and its TUN interface) in every host: bulk between
# racks (iperf3 to 10.200.R.N) goes through RotorLB.  RUN_ARGS adds `p4rotor run` options.
run: build native
	$(VENV)/bin/p4rotor run --rotorlb $(RUN_ARGS)

bench: build native
	@if command -v $(P4C_EBPF) >/dev/null && command -v clang >/dev/null; then $(MAKE) --no-print-directory build-ebpf; fi
	$(VENV)/bin/p4rotor bench

# Issue #15's opera-sim-scale rows, merged into results/bench.json and docs/performance.md: Opera
# 108x6 on ONE BMv2 (~26 min, 3 GiB) and RotorNet 128x4 on 132 BMv2 (~15 min, 16 GiB).
bench-scale: build
	$(VENV)/bin/p4rotor bench --only scale --scale-sizes 108x6 --scale-kind opera --scale-fabric one-switch
	$(VENV)/bin/p4rotor bench --only scale --scale-sizes 128
	@if command -v $(P4C_EBPF) >/dev/null; then $(MAKE) --no-print-directory build-ebpf && \
	  $(VENV)/bin/p4rotor bench --only scale --scale-sizes 108x6 --scale-kind opera --scale-target ebpf; \
	 else echo "!! p4c-ebpf not found: the eBPF 108x6 row SKIPPED (docs/toolchain.md)"; fi

# Opera's evaluation points ([McGuinness21 §2.6]): Web Search 1/5/10 %, Data Mining 1/10/25/40 %,
# every point in results/fct/WORKLOAD-LOAD/ with its run.json (command, commit, target, wall time,
# calibration), then one generated table.  On the fastest fabric (eBPF switches, rlbd agents),
# sizes scaled by 0.51 (dilation 100 x the 50.7 Mb/s access rate 880 frames/s per circuit gives,
# against 10 Gb/s), Opera's 15 MB cutoff in real-system bytes, 100 flows replayed alone per mode.
# Dilation 20 and 50 were tried: the 16 Python agents' slot loops could not keep up on 2 cores
# (docs/fct.md, "At Opera's sizes").  Each point calibrates its idle fabric itself before its
# flows (~4.5 min; the same code's idle fabric differed by 16 % between two boots), unless
# FCT_CAL names a calibration directory every point then divides by (made once with
# --calibrate-only if it is missing).  A point already there is kept (delete its directory to
# re-run it): the sweep resumes where it stopped.  A point may name its runs, WORKLOAD:LOAD:MODES.
# docs/fct.md says what each point costs.
FCT_TARGET   ?= ebpf
FCT_POINTS   ?= websearch:0.1 websearch:0.05 datamining:0.4 datamining:0.25 datamining:0.1 websearch:0.01 datamining:0.01
FCT_FABRIC   ?= --target $(FCT_TARGET) --datapath c --dilation 100 --rate 880 --guard-us 2000
FCT_ARGS     ?= --flows 10000 --cutoff-real 15e6 --replay 100
# Minutes a point may take: of the 10 000 flows, as many as fit (--wall-budget; empty: all of them).
FCT_BUDGET   ?= 30
FCT_CAL      ?=
fct-sweep: build build-ebpf native
	@set -e; if [ -n "$(FCT_CAL)" ] && [ ! -f $(FCT_CAL)/calibration.json ]; then echo "== $(FCT_CAL)"; \
	  $(VENV)/bin/p4rotor experiment fct --calibrate-only $(FCT_FABRIC) --output $(FCT_CAL); fi; \
	for p in $(FCT_POINTS); do w=$$(echo $$p | cut -d: -f1); l=$$(echo $$p | cut -d: -f2); \
	  m=$$(echo $$p | cut -s -d: -f3); d=results/fct/$$w-$$l; \
	  if [ -f $$d/fct.json ]; then echo "== $$d: done already"; continue; fi; \
	  echo "== $$d"; $(VENV)/bin/p4rotor experiment fct --workload $$w --load $$l $${m:+--modes $$m} \
	    $(FCT_FABRIC) $(FCT_ARGS) $(if $(FCT_BUDGET),--wall-budget $(FCT_BUDGET)) \
	    $(if $(FCT_CAL),--calibration $(FCT_CAL)/calibration.json) --output $$d; done
	$(VENV)/bin/p4rotor workload table results/fct/*/fct.json --paper results/fct/opera-nsdi20/buckets.json > results/fct/table.md
	@echo "wrote results/fct/table.md"

clean:
	rm -rf $(BUILD) results/*.tmp
