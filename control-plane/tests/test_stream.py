"""Split TCP connections over rlbd streams (host/stream.py): two data paths over loopback with a
circuit window always open between them, an application at each end."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from p4rotor.host import datapath
from p4rotor.host.datapath import DIRECT, DataPath
from p4rotor.host.stream import Splitter

HAVE_RLBD = datapath.missing() is None
pytestmark = pytest.mark.skipif(not HAVE_RLBD, reason="rlbd not built (make native): the compiled data path")

SERVER_PORT = 9951


async def _fabric(lose_every: int = 0):
    """Two racks' data paths and splitters; a task keeps a window open each way."""
    kw = dict(tos=0, retransmit_ns=200_000_000 if lose_every else 0, ll_tos=0)
    a = DataPath(0, 2, 1400, {1: ("127.0.1.2", 9988)}, bind="127.0.1.1", port=9988, lose_every=lose_every, **kw)
    b = DataPath(1, 2, 1400, {0: ("127.0.1.1", 9988)}, bind="127.0.1.2", port=9988, **kw)
    a.start()
    b.start()
    loop = asyncio.get_running_loop()
    sa, sb = Splitter(a, 0, 2), Splitter(b, 1, 2)
    a.on_deliver, b.on_deliver = sa.delivered, sb.delivered
    loop.add_reader(a.fileno(), a.pump)
    loop.add_reader(b.fileno(), b.pump)
    await sa.start("127.0.1.1", 9979)
    await sb.start("127.0.1.2", 9979)
    sa.resolve = lambda sock: ("10.200.1.1", SERVER_PORT)

    async def windows():
        w = 0
        while True:
            w += 1
            for dp, peer in ((a, 1), (b, 0)):
                dp.win_open(w, 0, peer, w, time.time_ns() + 50_000_000, 20_000)
                dp.win_add(w, DIRECT, peer, 10**6)
            await asyncio.sleep(0.05)

    task = asyncio.ensure_future(windows())

    def close():
        task.cancel()
        for s in (sa, sb):
            s.close()
            s.server.close()
        loop.remove_reader(a.fileno())
        loop.remove_reader(b.fileno())
        a.stop()
        b.stop()

    return sa, sb, close


async def _exchange(data: bytes, lose_every: int = 0):
    sa, sb, close = await _fabric(lose_every)
    got = bytearray()

    async def server(r, w):
        while chunk := await r.read(65536):
            got.extend(chunk)
        w.write(b"got %d" % len(got))
        await w.drain()
        w.close()

    srv = await asyncio.start_server(server, "127.0.0.1", SERVER_PORT)
    try:
        r, w = await asyncio.open_connection("127.0.1.1", 9979)
        w.write(data)
        w.write_eof()
        await w.drain()
        reply = await asyncio.wait_for(r.read(), 30)
        w.close()
        await asyncio.sleep(0.2)
        return reply, bytes(got), sa.summary(), sb.summary()
    finally:
        srv.close()
        close()


@pytest.mark.parametrize("lose_every", [0, 13], ids=["clean", "lossy"])
def test_bytes_cross_once_and_in_order_both_ways(lose_every):
    data = os.urandom(2_000_000)
    reply, got, src, dst = asyncio.run(_exchange(data, lose_every))
    assert got == data and reply == b"got 2000000"
    assert src["opened"] == 1 and dst["accepted"] == 1 and src["closed"] == dst["closed"] == 1
    assert src["open"] == dst["open"] == 0


def test_a_refused_destination_closes_the_source_and_is_counted():
    async def main():
        sa, sb, close = await _fabric()
        try:
            r, w = await asyncio.open_connection("127.0.1.1", 9979)  # nothing listens at SERVER_PORT
            w.write(b"hello")
            await w.drain()
            assert await asyncio.wait_for(r.read(), 10) == b""  # the source sees the end
            w.close()
            await asyncio.sleep(0.1)
            return sb.summary()
        finally:
            close()

    assert asyncio.run(main())["refused"] == 1


def test_a_connection_that_was_not_redirected_and_a_bad_open_are_counted():
    async def main():
        sa, sb, close = await _fabric()
        try:
            def not_redirected(sock):
                raise OSError("no original destination")

            sa.resolve = not_redirected
            r, w = await asyncio.open_connection("127.0.1.1", 9979)
            assert await asyncio.wait_for(r.read(), 5) == b""
            sb.delivered(0, 0xE0000099, b"garbage", False)
            sb.delivered(0, 0xD0000099, b"x", False)  # a reply stream nobody opened
            return sa.summary(), sb.summary()
        finally:
            close()

    src, dst = asyncio.run(main())
    assert src["not_redirected"] == 1 and dst["bad_open"] == 1 and dst["unknown_stream"] == 1


