"""The rotor on the eBPF target (p4src/psa/rotor.p4, NIKSS): the adapter's translation of the
controller's entities (always), and the program itself in the kernel (where p4c-ebpf, clang and
nikss-ctl exist): every frame leaves on the circuit of the slot it arrived in, none in a night,
and every frame is delivered or counted by cause; nothing stays loaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import finsy as fy
import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor import schedule as S
from p4rotor.control.nikss import NikssError, NikssSwitch, cli_runner
from p4rotor.control.target import EBPF

from nikss_recorder import Recorder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
P4INFO = HERE / "data" / "ebpf-rotor.p4info.txtpb"
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build")) / "ebpf"


def sched(slot_us: int = 1000, night_us: int = 100) -> S.Schedule:
    return S.from_json({"version": 1, "racks": 4, "slot_us": slot_us, "reconfig_us": night_us,
                        "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2], [2, 3, 0, 1]]}]})


def test_adapter_writes_the_controllers_entities_with_ifindexes_and_phase_in_grains():
    rec = Recorder()
    sw = NikssSwitch("r0", 7, P4INFO, {1: 11, 2: 12, 3: 13, 4: 14}, runner=rec)
    s = sched()
    sw.write(C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=5000, target=EBPF))
    circuit = [c for c in rec.calls if c[4] == "RotorIngress_circuit_circuit"]
    assert ["table", "add", "pipe", "7", "RotorIngress_circuit_circuit", "action", "name",
            "RotorIngress_circuit_connect", "key", "0", "11", "data", "12"] in circuit
    assert len(circuit) == 8
    phase = [c for c in rec.calls if c[4] == "RotorIngress_slot_state_clock_phase"]
    slot = EBPF.duration_units(1000)
    assert phase == [["table", "add", "pipe", "7", "RotorIngress_slot_state_clock_phase", "action", "name",
                      "RotorIngress_slot_state_clock_slot", "key", str(i), "data", str(i), str(i * slot),
                      str((i + 1) * slot)] for i in (0, 1)]
    cfg = rec.calls[-1]
    assert cfg[:5] == ["table", "default", "set", "pipe", "7"]
    assert cfg[-8:] == ["2", "2", "0", str(EBPF.to_units(5000)), str(2 * slot),
                        str(EBPF.duration_units(100)), "1", str(slot)]


def test_adapter_refuses_a_port_that_is_not_attached_and_a_table_it_lacks():
    rec = Recorder()
    sw = NikssSwitch("r0", 7, P4INFO, {1: 11}, runner=rec)
    s = sched()
    with pytest.raises(NikssError, match="r0: .*port 2, which is not attached"):
        sw.write(C.circuit_entries(s.rotors[0], C.default_port_map(4)))
    with pytest.raises(NikssError, match="TorIngress.port_mtu.port_mtu is not in the eBPF program"):
        sw.write([fy.P4TableEntry(dp.TOR_T_PORT_MTU, match=fy.P4TableMatch(port=1),
                                  action=fy.P4TableAction(dp.TOR_A_MTU_LIMIT, max_frame_bytes=1500))])


def test_adapter_writing_over_updates_an_entry_that_exists_and_refuses_otherwise():
    """``write(over=True)``: an insert the table already holds becomes an update (a controller
    writing a switch it did not clear); any other failure, or without ``over``, is raised."""

    class Exists(Recorder):
        def __call__(self, args):
            super().__call__(args)
            if args[1] == "add" and args[4] == "RotorIngress_circuit_circuit":
                raise NikssError(f"nikss-ctl {' '.join(args[:5])}: failed to set up entry: File exists")
            return ""

    s = sched()
    ents = C.circuit_entries(s.rotors[0], C.default_port_map(4))
    rec = Exists()
    NikssSwitch("r0", 7, P4INFO, {1: 11, 2: 12, 3: 13, 4: 14}, runner=rec).write(ents, over=True)
    updates = [c for c in rec.calls if c[1] == "update"]
    assert len(updates) == 8 and all(c[4] == "RotorIngress_circuit_circuit" for c in updates)
    assert ["table", "update", "pipe", "7", "RotorIngress_circuit_circuit", "action", "name",
            "RotorIngress_circuit_connect", "key", "0", "11", "data", "12"] in updates
    with pytest.raises(NikssError, match="File exists"):
        NikssSwitch("r0", 7, P4INFO, {1: 11, 2: 12, 3: 13, 4: 14}, runner=Exists()).write(ents)


def test_adapter_leaves_out_the_rotor_mtu_check_only_when_every_link_has_one_mtu():
    # The PSA rotor has no MTU table: the ToR before it checked the same MTU (docs/targets.md).
    rec = Recorder()
    sw = NikssSwitch("r0", 7, P4INFO, {1: 11, 2: 12}, runner=rec)
    sw.write(C.port_mtu_entries({1: 1500, 2: 1500}))
    assert rec.calls == []
    with pytest.raises(NikssError, match="different MTUs"):
        sw.write(C.port_mtu_entries({1: 1500, 2: 9000}))


# The rotor tables the controller writes on eBPF: the v1model names, actions and parameters;
# the differences are the ones docs/targets.md gives (the phase table keyed by grains, the
# config's grain; no port_mtu and no control packets on this target).
EBPF_TABLES = (dp.T_CONFIG, dp.T_CLOCK_PHASE, dp.T_CIRCUIT, dp.T_LOSS_IN, dp.T_LOSS_OUT)


def test_ebpf_p4info_has_the_v1model_rotors_tables_actions_and_parameters():
    import finsy as fy

    psa, v1 = fy.P4Schema(P4INFO), fy.P4Schema(HERE / "data" / "rotor.p4info.txtpb")
    for name in EBPF_TABLES:
        t, t1 = psa.tables[name], v1.tables[name]
        assert sorted(a.name for a in t.actions) == sorted(a.name for a in t1.actions), name
        keys = [f.name for f in t.match_fields]
        assert keys == (["phase_grains"] if name == dp.T_CLOCK_PHASE else [f.name for f in t1.match_fields]), name
        for a in t.actions:
            extra = ["grain"] if a.name == dp.A_CONFIGURE else []
            assert [p.name for p in psa.actions[a.name].params] == \
                [p.name for p in v1.actions[a.name].params] + extra, a.name


def test_built_ebpf_p4info_matches_the_fixture():
    built = BUILD / "rotor.p4info.txtpb"
    if not built.exists():
        pytest.skip(f"SKIPPED: {built} not built (make build-ebpf; needs p4c-ebpf)")
    assert built.read_text() == P4INFO.read_text(), \
        f"tests/data/ebpf-rotor.p4info.txtpb is stale: copy {built} over it"


def test_adapter_refuses_a_ternary_mask_the_program_does_not_look_up():
    # The programs walk TERNARY_MASKS masks per table: an entry under a third would be taken by
    # NIKSS and never matched, so it is refused in one line naming the field and the mask.
    rec = Recorder()
    sw = NikssSwitch("r0", 7, P4INFO, {1: 11}, runner=rec)
    sw.write(C.loss_entries([C.LinkLoss(port=1, direction="in", rate=0.5, matching=1),
                             C.LinkLoss(port=1, direction="out", rate=0.5)]))
    keys = [c[c.index("key") + 1:c.index("data")] for c in rec.calls]
    assert keys == [["11", "1^65535"], ["11", "0^0"]]
    bad = fy.P4TableEntry(dp.T_LOSS_IN, match=fy.P4TableMatch(port=1, matching=(1, 0xFF)),
                          action=fy.P4TableAction(dp.A_LOSSY, threshold_=1), priority=2)
    with pytest.raises(NikssError, match=r"r0: .*loss_in\.matching mask 0xff: .* 2 masks"):
        sw.write([bad])


def test_built_ebpf_programs_look_up_as_many_ternary_masks_as_the_adapter_writes():
    from p4rotor.control.nikss import TERNARY_MASKS

    built = BUILD / "rotor.c"
    if not built.exists():
        pytest.skip(f"SKIPPED: {built} not built (make build-ebpf; needs p4c-ebpf)")
    bounds = {line.split()[1]: int(line.split()[2]) for line in built.read_text().splitlines()
              if line.startswith("#define MAX_") and line.split()[1].endswith("_KEY_MASKS")}
    assert bounds and set(bounds.values()) == {TERNARY_MASKS}, bounds


# -- in the kernel ------------------------------------------------------------------------


def _kernel_skip() -> str | None:
    from p4rotor.fabric.nikss import missing_tools

    miss = missing_tools()
    for f in (BUILD / "rotor.o", BUILD / "xdp_pass.o"):
        if not f.exists():
            miss.append(f"{f} (run 'make build-ebpf')")
    if os.geteuid() != 0:
        miss.append("root")
    return f"eBPF rotor not tested: missing {', '.join(miss)}" if miss else None


_RECV = ("import socket,struct,sys,time,json\n"
         "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x88B5));s.bind((sys.argv[1],0))\n"
         "s.settimeout(0.1);print('ready',flush=True);end=time.monotonic()+float(sys.argv[2]);got=[]\n"
         "while time.monotonic()<end:\n"
         " try:f=s.recv(2048)\n except socket.timeout:continue\n"
         " got.append(struct.unpack('!Q',f[14:22])[0])\n"
         "print(json.dumps(got))\n")


# Frames with their send time (ns, the kernel clock) every 0.5 ms for SECONDS; prints how many.
_SEND = ("import socket,struct,sys,time\n"
         "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind((sys.argv[1],0));n=0\n"
         "end=time.monotonic()+float(sys.argv[2])\n"
         "while time.monotonic()<end:\n"
         " s.send(bytes(12)+b'\\x88\\xb5'+struct.pack('!Q',time.clock_gettime_ns(time.CLOCK_MONOTONIC))"
         "+bytes(40));n+=1;time.sleep(0.0005)\n"
         "print(n)\n")


def _receiver(ns: str, iface: str, seconds: float) -> subprocess.Popen:
    """A capture of the send timestamps of what arrives on ``iface``; returns once it listens."""
    p = subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c", _RECV, iface, str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


@pytest.mark.skipif(_kernel_skip() is not None, reason=_kernel_skip() or "")
@pytest.mark.parametrize("writer", ["nikss-ctl", "maps"])
def test_rotor_in_the_kernel_follows_the_clock_and_counts_every_frame(writer):
    # writer: every entry through nikss-ctl, or the exact tables and defaults written on the
    # pinned maps in-process (control/nikss_maps.py), the rest through nikss-ctl.
    from p4rotor.control.nikss_maps import map_runner
    from p4rotor.fabric.nikss import ebpf_bench, leftover_pipelines

    slot_us, night_us = 100_000, 20_000
    s = sched(slot_us, night_us)
    ns_name = None
    with ebpf_bench(BUILD / "rotor.o", BUILD / "xdp_pass.o") as (ns, sw, far):
        ns_name = ns.name
        runner = cli_runner(ns.name) if writer == "nikss-ctl" else map_runner(sw.pipeline, cli_runner(ns.name))
        ctl = NikssSwitch("r0", sw.pipeline, BUILD / "rotor.p4info.txtpb", sw.ports, runner=runner)
        epoch_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000 + 100_000
        ctl.write(C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=epoch_us,
                                   target=EBPF))
        if writer == "maps":
            assert runner.in_process == ctl.entries_written and runner.fallen_back == 0
        rx = {p: _receiver(ns.name, far[p], 4.0) for p in (2, 3)}
        sent = int(subprocess.run(["ip", "netns", "exec", ns.name, "python3", "-c", _SEND, far[1], "1.0"],
                                  capture_output=True, text=True, check=True).stdout)
        got = {p: json.loads(r.communicate(timeout=30)[0]) for p, r in rx.items()}
        drops = ctl.drops()
        rxc = ctl.counter("RotorIngress.rx_port_counter")
        txc = ctl.counter("RotorEgress.tx_port_counter")
    cycle = 2 * EBPF.duration_units(slot_us)
    epoch = EBPF.to_units(epoch_us)
    # Judged by the send time, which comes before the switch's ingress time: a frame sent late in
    # a night may meet the day; one sent in a day never meets another matching (the night between
    # is 20 ms).
    slot, night_ns = EBPF.duration_units(slot_us), EBPF.duration_units(night_us)
    wrong, early = 0, []
    for port, want in ((2, 0), (3, 1)):
        for ts in got[port]:
            phase = (ts - epoch) % cycle   # EBPF time units are ns
            m, into = phase // slot, phase % slot
            if into < night_ns:
                early.append(night_ns - into)
            wrong += m != want
    delivered = len(got[2]) + len(got[3])
    assert wrong == 0
    assert max(early, default=0) < 5_000_000, f"a frame sent {max(early) / 1e6:.1f} ms before its day"
    assert rxc[1][0] == sent
    assert delivered == txc.get(2, (0, 0))[0] + txc.get(3, (0, 0))[0]
    assert sent == delivered + sum(drops.values()), (sent, delivered, drops)
    assert set(drops) <= {dp.DropCause.NIGHT, dp.DropCause.NOT_STARTED, dp.DropCause.STALE}, drops
    # STALE is the egress re-check: a frame whose ingress ran in the last microseconds of a day
    # meets the night at egress. Frames are 0.5 ms apart, so at most one per day end in the
    # second of sending (10 day ends, 11 with the partial slots at either side).
    assert drops.get(dp.DropCause.STALE, 0) <= 11, drops
    assert drops.get(dp.DropCause.NIGHT, 0) > 0 and len(got[2]) > 0 and len(got[3]) > 0
    assert leftover_pipelines() == []
    assert ns_name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_kernel_skip_names_what_is_missing():
    r = _kernel_skip()
    assert r is None or r.startswith("eBPF rotor not tested: missing ")
    if shutil.which("nikss-ctl") and r is not None:
        print(r)


def test_adapter_expands_unequal_spans_into_grains_and_refuses_a_cycle_of_too_many():
    rec = Recorder()
    sw = NikssSwitch("r0", 7, P4INFO, {1: 11, 2: 12, 3: 13, 4: 14}, runner=rec)
    spans = [(0, 300), (300, 1000)]   # a night-like span, then the rest: grain 100 us
    sw.write([+e for e in C.phase_entries(spans, target=EBPF)] +
             [~C.slot_config_entry(dp.MODE_CLOCK, 2, 1000, 100, target=EBPF)])
    keys = [(c[c.index("key") + 1], c[c.index("data") + 1]) for c in rec.calls if "RotorIngress_slot_state_clock_phase" in c]
    assert keys == [(str(q), "0") for q in range(3)] + [(str(q), "1") for q in range(3, 10)]
    assert rec.calls[-1][-1] == str(100_000)
    bad = NikssSwitch("r0", 7, P4INFO, {}, runner=Recorder())
    with pytest.raises(NikssError, match="is not up to 65536 grains"):
        bad.write([+e for e in C.phase_entries([(0, 1), (1, 70_000)], target=EBPF)] +
                  [~C.slot_config_entry(dp.MODE_CLOCK, 2, 70_000, 0, target=EBPF)])


def _register(pipeline: int, name: str, value: int | None = None) -> int:
    cmd = ["nikss-ctl", "register", "set" if value is not None else "get", "pipe", str(pipeline), name,
           "index", "0"] + (["value", str(value)] if value is not None else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return 0 if value is not None else int(json.loads(out)[name][0]["value"]["field0"], 16)


@pytest.mark.skipif(_kernel_skip() is not None, reason=_kernel_skip() or "")
def test_a_cycle_start_ahead_of_a_frames_clock_is_taken_from_the_epoch_again():
    """Ingress runs on several CPUs at once: a frame may read the clock, then find the cycle
    registers moved by another CPU to a cycle that began after that reading.  The switch then
    counts from the epoch again, for that frame, and stays on the epoch's grid: here the start is
    set 10.05 cycles ahead of now (off the grid), and every frame after still crosses the matching
    of its send time, and the registers come back onto the grid.  (Before: now - start wrapped,
    every such frame was dropped NOT_STARTED while the start ran ahead, and a ToR was later found
    with a start 152.8 ms off the grid: docs/notes/datamining-40.md.)"""
    from p4rotor.fabric.nikss import ebpf_bench

    slot_us, night_us = 100_000, 20_000
    s = sched(slot_us, night_us)
    start_reg = "RotorIngress_slot_state_clock_cycle_start"
    with ebpf_bench(BUILD / "rotor.o", BUILD / "xdp_pass.o") as (ns, sw, far):
        ctl = NikssSwitch("r0", sw.pipeline, BUILD / "rotor.p4info.txtpb", sw.ports, runner=cli_runner(ns.name))
        epoch_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000 - 1_000_000
        ctl.write(C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=epoch_us,
                                   target=EBPF))
        send = ["ip", "netns", "exec", ns.name, "python3", "-c", _SEND, far[1]]
        subprocess.run(send + ["0.05"], capture_output=True, check=True)  # the registers now hold a cycle
        cycle = 2 * EBPF.duration_units(slot_us)
        # Ahead of every frame sent below (10.05 cycles: 2 s), and off the epoch's grid.
        ahead = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 10 * cycle + cycle // 20
        _register(sw.pipeline, start_reg, ahead)
        assert _register(sw.pipeline, start_reg) == ahead
        rx = {p: _receiver(ns.name, far[p], 3.0) for p in (2, 3)}
        sent = int(subprocess.run(send + ["1.0"], capture_output=True, text=True, check=True).stdout)
        got = {p: json.loads(r.communicate(timeout=30)[0]) for p, r in rx.items()}
        drops = ctl.drops()
        start_after = _register(sw.pipeline, start_reg)
    epoch = EBPF.to_units(epoch_us)
    slot = EBPF.duration_units(slot_us)
    wrong = sum((((ts - epoch) % cycle) // slot) != want for port, want in ((2, 0), (3, 1)) for ts in got[port])
    assert len(got[2]) > 0 and len(got[3]) > 0, (sent, drops)
    assert wrong == 0, f"{wrong} frames crossed another matching than their send time's"
    assert (start_after - epoch) % cycle == 0, "the cycle start is off the epoch's grid"
    assert start_after <= time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert drops.get(dp.DropCause.NOT_STARTED, 0) == 0, drops


@pytest.mark.skipif(_kernel_skip() is not None, reason=_kernel_skip() or "")
def test_a_generation_read_before_its_start_is_written_counts_from_the_epoch():
    """The cycle registers are three writes; a frame on another CPU may read the generation of
    this config before the start that goes with it is written.  Here the generation is set to
    the config's while the start still holds 0 (as after load), and the epoch is half a cycle
    off the grid of 0: every frame still crosses the matching of its send time and the start
    lands on the epoch's grid.  (Before: the start was stepped from 0, a whole run's slices
    were half a cycle off, and a rotor of a Data Mining 25 % run was once found dropping
    200 000 frames NIGHT: docs/notes/datamining-40.md.)"""
    from p4rotor.fabric.nikss import ebpf_bench

    slot_us, night_us = 100_000, 20_000
    s = sched(slot_us, night_us)
    prefix = "RotorIngress_slot_state_clock_"
    with ebpf_bench(BUILD / "rotor.o", BUILD / "xdp_pass.o") as (ns, sw, far):
        ctl = NikssSwitch("r0", sw.pipeline, BUILD / "rotor.p4info.txtpb", sw.ports, runner=cli_runner(ns.name))
        cycle_us = 2 * slot_us
        now_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        epoch_us = (now_us - 2_000_000) // cycle_us * cycle_us + cycle_us // 2
        ctl.write(C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=epoch_us,
                                   generation=7, target=EBPF))
        assert _register(sw.pipeline, prefix + "cycle_start") == 0
        _register(sw.pipeline, prefix + "generation", 7)
        rx = {p: _receiver(ns.name, far[p], 3.0) for p in (2, 3)}
        send = ["ip", "netns", "exec", ns.name, "python3", "-c", _SEND, far[1]]
        sent = int(subprocess.run(send + ["1.0"], capture_output=True, text=True, check=True).stdout)
        got = {p: json.loads(r.communicate(timeout=30)[0]) for p, r in rx.items()}
        drops = ctl.drops()
        start_after = _register(sw.pipeline, prefix + "cycle_start")
    epoch = EBPF.to_units(epoch_us)
    cycle, slot = EBPF.duration_units(cycle_us), EBPF.duration_units(slot_us)
    wrong = sum((((ts - epoch) % cycle) // slot) != want for port, want in ((2, 0), (3, 1)) for ts in got[port])
    assert len(got[2]) > 0 and len(got[3]) > 0, (sent, drops)
    assert wrong == 0, f"{wrong} frames crossed another matching than their send time's"
    assert (start_after - epoch) % cycle == 0, "the cycle start is off the epoch's grid"
