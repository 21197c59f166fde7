"""Run the ptf conformance suite against each target, one pytest item per (target, ptf test).

bmv2 (``test_ptf``): real simple_switch_grpc; ebpf (``test_ptf_ebpf``): the PSA programs
(build/ebpf/{rotor,tor}.o) loaded by NIKSS.  For each target the harness starts the switches in
a namespace of its own, runs ptf there once for the whole suite, and each item reports its own
ptf test's result; a test the target cannot run is skipped with the reason (rotor_base.LACKS).
Without a target's tools or programs its items are skipped, and say what is missing.  The eBPF
harness owns the pipelines it loads: ``test_ebpf_harness_left_nothing`` checks that none of
them, none of their pins and not the namespace are left.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from p4rotor.p4 import CLOCK_PORT
from p4rotor.fabric.switch import missing_tools, ptf_bench
from p4rotor.schedule.topology import FABRIC_MTU, HOST_MTU

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUITE = HERE / "conformance"
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build"))
P4INFO, P4BLOB = BUILD / "rotor.p4info.txtpb", BUILD / "rotor.json"
TOR_P4INFO, TOR_P4BLOB = BUILD / "tor.p4info.txtpb", BUILD / "tor.json"
ONE_P4INFO, ONE_P4BLOB = BUILD / "oneswitch.p4info.txtpb", BUILD / "oneswitch.json"
# The links' MTUs as in an emulation: the ToR tests use ports 1, 2 as uplinks (fabric links) and
# 3, 4 as host ports (rotor_base.tor_topology; tor_tests.TorLinksHaveTopologyMtus checks they
# agree); the clock port is a host interface.  Rotor tests send full-size frames on 1 and 2 only.
PORT_MTUS = {1: FABRIC_MTU, 2: FABRIC_MTU, 3: HOST_MTU, 4: HOST_MTU, CLOCK_PORT: HOST_MTU}


def discover() -> list[tuple[str, int]]:
    """(module.Class, number of switches) for every ptf test class (has runTest)."""
    out = []
    for f in sorted(SUITE.glob("*.py")):
        tree = ast.parse(f.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.FunctionDef) and b.name == "runTest" for b in node.body):
                n = 1
                for b in node.body:
                    if isinstance(b, ast.Assign) and getattr(b.targets[0], "id", "") == "num_switches":
                        n = b.value.value
                out.append((f"{f.stem}.{node.name}", n))
    return out


TESTS = discover()


def skip_reason() -> str | None:
    miss = missing_tools()
    for f in (P4BLOB, P4INFO, TOR_P4BLOB, TOR_P4INFO, ONE_P4BLOB, ONE_P4INFO):
        if not f.exists():
            miss.append(f"{f.relative_to(ROOT) if f.is_relative_to(ROOT) else f} (run 'make build'; needs p4c)")
    if not shutil.which("ptf", path=os.path.dirname(sys.executable)) and not shutil.which("ptf"):
        miss.append("ptf (make deps)")
    if miss:
        return "SKIPPED: switch conformance needs: " + ", ".join(miss) + " (docs/toolchain.md)"
    return None


def read_xunit(xunit_dir: Path) -> dict[str, tuple[str, str]]:
    """{module.Class: (result, detail)} from ptf's xUnit reports (``--xunit``): ok, FAIL, ERROR
    or skipped, with the failure text.  Structured results, not unittest's console lines."""
    import xml.etree.ElementTree as ET

    results: dict[str, tuple[str, str]] = {}
    for f in sorted(Path(xunit_dir).rglob("*.xml")):
        for tc in ET.parse(f).getroot().iter("testcase"):
            name = tc.get("classname", "")
            res, detail = "ok", ""
            for tag, word in (("failure", "FAIL"), ("error", "ERROR"), ("skipped", "skipped")):
                el = tc.find(tag)
                if el is not None:
                    res, detail = word, (el.get("message") or "") + "\n" + (el.text or "")
                    break
            results[name] = (res, detail)
    return results


def _session(reason: str | None, tmp_path_factory, name: str) -> tuple[Path, int]:
    """A target's ptf session: skipped loudly (``reason``), else its log directory and how many
    switches the suite needs."""
    if reason:
        print("\n" + reason, file=sys.stderr)
        pytest.skip(reason)
    return tmp_path_factory.mktemp(name), max(n for _, n in TESTS)


