#!/usr/bin/env bash
# Get p4c + BMv2 (simple_switch_grpc, with PI) onto this machine, the first way that applies:
#   1. already on PATH                      -> nothing to do
#   2. a prebuilt archive (P4_TOOLCHAIN)    -> ~1 min: a .tar.xz laid out under usr/local/, or a
#      directory holding install.sh and such an archive (e.g. ../shared/toolchain)
#   3. p4lang's distribution packages       -> ~2 min, where the OS's package lists have them
#   4. none of those                        -> say how to get them (scripts/build-toolchain.sh
#      builds from pinned sources, 1-2 h on 2 cores) and exit 0: switch tests are then SKIPPED.
# Usage: scripts/install-toolchain.sh [ARCHIVE.tar.xz | DIR]   (or P4_TOOLCHAIN=...)
# Bad input (a path that is neither an archive nor a toolchain directory) is one line and exit 2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-${P4_TOOLCHAIN:-}}
have() { command -v p4c >/dev/null && command -v simple_switch_grpc >/dev/null; }
die() { echo "install-toolchain: $*" >&2; exit 2; }
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo

# Bad input is refused before anything else, whether or not the tools are already there.
if [ -n "$src" ]; then
  if [ -d "$src" ]; then
    [ -f "$src/install.sh" ] || die "$src is a directory without install.sh (expected a toolchain directory)"
  elif [ -f "$src" ]; then
    tar -tJf "$src" 2>/dev/null | grep '^usr/local/bin/p4c$' >/dev/null \
      || die "$src is not a p4c/BMv2 archive (a .tar.xz with usr/local/bin/p4c)"
  else
    die "P4_TOOLCHAIN=$src: no such file or directory"
  fi
fi

if have; then
  echo "== toolchain: $(p4c --version 2>&1 | head -1); $(command -v simple_switch_grpc)"
  exit 0
fi

if [ -n "$src" ]; then
  if [ -d "$src" ]; then
    echo "== installing p4c and BMv2 from $src (about a minute)"
    $sudo bash "$src/install.sh"
  else
    echo "== installing p4c and BMv2 from $src (about a minute)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends xz-utils \
      $(grep -v '^#' "$here/toolchain/runtime-packages.txt") >/dev/null
    $sudo tar -xJf "$src" -C /
    $sudo ldconfig
  fi
  have || die "installed from $src, but p4c or simple_switch_grpc is still not on PATH"
  echo "== toolchain: $(p4c --version 2>&1 | head -1); $(command -v simple_switch_grpc)"
  exit 0
fi

if apt-cache show p4lang-p4c p4lang-bmv2 >/dev/null 2>&1; then
  echo "== installing p4lang's p4lang-p4c and p4lang-bmv2 packages (a few minutes)"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq p4lang-p4c p4lang-bmv2 >/dev/null
  have && { echo "== toolchain: $(p4c --version 2>&1 | head -1)"; exit 0; }
fi

cat >&2 <<'MSG'
!! p4c and BMv2 (simple_switch_grpc) are not installed, and no way to install them was found here.
!! The unit tests run; every switch (ptf) and emulation test will be SKIPPED, naming what is missing.
!! Three ways to get them (docs/toolchain.md):
!!   make deps P4_TOOLCHAIN=path/to/p4-toolchain-debian12-amd64.tar.xz   prebuilt archive, ~1 min
!!   p4lang's packages (p4lang-p4c, p4lang-bmv2; see the p4c README)       ~2 min where available
!!   scripts/build-toolchain.sh                                            pinned source build, 1-2 h
MSG
exit 0
