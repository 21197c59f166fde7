"""The ToR on the eBPF target (p4src/psa/tor.p4): its P4Info against v1model's, the adapter's ToR
entities, and ToR -> rotor -> ToR in the kernel (where p4c-ebpf, clang and nikss-ctl exist): a
host's frame crosses with the fabric header pushed on the uplink and removed for the host, a
frame too long for the uplink is counted as MTU, every frame is delivered or counted by cause,
and nothing stays loaded."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import finsy as fy
import pytest

from p4rotor import control as C
from p4rotor import p4 as dp
from p4rotor.control.nikss import NikssSwitch
from p4rotor.control.target import EBPF

from nikss_recorder import Recorder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
P4INFO = HERE / "data" / "ebpf-tor.p4info.txtpb"
BUILD = Path(os.environ.get("P4ROTOR_BUILD", ROOT / "build"))


def test_ebpf_tor_p4info_has_the_v1model_tors_tables_actions_and_parameters():
    psa, v1 = fy.P4Schema(P4INFO), fy.P4Schema(HERE / "data" / "tor.p4info.txtpb")
    moved = {"TorIngress.port_mtu.port_mtu": "TorEgress.port_mtu.port_mtu"}   # checked before the redirect
    assert {moved.get(t.name, t.name) for t in psa.tables} == {t.name for t in v1.tables}
    for t in psa.tables:
        t1 = v1.tables[moved.get(t.name, t.name)]
        keys = [(f.name, f.match_type.name) for f in t.match_fields]
        assert keys == ([("phase_grains", "EXACT")] if t.name == dp.TOR_T_CLOCK_PHASE else
                        [(f.name, f.match_type.name) for f in t1.match_fields]), t.name
        for a in t.actions:
            extra = ["grain"] if a.name == dp.TOR_A_CONFIGURE else []
            assert [p.name for p in psa.actions[a.name].params] == \
                [p.name for p in v1.actions[a.name.replace("TorIngress.port_mtu", "TorEgress.port_mtu")].params] \
                + extra, a.name


def test_built_ebpf_tor_p4info_matches_the_fixture():
    built = BUILD / "ebpf" / "tor.p4info.txtpb"
    if not built.exists():
        pytest.skip(f"SKIPPED: {built} not built (make build-ebpf; needs p4c-ebpf)")
    assert built.read_text() == P4INFO.read_text(), f"tests/data/ebpf-tor.p4info.txtpb is stale: copy {built} over it"


def test_adapter_writes_a_tors_entities_with_numeric_addresses_and_ifindexes():
    from p4rotor.bench.kernel import chain_topology
    from p4rotor.schedule import routes as R

    topo = chain_topology()
    k = topo.racks[0]
    rec = Recorder()
    sw = NikssSwitch("tor0", 9, P4INFO, {1: 21, 11: 22}, runner=rec)
    sw.write(C.tor_entities(topo, k, R.compute(topo.schedule), dp.MODE_CLOCK, epoch_us=0, target=EBPF))
    rack_of = [c for c in rec.calls if c[4] == "TorIngress_routing_rack_of"]
    assert ["key", str(0x0A000100) + "/24", "data", "1"] == rack_of[1][-4:]
    host = [c for c in rec.calls if c[4] == "TorIngress_routing_local_host"]
    assert host == [["table", "add", "pipe", "9", "TorIngress_routing_local_host", "action", "name",
                     "TorIngress_routing_deliver", "key", str(0x0A000001), "data", "22"]]
    via = [c for c in rec.calls if c[4] == "TorIngress_routing_route"]
    assert via and all(c[c.index("data") + 1] == "21" for c in via)
    mtu = [c for c in rec.calls if c[4] == "TorIngress_port_mtu_port_mtu"]
    assert sorted(c[c.index("key") + 1] for c in mtu) == ["21", "22"]


# -- in the kernel ------------------------------------------------------------------------

def _kernel_skip() -> str | None:
    from p4rotor.fabric.nikss import missing_tools

    miss = missing_tools()
    for f in ("rotor.o", "tor.o", "xdp_pass.o"):
        if not (BUILD / "ebpf" / f).exists():
            miss.append(f"{BUILD / 'ebpf' / f} (run 'make build-ebpf')")
    if os.geteuid() != 0:
        miss.append("root")
    return f"eBPF ToR not tested: missing {', '.join(miss)}" if miss else None


_CAPTURE = ("import socket,sys,time,json\n"
            "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(3));s.bind((sys.argv[1],0))\n"
            "s.settimeout(0.1);print('ready',flush=True);end=time.monotonic()+float(sys.argv[2]);got=[]\n"
            "while time.monotonic()<end:\n"
            " try:f,a=s.recvfrom(4096)\n except socket.timeout:continue\n"
            " if a[2]!=socket.PACKET_OUTGOING:got.append([len(f),f[12:14].hex()])\n"
            "print(json.dumps(got))\n")
_SEND = ("import socket,sys,time\n"
         "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind((sys.argv[1],0))\n"
         "for h in sys.argv[2:]:\n"
         " s.send(bytes.fromhex(h));time.sleep(0.001)\n")


@pytest.mark.skipif(_kernel_skip() is not None, reason=_kernel_skip() or "")
@pytest.mark.parametrize("writer", ["nikss-ctl", "maps"])
def test_tor_rotor_tor_in_the_kernel_delivers_counts_and_leaves_nothing(writer, monkeypatch):
    # writer: every entry through nikss-ctl, or (the chain's runner replaced) the exact tables and
    # defaults written on the pinned maps in-process (control/nikss_maps.py), the rest through it.
    from p4rotor.bench import kernel
    from p4rotor.bench.kernel import ebpf_chain, ipv4_frame
    from p4rotor.control.nikss import cli_runner
    from p4rotor.control.nikss_maps import map_runner
    from p4rotor.fabric.nikss import leftover_pipelines

    runners, slow = [], []
    if writer == "maps":
        def fast(netns=None):
            cli = cli_runner(netns)

            def fallback(args):
                slow.append(args[4])
                return cli(args)
            runners.append(map_runner(None, fallback))
            return runners[-1]
        monkeypatch.setattr(kernel, "cli_runner", fast)

    sizes = [64, 200, 1514] * 20
    # An uplink limited to 1000-byte frames: the 1514-byte frames (1522 with the fabric header)
    # are counted as MTU at ToR 0, before the redirect.
    limit = fy.P4TableEntry(dp.TOR_T_PORT_MTU, match=fy.P4TableMatch(port=1),
                            action=fy.P4TableAction(dp.TOR_A_MTU_LIMIT, max_frame_bytes=1000))
    fit = [n for n in sizes if n + 8 <= 1000]
    ns_name = None
    with ebpf_chain(BUILD) as (ns, ctl, hosts):
        ns_name = ns.name
        cap = subprocess.Popen(["ip", "netns", "exec", ns.name, "python3", "-c", _CAPTURE, hosts["h1"], "3"],
                               stdout=subprocess.PIPE, text=True)
        assert cap.stdout.readline().strip() == "ready"
        ctl["tor0"].write([~limit])
        if writer == "maps":
            assert len(runners) == 3 and all(r.in_process > 0 for r in runners)
            assert set(slow) == {"TorIngress_routing_rack_of"}, "only the LPM entries went to nikss-ctl"
        frames = [ipv4_frame(n).hex() for n in sizes]
        subprocess.run(["ip", "netns", "exec", ns.name, "python3", "-c", _SEND, hosts["h0"], *frames], check=True)
        got = json.loads(cap.communicate(timeout=30)[0])
        drops = {name: sw.drops() for name, sw in ctl.items()}
        up_tx = ctl["tor0"].counter("TorEgress.tx_port_counter")
        rotor_rx = ctl["rotor0"].counter("RotorIngress.rx_port_counter")
        host_tx = ctl["tor1"].counter("TorEgress.tx_port_counter")
    assert sorted(n for n, _ in got) == sorted(fit), "each frame that fits reaches h1 as it left h0"
    assert {t for _, t in got} == {"0800"}, "the fabric header is gone for the host"
    assert up_tx[1] == (len(fit), sum(k + 8 for k in fit)), "on the uplink a frame has 8 more bytes"
    assert rotor_rx[1][0] == len(fit) and host_tx[11][0] == len(fit)
    assert drops == {"tor0": {dp.DropCause.MTU: len(sizes) - len(fit)}, "rotor0": {}, "tor1": {}}
    assert leftover_pipelines() == []
    assert ns_name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
