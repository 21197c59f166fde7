"""The eBPF adapter's fast path (control/nikss_maps.py): exact tables and default actions written
in-process on a NIKSS pipeline's pinned maps.  Where nikss-ctl, the built programs and root exist:
the same entities written once through nikss-ctl and once through the map runner leave the
pipelines' maps byte for byte equal (adds, updates, deletes, a clear); its errors mean what
nikss-ctl's do; and its rate against nikss-ctl's is measured.  Everything else it hands to
nikss-ctl unchanged (always tested)."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import finsy as fy
import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor.control.nikss import PORT_PARAMS, NikssError, NikssSwitch, cli_runner
from p4rotor.control.bpf_maps import MAP_ARRAY, MAP_HASH, MAP_LPM_TRIE, dump_map, map_info, obj_get
from p4rotor.control.nikss_maps import MapRunner, map_runner
from p4rotor.control.target import EBPF

from nikss_recorder import Recorder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build")) / "ebpf"
BPFFS = Path("/sys/fs/bpf")


def _kernel_skip() -> str | None:
    from p4rotor.fabric.nikss import missing_tools

    miss = missing_tools()
    for f in ("rotor.o", "tor.o", "rotor.p4info.txtpb", "tor.p4info.txtpb"):
        if not (BUILD / f).exists():
            miss.append(f"{BUILD / f} (run 'make build-ebpf')")
    if os.geteuid() != 0:
        miss.append("root")
    return f"NIKSS map writes not tested: missing {', '.join(miss)}" if miss else None


kernel = pytest.mark.skipif(_kernel_skip() is not None, reason=_kernel_skip() or "")


def test_kernel_skip_names_what_is_missing():
    r = _kernel_skip()
    assert r is None or r.startswith("NIKSS map writes not tested: missing ")
    if r is not None:
        print(r)


# -- without a kernel: what goes to the fallback -----------------------------------------------

def test_commands_it_does_not_write_go_to_the_fallback_unchanged(tmp_path):
    # No pins under tmp_path: every command, table writes included, is nikss-ctl's.
    rec = Recorder()
    r = MapRunner(None, rec, bpffs=tmp_path)
    cmds = [["table", "add", "pipe", "7", "T", "action", "name", "A", "key", "1", "data", "2"],
            ["table", "delete", "pipe", "7", "T"],
            ["table", "default", "set", "pipe", "7", "T", "action", "name", "A"],
            ["counter", "get", "pipe", "7", "C"],
            ["pipeline", "show", "id", "7"]]
    for c in cmds:
        r(c)
    assert rec.calls == cmds and r.fallen_back == len(cmds) and r.in_process == 0
    other = MapRunner(8, rec, bpffs=tmp_path)       # another pipeline's commands: never looked at
    other(["table", "add", "pipe", "7", "T", "action", "name", "A", "key", "1"])
    assert rec.calls[-1][3] == "7" and other.fallen_back == 1


def test_a_switch_writes_the_maps_by_default():
    if not shutil.which("nikss-ctl"):
        pytest.skip("SKIPPED: nikss-ctl not installed (the default runner's fallback)")
    sw = NikssSwitch("t", 7, HERE / "data" / "ebpf-tor.p4info.txtpb", {})
    assert isinstance(sw.run, MapRunner) and sw.run.pipeline == "7"
    sw.close()


# -- in the kernel --------------------------------------------------------------------------------

@contextlib.contextmanager
def _pipelines(obj: Path, n: int):
    """``n`` pipelines of ``obj``, no ports (their maps are what is compared), unloaded after."""
    from p4rotor.fabric.nikss import Pipeline

    loaded = []
    try:
        for i in range(n):
            loaded.append(Pipeline.load(f"maps{i}", obj, "", {}))
        yield [p.id for p in loaded]
    finally:
        errors = [e for p in loaded for e in p.unload()]
        assert not errors, errors


def _dump(pipeline: int) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every hash, array and LPM map of the pipeline (tables, defaults, counters, registers),
    its entries as raw bytes; maps of maps and per-CPU maps are left out."""
    out = {}
    for pin in sorted((BPFFS / f"pipeline{pipeline}" / "maps").iterdir()):
        fd = obj_get(pin)
        try:
            if map_info(fd).type in (MAP_HASH, MAP_ARRAY, MAP_LPM_TRIE):
                out[pin.name] = dump_map(fd)
        finally:
            os.close(fd)
    return out


def _same_maps(a: int, b: int) -> dict[str, list]:
    da, db = _dump(a), _dump(b)
    assert da.keys() == db.keys()
    differ = [m for m in da if da[m] != db[m]]
    assert not differ, {m: (da[m][:3], db[m][:3]) for m in differ}
    return da


def _plain(e: fy.P4TableEntry, action: fy.P4TableAction | None = None) -> fy.P4TableEntry:
    """The entity without its update type (or with another action)."""
    return fy.P4TableEntry(e.table_id, match=e.match, action=action or e.action, priority=e.priority,
                           is_default_action=e.is_default_action)


