"""The CLI's contract: exit codes, one-line errors, files written."""

import json
import subprocess
import sys

import pytest

from p4rotor import cli
from p4rotor import schedule as S


def run(*args):
    return subprocess.run([sys.executable, "-m", "p4rotor.cli", *args], capture_output=True, text=True)


def test_generate_check_show_plot(tmp_path):
    out = tmp_path / "o.json"
    r = run("schedule", "generate", "opera", "--racks", "8", "--rotors", "4", "--slot-us", "1000",
            "--reconfig-us", "100", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["kind"] == "opera"
    r = run("schedule", "check", str(out))
    assert r.returncode == 0 and "ok" in r.stdout
    png = tmp_path / "o.png"
    r = run("schedule", "show", str(out), "--slices", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert "diameter" in r.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_generate_to_stdout_is_valid():
    r = run("schedule", "generate", "rotornet", "--racks", "6", "--rotors", "5", "--slot-us", "100")
    assert r.returncode == 0
    assert json.loads(r.stdout)["racks"] == 6


@pytest.mark.parametrize("content,needle", [
    ("{", "bad JSON"),
    ('{"version": 9}', "unknown schedule version"),
    ('{"version":1,"racks":2,"slot_us":10,"reconfig_us":1,"rotors":[{"name":"a","matchings":[[0,0]]}]}',
     "not a permutation"),
])
def test_check_bad_exit2_one_line(tmp_path, content, needle):
    p = tmp_path / "bad.json"
    p.write_text(content)
    r = run("schedule", "check", str(p))
    assert r.returncode == 2
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_generate_bad_args_exit2():
    r = run("schedule", "generate", "opera", "--racks", "8", "--rotors", "4", "--slot-us", "1000",
            "--reconfig-us", "400")
    assert r.returncode == 2
    assert "dark at once" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (("--seed", "x"), "argument --seed: invalid int value: 'x'"),
    (("--seed", "1.5"), "argument --seed: invalid int value: '1.5'"),
    (("--racks",), "argument --racks: expected one argument"),
    (("--bogus", "1"), "unrecognized arguments: --bogus 1"),
])
def test_argparse_errors_are_one_line_exit2_nothing_written(tmp_path, args, needle):
    """Issue #15's bad input (``--seed`` not an int) and every other argparse refusal: one line,
    naming the command's help, exit 2, no schedule written."""
    out = tmp_path / "o.json"
    base = ["--racks", "16", "--rotors", "4", "--slot-us", "1200", "--reconfig-us", "100", "-o", str(out)]
    r = run("schedule", "generate", "opera", *base, *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "--help" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_control_bad_switch_spec(tmp_path):
    s = tmp_path / "s.json"
    assert run("schedule", "generate", "rotornet", "--racks", "4", "--rotors", "1", "--slot-us", "1000",
               "-o", str(s)).returncode == 0
    r = run("control", "--schedule", str(s), "--switch", "rotor0=localhost", "--build-dir", str(tmp_path))
    assert r.returncode == 2
    assert "pipeline" in r.stderr or "NAME=HOST:PORT" in r.stderr


def test_parser_has_commands():
    p = cli.build_parser()
    assert p.parse_args(["schedule", "check", "x"]).cmd == "schedule"


def test_control_clock_iface_must_name_a_switch(tmp_path):
    s = tmp_path / "s.json"
    assert run("schedule", "generate", "rotornet", "--racks", "4", "--rotors", "1", "--slot-us", "1000",
               "-o", str(s)).returncode == 0
    r = run("control", "--schedule", str(s), "--switch", "rotor0=127.0.0.1:50051",
            "--clock-iface", "rotorX=veth0", "--build-dir", str(tmp_path))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "no --switch named 'rotorX'" in r.stderr
    r = run("control", "--schedule", str(s), "--switch", "rotor0=127.0.0.1:50051",
            "--clock-iface", "rotor0", "--build-dir", str(tmp_path))
    assert r.returncode == 2 and "NAME=IFACE" in r.stderr


@pytest.fixture
def keep_signals(monkeypatch):
    """cli.main() installs process-wide SIGPIPE/SIGTERM handlers: not in pytest's process."""
    import signal

    monkeypatch.setattr(signal, "signal", lambda *a: None)


def test_experiment_option_it_does_not_take_is_bad_input(tmp_path, capsys, keep_signals):
    """--schedule on an experiment that takes none: one line, exit 2, nothing started."""
    sched = tmp_path / "s.json"
    sched.write_text(S.generate_rotornet(4, 1, 1000, 100).dumps())
    with pytest.raises(SystemExit) as ex:
        cli.main(["experiment", "duty-cycle", "--schedule", str(sched), "--output", str(tmp_path / "o")])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["p4rotor: error: experiment duty-cycle takes no --schedule"]
    assert not (tmp_path / "o").exists()


def test_type_error_inside_an_experiment_is_not_bad_input(monkeypatch, tmp_path, keep_signals):
    """A bug inside a running experiment stays a bug (traceback), not 'bad input' (exit 2)."""
    from p4rotor import experiments

    def broken(build, out, dilation=1.0):
        return None + 1  # TypeError from deep inside

    monkeypatch.setitem(experiments.EXPERIMENTS, "shuffle", broken)
    with pytest.raises(TypeError):
        cli.main(["experiment", "shuffle", "--output", str(tmp_path / "o")])


def test_run_json_records_the_commit_the_run_started_at(monkeypatch, tmp_path, keep_signals):
    """A commit made while an experiment runs (an FCT point takes an hour) is not the code that
    ran: run.json keeps the commit read before the run, with "+dirty" if the package differed."""
    from p4rotor import experiments
    from p4rotor.experiments import cli as ecli

    commits = iter(["a" * 40 + "+dirty", "b" * 40])
    monkeypatch.setattr(ecli, "code_commit", lambda mark_dirty=False: next(commits))

    def fake(build, out, dilation=1.0):
        out.mkdir(parents=True)
        return {"verdict": "ok"}

    monkeypatch.setitem(experiments.EXPERIMENTS, "shuffle", fake)
    cli.main(["experiment", "shuffle", "--output", str(tmp_path / "o")])
    got = json.loads((tmp_path / "o" / "run.json").read_text())
    assert got["code_commit"] == "a" * 40 + "+dirty" and got["results_commit"] is None


def test_control_topology_clock_ifaces(tmp_path):
    """--clock-iface with --topology: applied to the named switch's role (also when CorrOpt
    replans), an unknown name is one line and exit 2 before any switch is dialled."""
    from p4rotor import control as C
    from p4rotor.schedule import topology as TP
    from p4rotor.control.fabric_roles import fabric_roles

    topo = TP.generate(S.generate_opera(8, 4, 1000, 100), "s.json", hosts_per_rack=1)
    roles = fabric_roles(topo, tmp_path, clock_ifaces={"rotor1": "rotor1-clkh", "tor3": "tor3-clkh"})
    got = {r.spec.name: r.spec.clock_iface for r in roles}
    assert got["rotor1"] == "rotor1-clkh" and got["tor3"] == "tor3-clkh"
    assert sum(v is not None for v in got.values()) == 2
    with pytest.raises(C.ControllerError, match="no switch named 'tor9'"):
        fabric_roles(topo, tmp_path, clock_ifaces={"tor9": "x"})
    (tmp_path / "s.json").write_text(topo.schedule.dumps())
    (tmp_path / "t.json").write_text(json.dumps(topo.to_json()))
    for bad, needle in ((["--clock-iface", "tor9=veth0"], "no switch named 'tor9'"),
                        (["--clock-iface", "tor1=a", "--clock-iface", "tor1=b"], "tor1 given twice"),
                        (["--clock-iface", "=veth0"], "NAME=IFACE")):
        r = run("control", "--topology", str(tmp_path / "t.json"), "--build-dir", str(tmp_path), *bad)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


@pytest.mark.parametrize("flag, want", [([], None), (["--idle-poll"], True), (["--no-idle-poll"], False)])
def test_fct_idle_poll_flag_reaches_the_experiment(monkeypatch, tmp_path, keep_signals, flag, want):
    """``experiment fct --[no-]idle-poll``: passed on as given; absent, the experiment's default
    (poll) applies; another experiment does not take it (one line, exit 2)."""
    from p4rotor import experiments

    seen = {}

    def fake_fct(build, out, idle_poll="default"):
        seen["idle_poll"] = idle_poll
        return {"verdict": "ok"}

    monkeypatch.setitem(experiments.EXPERIMENTS, "fct", fake_fct)
    cli.main(["experiment", "fct", *flag, "--output", str(tmp_path / "o")])
    assert seen["idle_poll"] == ("default" if want is None else want)


def test_idle_poll_on_another_experiment_is_bad_input(tmp_path, capsys, keep_signals):
    with pytest.raises(SystemExit) as ex:
        cli.main(["experiment", "duty-cycle", "--no-idle-poll", "--output", str(tmp_path / "o")])
    assert ex.value.code == 2
    assert capsys.readouterr().err.strip() == "p4rotor: error: experiment duty-cycle takes no --idle-poll"


def test_record_activity_on_an_experiment_that_records_none_is_bad_input(tmp_path, capsys, keep_signals):
    with pytest.raises(SystemExit) as ex:
        cli.main(["experiment", "duty-cycle", "--record-activity", "--output", str(tmp_path / "o")])
    assert ex.value.code == 2
    assert capsys.readouterr().err.strip() == "p4rotor: error: experiment duty-cycle takes no --record-activity"
    assert not (tmp_path / "o").exists()