@pytest.fixture(scope="session")
def ptf_results(tmp_path_factory):
    logdir, nsw = _session(skip_reason(), tmp_path_factory, "ptf")
    with ptf_bench(num_switches=nsw, ports=tuple(PORT_MTUS), log_dir=logdir,
                   port_mtus=PORT_MTUS) as (ns, switches, ifaces):
        params = (f"target='bmv2';grpc_addrs='{','.join(s.address for s in switches)}';"
                  f"thrift_ports='{','.join(str(s.thrift_port) for s in switches)}';"
                  f"p4info='{P4INFO}';p4blob='{P4BLOB}';tor_p4info='{TOR_P4INFO}';tor_p4blob='{TOR_P4BLOB}';"
                  f"one_p4info='{ONE_P4INFO}';one_p4blob='{ONE_P4BLOB}'")
        results, output = run_ptf(ptf_command(ns.prefix(), ifaces, logdir, params), logdir)
        logs = {f"switch{i}": s.log_tail(80) for i, s in enumerate(switches)}
    return results, output, logs


def only_selected() -> list[str]:
    # P4ROTOR_PTF_ONLY="rotor_tests.NightDropsAndCounts,..." runs a subset (development).
    return [x for x in os.environ.get("P4ROTOR_PTF_ONLY", "").split(",") if x]


def ptf_command(prefix: list[str], ifaces: dict[tuple[int, int], str], logdir: Path, params: str) -> list[str]:
    ptf_bin = shutil.which("ptf", path=os.path.dirname(sys.executable)) or shutil.which("ptf")
    cmd = prefix + [ptf_bin, "--test-dir", str(SUITE), "--pypath", str(SUITE),
                    "--log-file", str(logdir / "ptf.log"), "--test-params", params,
                    "--default-negative-timeout", "0.1", "--xunit", "--xunit-dir", str(logdir / "xunit")]
    for (d, p), ifc in sorted(ifaces.items()):
        cmd += ["-i", f"{d}-{p}@{ifc}"]
    return cmd + only_selected()


def run_ptf(cmd: list[str], logdir: Path) -> tuple[dict[str, tuple[str, str]], str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
    output = r.stdout + r.stderr
    (logdir / "ptf-output.txt").write_text(output)
    return read_xunit(logdir / "xunit"), output


def report(name: str, results: dict, output: str, logs: dict[str, str]) -> None:
    """Pass, skip (with ptf's reason) or fail (with ptf's report and the switch logs)."""
    res, detail = results.get(name, (None, ""))
    if only_selected() and name not in only_selected():
        pytest.skip("not selected by P4ROTOR_PTF_ONLY")
    if res == "ok":
        return
    if res == "skipped":
        pytest.skip(detail.strip().splitlines()[0] if detail.strip() else "skipped by ptf")
    msg = f"ptf {name}: {res or 'no result in the xUnit report (crashed?): ' + output[-3000:]}\n{detail[-6000:]}\n" + "\n".join(
        f"--- {k} log (tail) ---\n{v}" for k, v in logs.items())
    pytest.fail(msg, pytrace=False)


@pytest.mark.parametrize("name", [t for t, _ in TESTS])
def test_ptf(name, ptf_results):
    """The ptf test ``name`` on BMv2."""
    report(name, *ptf_results)


# ---------------------------------------------------------------------------
# eBPF (PSA programs in the kernel, NIKSS)
# ---------------------------------------------------------------------------

EBPF_BUILD = BUILD / "ebpf"
EBPF_PROGRAMS = {"rotor": EBPF_BUILD / "rotor.o", "tor": EBPF_BUILD / "tor.o"}
XDP_PASS = EBPF_BUILD / "xdp_pass.o"
# The PSA programs have no clock port: the ports the tests use, with their links' MTUs.
EBPF_PORT_MTUS = {p: m for p, m in PORT_MTUS.items() if p != CLOCK_PORT}

def ebpf_skip_reason() -> str | None:
    from p4rotor.fabric.nikss import missing_tools as ebpf_missing

    miss = ebpf_missing()
    files = [str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f) for f in (
        *EBPF_PROGRAMS.values(), *(f.with_suffix(".p4info.txtpb") for f in EBPF_PROGRAMS.values()), XDP_PASS)
        if not f.exists()]
    if files:
        miss.append(f"{', '.join(files)} (run 'make build-ebpf'; needs p4c-ebpf, clang)")
    if os.geteuid() != 0:
        miss.append("root (NIKSS loads programs into the kernel)")
    if not shutil.which("ptf", path=os.path.dirname(sys.executable)) and not shutil.which("ptf"):
        miss.append("ptf (make deps)")
    if miss:
        return "SKIPPED: eBPF switch conformance needs: " + ", ".join(miss) + " (docs/toolchain.md)"
    return None




