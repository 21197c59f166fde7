"""Which frames crossed which rotor circuit, from one capture of the switches' namespace.

``tcpdump -i any -y LINUX_SLL2`` records, per frame, the interface and whether it came in or went
out.  On a rotor's interface (``rotorN-ethP``: port P of rotor N), a frame coming in arrived from
a ToR; a frame going out is what the rotor switched.  The rotor does not change a frame after the
fabric header, so a frame that went out is matched to the one that came in by those bytes: the
pair gives (in port, out port, time out), which ``experiments/frame_check.py`` judges against the
schedule (a circuit not live at that moment: wrong or dark).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ..host.traffic import Rx

_GLOBAL = struct.Struct("<IHHiIII")
_REC = struct.Struct("<IIII")
_SLL2 = struct.Struct("!HHIHBB8s")
LINKTYPE_LINUX_SLL2 = 276
PACKET_OUTGOING = 4
FABRIC_HEADER = 8


def interface_names() -> dict[int, str]:
    """ifindex -> name for the current namespace (read while the interfaces exist)."""
    out = {}
    for n in os.listdir("/sys/class/net"):
        try:
            out[int(Path(f"/sys/class/net/{n}/ifindex").read_text())] = n
        except (OSError, ValueError):
            pass
    return out


def read_pcap(path: Path):
    """(ts_ns, ifindex, outgoing, payload after the cooked header) per record."""
    data = path.read_bytes()
    if len(data) < _GLOBAL.size:
        return
    magic = struct.unpack_from("<I", data)[0]
    if magic == 0xA1B2C3D4:
        frac = 1000
    elif magic == 0xA1B23C4D:
        frac = 1
    else:
        raise ValueError(f"{path}: not a little-endian pcap file")
    linktype = _GLOBAL.unpack_from(data)[6]
    if linktype != LINKTYPE_LINUX_SLL2:
        raise ValueError(f"{path}: link type {linktype}, expected LINUX_SLL2 ({LINKTYPE_LINUX_SLL2})")
    off = _GLOBAL.size
    while off + _REC.size <= len(data):
        sec, sub, incl, _ = _REC.unpack_from(data, off)
        off += _REC.size
        pkt = data[off:off + incl]
        off += incl
        if len(pkt) < _SLL2.size:
            continue
        _, _, ifindex, _, ptype, _, _ = _SLL2.unpack_from(pkt)
        yield sec * 1_000_000_000 + sub * frac, ifindex, ptype == PACKET_OUTGOING, pkt[_SLL2.size:]


def read_rotor_frames(path: Path, ifnames: dict[int, str], rotors: dict[str, dict[int, int]]) -> dict[str, list[Rx]]:
    """{rotor name: [Rx(time out, out port, in port)]} for every frame a rotor switched.

    ``rotors``: rotor name -> {rack: rotor port} (only its ports are looked at)."""
    ports = {name: set(p.values()) for name, p in rotors.items()}
    seen_in: dict[tuple[str, bytes], tuple[int, int]] = {}
    out: dict[str, list[Rx]] = {n: [] for n in rotors}
    for ts, ifindex, outgoing, payload in read_pcap(path):
        name = ifnames.get(ifindex, "")
        sw, _, eth = name.partition("-eth")
        if sw not in ports or not eth.isdigit() or int(eth) not in ports[sw]:
            continue
        key = (sw, payload[FABRIC_HEADER:])
        if not outgoing:
            seen_in[key] = (int(eth), ts)
        elif key in seen_in:
            in_port, t_in = seen_in.pop(key)
            out[sw].append(Rx(rx_ns=ts, out_port=int(eth), in_port=in_port, seq=0, send_ns=t_in))
    return out