def test_replies_to_two_racks_connections_with_one_number_use_two_streams():
    """rlbd numbers a flow's frames per id: a reply to rack 0's connection 1 and one to rack 2's
    connection 1 must not share an id (the second waited forever for the first's numbers)."""
    from p4rotor.host.stream import FORWARD, MAGIC, OPEN

    class Quiet:
        def add_stream(self, *a, **k):
            return 0

    async def main():
        sp = Splitter(Quiet(), 1, 3, target_host="127.0.0.1")
        head = OPEN.pack(MAGIC, bytes([10, 200, 1, 1]), 1)  # port 1: refused, quickly
        sp.delivered(0, FORWARD | 1, head, False)
        sp.delivered(2, FORWARD | 1, head, False)
        flows = {c.send_flow for c in sp.conns.values()}
        await asyncio.sleep(0.1)
        return flows

    assert len(asyncio.run(main())) == 2


def test_a_bulk_address_of_another_host_index_is_refused_and_counted():
    async def main():
        sa, sb, close = await _fabric()
        try:
            sa.resolve = lambda sock: ("10.200.1.2", SERVER_PORT)  # host 1 of rack 1; this agent is plane 0
            r, w = await asyncio.open_connection("127.0.1.1", 9979)
            assert await asyncio.wait_for(r.read(), 5) == b""
            return sa.summary()
        finally:
            close()

    assert asyncio.run(main())["other_plane"] == 1


def test_a_connection_across_a_peer_restart_is_reset_at_once_and_counted():
    """Rack 1's agent dies mid-connection and a new one (incarnation 1) starts on the same port:
    its announcement resets rack 0's connection with it (ECONNRESET, not a hang), counted; the
    new agent's connection ids are not its predecessor's."""
    from p4rotor.host.stream import FORWARD, INCARNATION_SHIFT

    async def main():
        kw = dict(tos=0, retransmit_ns=200_000_000, ll_tos=0, resend_streams_only=True)
        a = DataPath(0, 2, 1400, {1: ("127.0.1.2", 9988)}, bind="127.0.1.1", port=9988, **kw)
        paths = {1: DataPath(1, 2, 1400, {0: ("127.0.1.1", 9988)}, bind="127.0.1.2", port=9988, **kw)}
        loop = asyncio.get_running_loop()
        a.start()
        paths[1].start()
        sa, sb = Splitter(a, 0, 2), Splitter(paths[1], 1, 2)
        a.on_deliver, paths[1].on_deliver = sa.delivered, sb.delivered
        loop.add_reader(a.fileno(), a.pump)
        loop.add_reader(paths[1].fileno(), paths[1].pump)
        await sa.start("127.0.1.1", 9979)
        await sb.start("127.0.1.2", 9979)
        sa.resolve = lambda sock: ("10.200.1.1", SERVER_PORT)

        async def windows():
            w = 0
            while True:
                w += 1
                for dp, peer in ((a, 1), (paths[1], 0)):
                    try:
                        dp.win_open(w, 0, peer, w, time.time_ns() + 50_000_000, 20_000)
                        dp.win_add(w, DIRECT, peer, 10**6)
                    except Exception:  # rack 1's data path between its death and its restart
                        pass
                await asyncio.sleep(0.05)

        task = asyncio.ensure_future(windows())
        got = bytearray()

        async def server(r, w):
            while chunk := await r.read(65536):
                got.extend(chunk)

        srv = await asyncio.start_server(server, "127.0.0.1", SERVER_PORT)
        try:
            r, w = await asyncio.open_connection("127.0.1.1", 9979)
            w.write(b"x" * 100_000)
            await w.drain()
            for _ in range(100):
                if len(got) == 100_000:
                    break
                await asyncio.sleep(0.05)
            # rack 1's agent dies: its splitter and rlbd go, with everything they knew
            sb.close()
            sb.server.close()
            loop.remove_reader(paths[1].fileno())
            paths[1].stop()
            await asyncio.sleep(0.1)
            b2 = paths[1] = DataPath(1, 2, 1400, {0: ("127.0.1.1", 9988)}, bind="127.0.1.2", port=9988, **kw)
            b2.start()
            sb2 = Splitter(b2, 1, 2, incarnation=1)
            b2.on_deliver = sb2.delivered
            loop.add_reader(b2.fileno(), b2.pump)
            await sb2.start("127.0.1.2", 9979)
            sb2.announce_restart([0])
            with pytest.raises(ConnectionResetError):
                for _ in range(200):  # the application's next read or write fails: reset
                    w.write(b"y" * 1000)
                    await w.drain()
                    if not await asyncio.wait_for(r.read(1), 10):
                        break
            assert sb2.next_cid == (1 << INCARNATION_SHIFT) + 1
            await asyncio.sleep(0.2)
            return len(got), sa.summary(), sb2.summary()
        finally:
            task.cancel()
            srv.close()
            for s in (sa,):
                s.close()
                s.server.close()
            loop.remove_reader(a.fileno())
            a.stop()
            if paths[1] is not None:
                loop.remove_reader(paths[1].fileno())
                paths[1].stop()

    n, src, dst = asyncio.run(main())
    assert n == 100_000
    assert src["peer_restarts"] == 1 and src["reset_peer_restarted"] == 1 and src["open"] == 0
    assert src["stream_frames_dropped"] >= 0  # what was still queued for, or unacknowledged by, the dead one
    assert src.get("reset_by_application", 0) == 0
    assert dst["restart_announced"] == 1 and dst.get("accepted", 0) == 0
