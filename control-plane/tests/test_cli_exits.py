"""Every way `p4rotor control` stops ends with its summary and the documented exit status
(docs/controller.md, "Exit statuses"): duration over, SIGINT, SIGTERM -> 0; a switch that never
answers -> 1 with a one-line error; another controller primary -> 3 with a one-line error.  The controller runs as a real process (its signal handling
is what is tested) against the in-process fake P4Runtime server (no switch needed).

Before: signal-timed mode exited 141 (SIGPIPE, set to SIG_DFL for `| head`) in 2 of 3 runs,
without its last lines.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from p4rotor import schedule as S
from p4rotor.control.status import read_status

from fake_p4rt import FakeSwitch

DATA = Path(__file__).parent / "data"
SUMMARY = "switches installed"  # the summary, printed however the run stops


@pytest.fixture
def fake_switch():
    """A fake P4Runtime server on its own event loop thread (the controller is another process)."""
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    fake = asyncio.run_coroutine_threadsafe(FakeSwitch(DATA / "rotor.p4info.txtpb").start(), loop).result(10)
    yield fake
    asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    t.join(5)


@pytest.fixture
def procs():
    """Every controller a test starts is killed at its end, whatever happened."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


def _start(tmp_path: Path, port: int, *extra: str, sigint_ignored: bool = False) -> tuple[subprocess.Popen, Path]:
    build = tmp_path / "build"
    build.mkdir(exist_ok=True)
    (build / "rotor.json").write_text("{}")  # the fake server takes any pipeline
    shutil.copy(DATA / "rotor.p4info.txtpb", build / "rotor.p4info.txtpb")
    sched = tmp_path / "s.json"
    sched.write_text(S.generate_rotornet(4, 1, 20_000, 2_000).dumps())
    status = tmp_path / "status.json"
    cmd = [sys.executable, "-m", "p4rotor.cli", "control", "--schedule", str(sched),
           "--switch", f"rotor0=127.0.0.1:{port}", "--build-dir", str(build), "--mode", "signal",
           "--signal-timed", "--ack-every", "1", "--lead", "0.3", "--connect-timeout", "3",
           "--status-file", str(status), *extra]
    if sigint_ignored:
        # As a shell starts a background job (`... &`, nohup): SIGINT is SIG_IGN on entry.  The
        # shell does it (`trap '' INT` survives exec), not a preexec_fn: this process has gRPC
        # threads, and forking it to run Python code before exec is unsafe.
        cmd = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), status


def _running(status: Path, proc: subprocess.Popen, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while (read_status(status) or {}).get("phase") != "running":
        assert proc.poll() is None, f"controller exited early: {proc.communicate()}"
        assert time.monotonic() < deadline, "controller never running"
        time.sleep(0.05)
    time.sleep(0.5)  # a few slots


@pytest.mark.parametrize("run", range(3))
def test_duration_over_exits_0_with_summary(fake_switch, tmp_path, procs, run):
    proc, status = _start(tmp_path, fake_switch.port, "--duration", "1.5")
    procs.append(proc)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, f"exit {proc.returncode}: {err[-2000:]}"
    assert SUMMARY in err, err[-2000:]
    assert read_status(status)["phase"] == "stopped"


@pytest.mark.parametrize("sig,background", [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["SIGINT", "SIGTERM", "SIGINT-background-job"])
def test_signal_exits_0_with_summary(fake_switch, tmp_path, procs, sig, background):
    """background: started as a shell starts `p4rotor control ... &` (SIGINT ignored on entry);
    it used to ignore the SIGINT the launcher stops it with (found in a fresh-machine run)."""
    proc, status = _start(tmp_path, fake_switch.port, sigint_ignored=background)
    procs.append(proc)
    _running(status, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, f"exit {proc.returncode}: {err[-2000:]}"
    assert SUMMARY in err, err[-2000:]
    assert read_status(status)["phase"] == "stopped"


def test_unreachable_switch_exits_1_one_line(tmp_path, procs):
    port = 1  # nothing listens there
    proc, status = _start(tmp_path, port, "--duration", "1")
    procs.append(proc)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("p4rotor: error:") and "unreachable" in lines[-1], err
    st = read_status(status)
    assert st["phase"] == "failed" and "unreachable" in st["error"]


def test_closed_stdout_is_a_quiet_exit_0(tmp_path):
    """`p4rotor routes ... | head -1`: the reader goes away; no traceback, status 0."""
    sched = tmp_path / "s.json"
    sched.write_text(S.generate_opera(16, 4, 1200, 100).dumps())
    p = subprocess.run(f"{sys.executable} -m p4rotor.cli routes --schedule {sched} --slice 0 | head -1",
                       shell=True, capture_output=True, text=True, executable="/bin/bash")
    assert p.stdout.count("\n") == 1
    assert "Traceback" not in p.stderr and "Error" not in p.stderr, p.stderr
    q = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m p4rotor.cli routes "
                        f"--schedule {sched} --slice 0 | head -1 >/dev/null"], capture_output=True, text=True)
    assert q.returncode == 0, q.stderr


def test_another_primary_exits_3_one_line(fake_switch, tmp_path, procs):
    """A controller with a higher election id holds the switch: refused, one line, no traceback,
    exit 3 (docs/controller.md), nothing written."""
    fake_switch.primary_election_id = 50
    proc, status = _start(tmp_path, fake_switch.port, "--duration", "5", "--election-id", "20")
    procs.append(proc)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    errors = [ln for ln in err.splitlines() if ln.startswith("p4rotor: error:")]
    assert errors == [err.strip().splitlines()[-1]], err
    assert "another controller is primary (its election id 50, ours 20)" in errors[0], err
    assert "Traceback" not in err, err
    st = read_status(status)
    assert st["phase"] == "failed" and "another controller is primary" in st["error"]
    assert not fake_switch.writes
