"""What the CLI fuzz tests share: one in-process run of ``p4rotor`` under a time and memory limit,
the contract every run must keep, and small valid input files to mutate.

The contract (issue #56): no exception but SystemExit escapes main(), no run takes longer than
``CASE_SECONDS``, the exit status is 0 or 2 (``workload compare``: also 1, results that differ), a refusal (2) is exactly one line on stderr, and a
refusal writes no output file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
from pathlib import Path

import pytest

from p4rotor import schedule as S
from p4rotor.cli import main
from p4rotor.schedule import topology as TP

ROOT = Path(__file__).resolve().parents[2]
CASE_SECONDS = 20           # a case taking longer is a hang
MEMORY_HEADROOM = 3 * 2 ** 30  # address space a case may add before MemoryError (the memory guard)
# Cases per fuzz test: P4ROTOR_FUZZ_EXAMPLES scales them (make fuzz sets it); the default keeps the
# whole suite within ~2 minutes on 2 cores.
SCALE = float(os.environ.get("P4ROTOR_FUZZ_EXAMPLES", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so the code under test cannot swallow it."""


def _alarm(signum, frame):
    raise Hang()


@contextlib.contextmanager
def memory_guard():
    """Cap the address space at what the process has now plus MEMORY_HEADROOM: a runaway case
    fails with MemoryError instead of taking the machine down."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[0]) * resource.getpagesize()
    cap = now + MEMORY_HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run(argv: list[str], seconds: int = CASE_SECONDS) -> tuple[int, str, str]:
    """``p4rotor ARGV`` in this process: (exit status, stdout, stderr).  Anything but SystemExit
    escaping main() fails the test with the exception and argv."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as ex:
                code = ex.code
    except Hang:
        pytest.fail(f"hang: over {seconds} s: p4rotor {_show(argv)}")
    except Exception as ex:  # a traceback for the user: the bug these tests exist for
        pytest.fail(f"traceback: {type(ex).__name__}: {str(ex)[:300]}\n  p4rotor {_show(argv)}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return (0 if code is None else code), out.getvalue(), err.getvalue()


def _show(argv: list[str]) -> str:
    return " ".join(a if len(a) < 80 else a[:60] + f"...({len(a)} chars)" for a in argv)


def check(argv: list[str], outputs: tuple[Path, ...] = (), *, refused: bool | None = None) -> tuple[int, str]:
    """Run and assert the contract; ``refused``: also assert exit 2 (True) or 0 (False).
    ``outputs``: files the command would write (they must not exist before)."""
    for o in outputs:
        assert not o.exists(), f"{o} exists before the run"
    code, _, err = run(argv)
    lines = err.strip().splitlines()
    ok = (0, 1, 2) if argv[:2] == ["workload", "compare"] else (0, 2)  # compare: 1 = the results differ
    assert code in ok, f"exit {code}: p4rotor {_show(argv)}\nstderr: {err[-500:]}"
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("p4rotor: error:"), \
            f"refusal not one line: p4rotor {_show(argv)}\nstderr: {err[-500:]!r}"
        for o in outputs:
            assert not o.exists(), f"refused, but {o} was written: p4rotor {_show(argv)}"
            left = [p.name for p in o.parent.glob(f".{o.name}.*")] if o.parent.is_dir() else []
            assert not left, f"refused, but left {left}"
    if refused is not None:
        assert (code == 2) == refused, f"exit {code}, expected {'2' if refused else '0'}: p4rotor {_show(argv)}\n{err}"
    return code, err


# ---- valid inputs, small so that a run is milliseconds -------------------------------------------
def valid_files(d: Path) -> dict[str, Path]:
    d.mkdir(parents=True, exist_ok=True)
    sched = S.generate_opera(4, 3, 1200, 100)
    sp = d / "schedule.json"
    sp.write_text(sched.dumps())
    rn = d / "rotornet.json"
    rn.write_text(S.generate_rotornet(4, 1, 1000, 0).dumps())
    topo = TP.generate(sched, str(sp), hosts_per_rack=1)
    tp = d / "topology.json"
    tp.write_text(topo.dumps())
    plan = d / "plan.json"
    plan.write_text(json.dumps({"version": 1, "faults": [
        {"kind": "loss", "start_us": 0, "end_us": 2000000, "rotor": "rotor0", "port": 1, "direction": "out",
         "rate": 0.01},
        {"kind": "switch-crash", "start_us": 1000000, "switch": "rotor1", "restart_after_us": 300000}]}))
    flows = d / "flows.json"
    flows.write_text(json.dumps({"version": 1, "columns": ["id", "src", "dst", "size", "start"],
                                 "meta": {"access_bps": 1e7, "duration_s": 1.0},
                                 "flows": [{"id": i, "src": f"h{i % 4}x0", "dst": f"h{(i + 1) % 4}x0",
                                            "size": 1460 * (i + 1), "start": 0.1 * i} for i in range(6)]}))
    csv = d / "flows.csv"
    csv.write_text("id,src,dst,size,start\n" + "".join(f"{i},h{i % 4}x0,h{(i + 1) % 4}x0,{1000 + i},{i * 0.1}\n"
                                                          for i in range(6)))
    matrices = d / "matrices.json"
    matrices.write_text(json.dumps([[[0, 1], [1, 2]], [[2, 3]]]))
    cdf = d / "my.cdf"
    cdf.write_text("# size prob\n1460 0\n1460 0.5\n14600 0.9\n146000 1\n")
    fct = d / "fct.json"
    fct.write_text(json.dumps(fct_doc()))
    run = d / "energy-run"  # what `p4rotor energy` reads: an fct run's fct.json and flows.json
    run.mkdir(exist_ok=True)
    (run / "fct.json").write_text(json.dumps(energy_fct_doc()))
    (run / "flows.json").write_text(json.dumps(energy_flows_doc()))
    model = d / "power.json"
    model.write_text((ROOT / "topologies" / "energy" / "lpi.json").read_text())
    lb = d / "energy-rotorlb"  # ... or a rotorlb run's rotorlb.json
    lb.mkdir(exist_ok=True)
    (lb / "rotorlb.json").write_text(json.dumps(energy_rotorlb_doc()))
    cal = d / "calibration.json"
    cal.write_text(json.dumps(calibration_doc()))
    fct_cal = d / "fct-cal.json"
    fct_cal.write_text(json.dumps(fct_cal_doc()))
    return {"calibration": cal, "fct_cal": fct_cal, "schedule": sp, "rotornet": rn, "topology": tp, "plan": plan, "flows": flows, "csv": csv,
            "matrices": matrices, "cdf": cdf, "fct": fct, "energy_run": run, "energy_fct": run / "fct.json",
            "energy_flows": run / "flows.json", "power": model, "energy_rotorlb": lb / "rotorlb.json"}


def energy_flows_doc() -> dict:
    """A flow list on the FCT experiment's fabric (8 racks x 2 hosts), 6 flows."""
    hosts = {f"h{r}x{i}": {"rack": r} for r in range(8) for i in range(2)}
    return {"version": 1, "columns": ["id", "src", "dst", "size", "start"],
            "meta": {"access_bps": 5.768e6, "mss": 1460, "header_bytes": 54, "hosts": hosts},
            "flows": [{"id": i, "src": f"h{i % 8}x0", "dst": f"h{(i + 3) % 8}x1", "size": 1460 * (1 + 20 * i),
                       "start": 0.05 * i} for i in range(6)]}


def energy_rotorlb_doc() -> dict:
    """A rotorlb.json with what `p4rotor energy` reads: the schedule, dilation, cycles, per matrix
    the pairs and RotorLB's delivered rate and slot capacity."""
    rows = [{"density": 1, "pairs": [[1, 2]], "rotorlb": {"throughput_fps": 100.0, "capacity_frames": 20}},
            {"density": 3, "pairs": [[0, 1], [2, 3], [3, 0]], "rotorlb": {"throughput_fps": 300.0, "capacity_frames": 20}}]
    return {"schedule": json.loads(S.generate_rotornet(4, 1, 1000, 100).dumps()), "dilation": 200.0, "cycles": 2,
            "rows": rows}


def energy_fct_doc() -> dict:
    """An fct.json with what `p4rotor energy` reads: dilation, epsilon, per-flow [id, class, bucket, FCT, size]."""
    per = [[i, "low-latency" if i % 2 else "bulk", "<100KB", 0.01 + 0.2 * i, 1460 * (1 + 20 * i)] for i in range(6)]
    mode = {"per_flow": per, "alone_envelope": {"floor_s": 0.0017}}
    return {"workload": "websearch", "load": 0.1, "dilation": 100.0, "epsilon_us": 150.0,
            "modes": {"opera": mode, "rotornet": dict(mode)}}


def fct_doc() -> dict:
    """A small fct.json of the shape ``p4rotor experiment fct`` writes (the fields compare and table read)."""
    bucket = {"flows": 3, "unfinished": 0, "fct_mean_s": 0.01, "fct_p50_s": 0.01, "fct_p99_s": 0.02,
              "slowdown_mean": 1.5, "slowdown_p99": 2.0}
    mode = {"unfinished": 0, "stable": True, "per_flow": [[0, "bulk", "small", 0.01], [1, "bulk", "small", 0.012],
                                                          [2, "bulk", "small", 0.011]],
            "classes": {"bulk": {"small": bucket}}}
    return {"workload": "websearch", "load": 0.1, "flows": 3, "modes": {"opera": mode, "rotornet": dict(mode)}}


def calibration_doc() -> dict:
    """A calibration.json (``experiment fct --calibrate-only``) of the fabric ``fct_cal_doc`` ran on."""
    from p4rotor.workload import ideal as I

    one = [("1-1", 0.7e-3 + i * 1e-5, i % 2) for i in range(40)] + [("2-2", 0.9e-3 + i * 1e-5, i % 2) for i in range(40)]
    sized = [("1-1", n * 1448, 0.7e-3 + (n - 1) * 2e-3, r) for n in (1, 2, 5) for r in range(2)]
    cal = I.calibration_from(one, sized, 5.77e6, {"emulation": "fabric", "target": "ebpf", "racks": 4, "dilation": 100.0})
    return {"fabric": cal.to_json()}


def fct_cal_doc() -> dict:
    """An fct.json whose per_flow rows keep their path class: what ``workload redivide`` reads."""
    per = [[i, "low-latency", "<100KB", 0.8e-3 + 1e-4 * i, 100 + 1000 * i, ("1-1", "2-2", "none")[i % 3]]
           for i in range(6)]
    return {"workload": "websearch", "load": 0.1, "flows": 6, "calibration": calibration_doc(),
            "modes": {"opera": {"unfinished": 0, "per_flow": per}}}


# ---- fixtures the fuzz modules share (imported there: pytest finds them by name) -------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return valid_files(tmp_path_factory.mktemp("valid"))


@pytest.fixture(scope="module", autouse=True)
def _guard():
    with memory_guard():
        yield