def _flipped(e: fy.P4TableEntry) -> fy.P4TableEntry:
    """The entry with each numeric parameter but ports and the config's cycle (the grain divides
    it) changed, its low bit flipped (it stays within the field)."""
    keep = {p for a, p in PORT_PARAMS if a == str(e.action.name)} | {"cycle"}
    args = {k: (v if k in keep or not isinstance(v, int) else v ^ 1) for k, v in dict(e.action.args).items()}
    return _plain(e, fy.P4TableAction(e.action.name, **args))


def _tor_entities():
    from p4rotor.schedule import routes as R
    from p4rotor.schedule.topology import load

    topo = load(ROOT / "topologies" / "opera8-topo.json")
    k = topo.racks[0]
    ports = sorted(set(k.tor.uplinks.values()) | {h.port for h in k.hosts})
    ents = C.tor_entities(topo, k, R.compute(topo.schedule), dp.MODE_CLOCK, epoch_us=123_456, target=EBPF)
    return ents, {p: 20 + p for p in ports}


def _rotor_entities():
    from p4rotor import schedule as S

    s = S.from_json({"version": 1, "racks": 4, "slot_us": 1000, "reconfig_us": 100,
                     "rotors": [{"name": "r", "offset_us": 0, "matchings": [[1, 0, 3, 2], [2, 3, 0, 1]]}]})
    ents = C.rotor_entities(s, s.rotors[0], C.default_port_map(4), dp.MODE_CLOCK, epoch_us=5000, target=EBPF)
    ents += [+e for e in C.loss_entries([C.LinkLoss(1, "in", 0.5), C.LinkLoss(2, "out", 0.25, matching=1)])]
    return ents, {1: 11, 2: 12, 3: 13, 4: 14}


def _map_name(e: fy.P4TableEntry) -> str:
    return str(e.table_id).replace("TorEgress.port_mtu.", "TorIngress.port_mtu.").replace(".", "_")


def _exact(sw: NikssSwitch, e) -> bool:
    """A keyed entry of an exact table the PSA program has (the rotor's MTU table it lacks)."""
    try:
        t = sw.schema.tables[str(e.table_id).replace("TorEgress.port_mtu.", "TorIngress.port_mtu.")]
    except Exception:
        return False
    return all(f.match_type.name == "EXACT" for f in t.match_fields) and not e.is_default_action


@kernel
@pytest.mark.parametrize("prog", ["tor", "rotor"])
def test_map_writes_leave_the_same_bytes_as_nikss_ctl(prog):
    ents, ports = _tor_entities() if prog == "tor" else _rotor_entities()
    p4info = BUILD / f"{prog}.p4info.txtpb"
    with _pipelines(BUILD / f"{prog}.o", 2) as (ref, fast):
        slow = NikssSwitch("ref", ref, p4info, ports, runner=cli_runner())
        gone = Recorder()

        def fallback(args):
            gone(args)
            return cli_runner()(args)
        runner = map_runner(fast, fallback)
        quick = NikssSwitch("fast", fast, p4info, ports, runner=runner)
        try:
            for sw in (slow, quick):
                sw.write(ents)
            dumped = _same_maps(ref, fast)
            written = {c[4] for c in gone.calls}
            # Only the LPM and ternary tables' entries went to nikss-ctl ...
            assert written <= {"TorIngress_routing_rack_of", "RotorEgress_optical_loss_loss_in",
                               "RotorEgress_optical_loss_loss_out"}, written
            assert runner.in_process >= len(ents) - len(gone.calls) > 0
            # ... and every exact table and default the controller writes was written and compared.
            filled = {m for m, entries in dumped.items() if entries}
            for e in ents:
                if e.is_default_action:
                    assert _map_name(e) + "_defaultAction" in filled, _map_name(e)
                elif _exact(quick, e):
                    assert _map_name(e) in filled, _map_name(e)

            # Updates (each exact entry and each default changed) and deletes (half the entries).
            changed = [~_flipped(e) for e in ents if e.action is not None and (_exact(quick, e) or e.is_default_action)]
            assert changed
            for sw in (slow, quick):
                sw.write(changed)
            updated = _same_maps(ref, fast)
            touched = {_map_name(e) + ("_defaultAction" if e.is_default_action else "") for e in changed
                       if any(k not in {p for a, p in PORT_PARAMS} for k in dict(e.action.args))}
            assert not [m for m in touched if updated[m] == dumped[m]]
            dropped = [-_plain(e) for e in ents if _exact(quick, e)][::2]
            for sw in (slow, quick):
                sw.write(dropped)
            after = _same_maps(ref, fast)
            assert sum(len(v) for v in after.values()) < sum(len(v) for v in dumped.values())
            for sw in (slow, quick):
                sw.clear()
            _same_maps(ref, fast)
            assert {c[1] for c in gone.calls[-20:]} >= {"delete"}    # a clear is nikss-ctl's
        finally:
            runner.close()


