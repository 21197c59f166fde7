"""Run the ptf conformance suite against real simple_switch_grpc, one pytest item per ptf test.

The harness starts the switches in a namespace of their own, runs ptf there once for
the whole suite, and each item below reports its own ptf test's result.  Without
p4c/BMv2 every item is skipped, and says which tool is missing.
"""

from __future__ import annotations

import ast
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


@pytest.fixture(scope="session")
def ptf_results(tmp_path_factory):
    reason = skip_reason()
    if reason:
        print("\n" + reason, file=sys.stderr)
        pytest.skip(reason)
    logdir = tmp_path_factory.mktemp("ptf")
    nsw = max(n for _, n in TESTS)
    ptf_bin = shutil.which("ptf", path=os.path.dirname(sys.executable)) or shutil.which("ptf")
    with ptf_bench(num_switches=nsw, ports=tuple(PORT_MTUS), log_dir=logdir,
                   port_mtus=PORT_MTUS) as (ns, switches, ifaces):
        params = (f"grpc_addrs='{','.join(s.address for s in switches)}';"
                  f"thrift_ports='{','.join(str(s.thrift_port) for s in switches)}';"
                  f"p4info='{P4INFO}';p4blob='{P4BLOB}';tor_p4info='{TOR_P4INFO}';tor_p4blob='{TOR_P4BLOB}';"
                  f"one_p4info='{ONE_P4INFO}';one_p4blob='{ONE_P4BLOB}'")
        cmd = ns.prefix() + [ptf_bin, "--test-dir", str(SUITE), "--pypath", str(SUITE),
                             "--log-file", str(logdir / "ptf.log"), "--test-params", params,
                             "--default-negative-timeout", "0.1", "--xunit", "--xunit-dir", str(logdir / "xunit")]
        for (d, p), ifc in sorted(ifaces.items()):
            cmd += ["-i", f"{d}-{p}@{ifc}"]
        # P4ROTOR_PTF_ONLY="rotor_tests.NightDropsAndCounts,..." runs a subset (development).
        only = [x for x in os.environ.get("P4ROTOR_PTF_ONLY", "").split(",") if x]
        cmd += only
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
        output = r.stdout + r.stderr
        (logdir / "ptf-output.txt").write_text(output)
        results = read_xunit(logdir / "xunit")
        logs = {f"switch{i}": s.log_tail(80) for i, s in enumerate(switches)}
    return results, output, logs


@pytest.mark.parametrize("name", [t for t, _ in TESTS])
def test_ptf(name, ptf_results):
    results, output, logs = ptf_results
    res, detail = results.get(name, (None, ""))
    only = [x for x in os.environ.get("P4ROTOR_PTF_ONLY", "").split(",") if x]
    if only and name not in only:
        pytest.skip("not selected by P4ROTOR_PTF_ONLY")
    if res == "ok":
        return
    # Failure: ptf's own report for this test and the switch logs.
    msg = f"ptf {name}: {res or 'no result in the xUnit report (crashed?): ' + output[-3000:]}\n{detail[-6000:]}\n" + "\n".join(
        f"--- {k} log (tail) ---\n{v}" for k, v in logs.items())
    if res and res.startswith("skipped"):
        pytest.skip(msg)
    pytest.fail(msg, pytrace=False)
