#!/usr/bin/env bash
# Build p4c (with its eBPF back end), BMv2 (simple_switch_grpc), PI and NIKSS from source at the
# commits p4rotor is tested with (docs/toolchain.md), outside this repository, and install them
# into /usr/local.  Debian 12.
# Takes 1-2 hours on 2 cores and ~6 GB of disk; needs network access to GitHub and Debian.
#
#   scripts/build-toolchain.sh [--src DIR] [--jobs N] [--dry-run] [--help]
#
# Idempotent: each step is skipped if its result is already there, so a re-run resumes.
set -euo pipefail

P4C_REF=v1.2.4.2           # b1b0fde3, 2023-08-02
BMV2_REF=2d726e52          # 1.15.0, 2023-11-10
PI_REF=2e3025f1            # 2023-09-18
NIKSS_REF=b8b1e82          # NIKSS-vSwitch/nikss, with its pinned libbpf v0.5.0
SRC=${HOME:-/root}/p4-toolchain-src
JOBS=$(nproc)
DRY=0
DEPS="autoconf automake libtool pkg-config bison flex libfl-dev g++ cmake ninja-build git ca-certificates
libgc-dev libgmp-dev libboost-dev libboost-iostreams-dev libboost-graph-dev libboost-program-options-dev
libboost-system-dev libboost-filesystem-dev libboost-thread-dev libprotobuf-dev protobuf-compiler
libgrpc++-dev protobuf-compiler-grpc libabsl-dev libjudy-dev libreadline-dev libssl-dev libpcap-dev
libevent-dev libnanomsg-dev libthrift-dev thrift-compiler python3 clang llvm make libelf-dev zlib1g-dev
libjansson-dev libgmp-dev"

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --src) SRC=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-toolchain: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "build-toolchain: --jobs must be a positive integer, got $JOBS" >&2; exit 2; }
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
run() { echo "+ $*"; [ $DRY = 1 ] || "$@"; }
step() { echo; echo "== $*"; }

step "plan: PI $PI_REF, BMv2 $BMV2_REF, p4c $P4C_REF in $SRC, $JOBS jobs; install to /usr/local"
step "Debian build dependencies (~3 min)"
run $sudo apt-get update -q
run $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $DEPS
run mkdir -p "$SRC"

clone() {  # clone URL DIR REF: full clone (pinned commits need history), submodules at their pins
  if [ ! -d "$SRC/$2/.git" ]; then run git clone "$1" "$SRC/$2"; fi
  run git -C "$SRC/$2" checkout -q "$3"
  run git -C "$SRC/$2" submodule update --init --recursive
}

step "PI (P4Runtime server library, ~10 min)"
clone https://github.com/p4lang/PI.git PI "$PI_REF"
if [ $DRY = 1 ] || [ ! -f "$SRC/PI/.p4rotor-installed" ]; then
  run bash -c "cd '$SRC/PI' && ./autogen.sh && ./configure --with-proto --without-internal-rpc --without-cli --without-bmv2 && make -j$JOBS && $sudo make install && $sudo ldconfig && touch .p4rotor-installed"
fi

step "BMv2 with simple_switch_grpc, no logging macros (~30 min)"
clone https://github.com/p4lang/behavioral-model.git behavioral-model "$BMV2_REF"
if [ $DRY = 1 ] || [ ! -f "$SRC/behavioral-model/.p4rotor-installed" ]; then
  run bash -c "cd '$SRC/behavioral-model' && ./autogen.sh && ./configure --with-pi --with-thrift --disable-logging-macros --disable-elogger CXXFLAGS=-O2 && make -j$JOBS && $sudo make install && $sudo ldconfig && touch .p4rotor-installed"
fi

step "p4c, BMv2 and eBPF back ends (~60 min; p4c-ebpf needs the BMv2 IR, so both)"
clone https://github.com/p4lang/p4c.git p4c "$P4C_REF"
if [ $DRY = 1 ] || [ ! -f "$SRC/p4c/.p4rotor-installed" ]; then
  run bash -c "mkdir -p '$SRC/p4c/build' && cd '$SRC/p4c/build' && cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DENABLE_GTESTS=OFF -DENABLE_EBPF=ON -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF -DENABLE_P4FMT=OFF -DENABLE_P4C_GRAPHS=OFF -DENABLE_TEST_TOOLS=OFF -DP4C_USE_PREINSTALLED_PROTOBUF=ON -DENABLE_PROTOBUF_STATIC=OFF -DENABLE_LTO=OFF .. && ninja -j$JOBS && $sudo ninja install && touch ../.p4rotor-installed"
fi

step "p4c's eBPF runtime (headers and kernel.mk, with libbpf's headers) into /usr/local/share/p4c/ebpf/runtime"
if [ $DRY = 1 ] || [ ! -f "$SRC/p4c/.p4rotor-ebpf-runtime" ]; then
  run bash -c "cd '$SRC/p4c/backends/ebpf' && ./build_libbpf && $sudo mkdir -p /usr/local/share/p4c/ebpf && $sudo cp -r runtime /usr/local/share/p4c/ebpf/ && touch '$SRC/p4c/.p4rotor-ebpf-runtime'"
fi

step "NIKSS (nikss-ctl, the PSA-eBPF switch's loader; ~5 min)"
clone https://github.com/NIKSS-vSwitch/nikss.git nikss "$NIKSS_REF"
if [ $DRY = 1 ] || [ ! -f "$SRC/nikss/.p4rotor-installed" ]; then
  run bash -c "cd '$SRC/nikss' && ./build_libbpf.sh && mkdir -p build && cd build && cmake -DCMAKE_BUILD_TYPE=Release .. && make -j$JOBS && $sudo make install && $sudo ldconfig && touch ../.p4rotor-installed"
fi

step "done"
[ $DRY = 1 ] || { p4c --version | head -1; command -v simple_switch_grpc p4c-ebpf nikss-ctl; }
