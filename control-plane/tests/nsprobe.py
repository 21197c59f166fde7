"""Helpers the BMv2-backed tests run inside the switch's network namespace (the switch's gRPC
port and veths live there): ``python nsprobe.py COMMAND ...``.

* ``counters ADDR P4INFO``: for each line read on stdin, print one JSON line with the drop
  counter by index.  A plain P4Runtime Read, without a stream: no arbitration, so it never
  competes with the controllers under test for primary.
* ``traffic OUT SEND_IFACE RATE SECONDS RECV_IFACE=PORT ...``: send numbered frames on
  SEND_IFACE at RATE per second for SECONDS (bounded: it stops by itself), note on which of the
  receiving interfaces each frame came out, and write {"sent": [[seq, wall ns]...],
  "received": [[seq, port]...]} to OUT.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import threading
import time
from pathlib import Path

ETH_P_ALL = 0x0003
ETHERTYPE = 0x88B5  # local experimental: opaque to the rotor (it parses nothing on data ports)
MAGIC = b"p4rotor-adopt"


def counters(addr: str, p4info: str) -> None:
    import grpc
    from finsy import P4Schema
    from finsy.proto import p4r, p4r_grpc

    schema = P4Schema(Path(p4info))
    stub = p4r_grpc.P4RuntimeStub(grpc.insecure_channel(addr))
    cid = schema.counters["drop_counter"].id
    for _ in sys.stdin:
        drops = {}
        req = p4r.ReadRequest(device_id=1, entities=[p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid))])
        for resp in stub.Read(req, timeout=10):
            for e in resp.entities:
                drops[e.counter_entry.index.index] = e.counter_entry.data.packet_count
        print(json.dumps({"drops": drops, "t_ns": time.time_ns()}), flush=True)


def traffic(out: str, send_iface: str, rate: float, seconds: float, *recv: str) -> None:
    ports = {}
    socks = []
    for spec in recv:
        iface, port = spec.split("=")
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((iface, 0))
        s.setblocking(False)
        ports[s.fileno()] = int(port)
        socks.append(s)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((send_iface, 0))
    sent: list[tuple[int, int]] = []
    received: list[tuple[int, int]] = []
    end = time.monotonic() + seconds

    def send() -> None:
        head = bytes.fromhex("020000000002" "020000000001") + struct.pack("!H", ETHERTYPE) + MAGIC
        nxt = time.monotonic()
        seq = 0
        while nxt < end:
            t = time.time_ns()
            tx.send(head + struct.pack("!Q", seq) + bytes(32))
            sent.append((seq, t))
            seq += 1
            nxt += 1 / rate
            time.sleep(max(0.0, nxt - time.monotonic()))

    th = threading.Thread(target=send)
    th.start()
    off = 14 + len(MAGIC)
    while time.monotonic() < end + 0.5:  # frames still in the switch come out a little later
        ready, _, _ = select.select(socks, [], [], 0.1)
        for s in ready:
            while True:
                try:
                    frame = s.recv(2048)
                except BlockingIOError:
                    break
                if frame[14:off] == MAGIC:
                    received.append((struct.unpack("!Q", frame[off:off + 8])[0], ports[s.fileno()]))
    th.join()
    Path(out).write_text(json.dumps({"sent": sent, "received": received}))


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "counters":
        counters(*args)
    elif cmd == "traffic":
        traffic(args[0], args[1], float(args[2]), float(args[3]), *args[4:])
    else:
        raise SystemExit(f"unknown command {cmd!r}")