@kernel
def test_errors_mean_what_nikss_ctls_mean():
    route = "TorIngress_routing_route"
    add = ["action", "name", "TorIngress_routing_via", "key", "3", "17", "0", "data", "5", "255", "1"]
    with _pipelines(BUILD / "tor.o", 2) as (ref, fast), map_runner(fast, cli_runner()) as runner:
        cli = cli_runner()
        cases = [(["table", "add", "pipe", "{p}", route, *add], "failed to set up entry: File exists"),
                 (["table", "update", "pipe", "{p}", route, *add[:4], "4", "17", "0", *add[7:]],
                  "failed to set up entry: No such file or directory"),
                 (["table", "delete", "pipe", "{p}", route, "key", "9", "9", "0"],
                  "failed to delete entry: No such file or directory"),
                 (["table", "add", "pipe", "{p}", route, "action", "name", "TorIngress_routing_nope", *add[3:]],
                  "TorIngress_routing_nope: action not found"),
                 (["table", "default", "set", "pipe", "{p}", route, "action", "name", "nope"], "nope: action not found")]
        for run, p in ((cli, ref), (runner, fast)):
            run(["table", "add", "pipe", str(p), route, *add])
        for args, want in cases:
            got = []
            for run, p in ((cli, ref), (runner, fast)):
                with pytest.raises(NikssError) as ex:
                    run([a.format(p=p) for a in args])
                msg = str(ex.value)
                assert "\n" not in msg and route in msg and msg.endswith(": " + want), msg
                got.append(msg)
            print(" | ".join(got))
        assert runner.in_process == 1 + len(cases) and runner.fallen_back == 0
        _same_maps(ref, fast)


def _routes(n: int) -> list[fy.P4TableEntry]:
    return [+fy.P4TableEntry(dp.T_ROUTE, match=fy.P4TableMatch(slice=i // 100, dst_rack=i % 100, tclass=i % 2),
                             action=fy.P4TableAction(dp.A_VIA, port=1, mask=1 << (i % 6), until=1000 * i))
            for i in range(n)]


@kernel
def test_rate_of_route_writes_maps_against_nikss_ctl():
    """30 000 routes through the map runner, 300 through nikss-ctl: entries/s of each (printed),
    for the argument lists alone and for the adapter's whole write (entities to commands)."""
    p4info = BUILD / "tor.p4info.txtpb"
    n, n_cli = 30_000, 300
    with _pipelines(BUILD / "tor.o", 2) as (a, b), map_runner(None, cli_runner()) as runner:
        build = NikssSwitch("x", a, p4info, {1: 21})
        cmds = [c for e in _routes(n) for c in build.commands(e)]
        t0 = time.perf_counter()
        for c in cmds:
            runner(c)
        maps_rate = n / (time.perf_counter() - t0)
        cli = cli_runner()
        t0 = time.perf_counter()
        for c in cmds[:n_cli]:
            cli(["table", "update", *c[2:]])
        cli_rate = n_cli / (time.perf_counter() - t0)
        assert runner.in_process == n and runner.fallen_back == 0
        fd = obj_get(BPFFS / f"pipeline{a}" / "maps" / "TorIngress_routing_route")
        try:
            assert len(dump_map(fd)) == n
        finally:
            os.close(fd)
        sw = NikssSwitch("y", b, p4info, {1: 21})       # its default runner: the maps
        ents = _routes(n)
        t0 = time.perf_counter()
        sw.write(ents)
        write_rate = n / (time.perf_counter() - t0)
        assert sw.run.in_process == n
        sw.close()
    print(f"\nroute entries/s: map runner {maps_rate:,.0f} (commands), {write_rate:,.0f} (NikssSwitch.write of "
          f"{n} entities); nikss-ctl {cli_rate:,.0f} ({n_cli} commands)")
    assert maps_rate > 20 * cli_rate


@kernel
def test_a_pipeline_loaded_again_under_its_id_is_opened_again():
    # The runner caches each table's descriptors; a pipeline unloaded and loaded again under the
    # same id pins new maps, which it must write (not the old ones it still holds open).
    route = "TorIngress_routing_route"
    add = ["action", "name", "TorIngress_routing_via", "key", "1", "2", "0", "data", "5", "1", "7"]
    with map_runner(None, cli_runner()) as runner:
        with _pipelines(BUILD / "tor.o", 1) as (first,):
            runner(["table", "add", "pipe", str(first), route, *add])
        with _pipelines(BUILD / "tor.o", 1) as (second,):
            if second != first:
                pytest.skip(f"SKIPPED: pipeline id {first} taken meanwhile (another run's load)")
            runner(["table", "add", "pipe", str(second), route, *add])
            assert len(_dump(second)[route]) == 1
        assert runner.in_process == 2