@contextlib.contextmanager
def ebpf_ptf_bench(num_switches: int, port_mtus: dict[int, int]):
    """A namespace with, per device, a veth per port (switch end s<d>p<p>, ptf end t<d>p<p>
    running XDP_PASS) and a NIKSS pipeline per program; no port is attached (each test attaches
    its device's ports to its program's pipeline).  Yields (namespace, {program: [pipeline id
    per device]}, {(device, port): switch end}, {(device, port): ptf end}).  On the way out every
    port is detached, every pipeline unloaded and its pins removed, the namespace deleted."""
    from p4rotor.fabric.nikss import BRIDGE_ROOM, EbpfSwitch, pass_xdp
    from p4rotor.fabric.switch import Netns

    ns = Netns()
    loaded: list[EbpfSwitch] = []
    try:
        sw_ifaces, ptf_ifaces = {}, {}
        for d in range(num_switches):
            for p, mtu in port_mtus.items():
                ns.veth(f"s{d}p{p}", f"t{d}p{p}", mtu=mtu)
                # Room for the bridged header on the switch's end, as fabric/nikss.py makes it.
                ns.exec(["ip", "link", "set", "dev", f"s{d}p{p}", "mtu", str(mtu + BRIDGE_ROOM)])
                pass_xdp(ns.name, f"t{d}p{p}", XDP_PASS)
                sw_ifaces[(d, p)], ptf_ifaces[(d, p)] = f"s{d}p{p}", f"t{d}p{p}"
        pipelines: dict[str, list[int]] = {}
        for prog, obj in EBPF_PROGRAMS.items():
            for d in range(num_switches):
                sw = EbpfSwitch(f"{prog}{d}", ns.name, obj, {}).start()
                loaded.append(sw)
                # The device's ports, for close() to detach: ptf attached them to one of the
                # device's pipelines (detaching from the others fails, and is ignored).
                sw.ifaces = {p: i for (dd, p), i in sw_ifaces.items() if dd == d}
                pipelines.setdefault(prog, []).append(sw.pipeline)
        yield ns, pipelines, sw_ifaces, ptf_ifaces
    finally:
        for sw in loaded:
            sw.close()
        ns.close()


@pytest.fixture(scope="session")
def ptf_results_ebpf(tmp_path_factory):
    logdir, nsw = _session(ebpf_skip_reason(), tmp_path_factory, "ptf-ebpf")
    from p4rotor.fabric.nikss import BPFFS, leftover_pipelines

    with ebpf_ptf_bench(nsw, EBPF_PORT_MTUS) as (ns, pipelines, sw_ifaces, ifaces):
        ours = [i for ids in pipelines.values() for i in ids]
        info = {prog: EBPF_PROGRAMS[prog].with_suffix(".p4info.txtpb") for prog in EBPF_PROGRAMS}
        params = (f"target='ebpf';p4info='{info['rotor']}';p4blob='{EBPF_PROGRAMS['rotor']}';"
                  f"tor_p4info='{info['tor']}';tor_p4blob='{EBPF_PROGRAMS['tor']}';"
                  f"pipelines='{';'.join(f'{k}=' + ','.join(map(str, v)) for k, v in pipelines.items())}';"
                  f"sw_ifaces='{','.join(f'{d}:{p}={i}' for (d, p), i in sorted(sw_ifaces.items()))}'")
        # nsenter --net, not ip netns exec: the tests run nikss-ctl, which needs the BPF file
        # system that ip netns exec's fresh /sys hides.
        cmd = ptf_command(["nsenter", f"--net=/var/run/netns/{ns.name}"], ifaces, logdir, params)
        results, output = run_ptf(cmd, logdir)
        logs = {"pipelines": ", ".join(f"{k}: {v}" for k, v in pipelines.items())}
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    left = {"pipelines": sorted(set(leftover_pipelines()) & {f"pipeline{i}" for i in ours}),
            "pins": [str(BPFFS / f"pipeline{i}") for i in ours if (BPFFS / f"pipeline{i}").exists()],
            "namespace": [ns.name] if ns.name in netns else []}
    return results, output, logs, left


@pytest.mark.parametrize("name", [t for t, _ in TESTS])
def test_ptf_ebpf(name, ptf_results_ebpf):
    """The ptf test ``name`` on eBPF."""
    report(name, *ptf_results_ebpf[:3])


def test_ebpf_harness_left_nothing(ptf_results_ebpf):
    """After the eBPF session: none of its pipelines loaded or pinned, its namespace gone."""
    left = ptf_results_ebpf[3]
    assert left == {"pipelines": [], "pins": [], "namespace": []}, left
