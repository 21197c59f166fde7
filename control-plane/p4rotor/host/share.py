"""Hosts sharing their rack's circuits: before it sends in a circuit's window, each agent of a rack
claims its part of the window's frames (docs/rotorlb.md, "Hosts sharing their rack's circuits").

With a plane per host (the default), the n-th hosts of all racks run RotorLB on a fixed share of
every circuit, so a host alone gets its plane's share, not the rack's.  Shared, the agents of a
rack are one rack as far as a circuit goes: a window carries the whole circuit's frames, split
between the agents that have something to send in it.  The rule (:func:`decide`): an agent gets
what it asks for, up to what the others have not claimed, divided evenly among it and the others
that are busy (hold frames) and have not claimed yet.  Whoever claims first with the others idle
may take the whole window; a sibling that becomes busy after that waits for the next window.

A flow that starts while a window is open takes what is left of it (:func:`top_up`: additive, up
to the window).

:class:`MemoryShare` keeps the claims in the process (the in-process fabric, host/loopback.py);
:class:`ShmShare` in one small shared-memory region per rack (a file on tmpfs that every agent
maps; a claim locks it, reads and writes a few bytes in place, and unlocks: no file is rewritten),
for agents in separate Mininet hosts (network namespaces share the file system);
:class:`FileShare`, the first way, in one JSON file per rack rewritten under the lock at every
claim (kept for the comparison in ``p4rotor bench --only claims``).
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import struct
from pathlib import Path

KEEP = 64  # windows whose claims are kept (a few cycles): older ones are over


def decide(state: dict, member: int, key: str, demand: int, total: int) -> int:
    """Claim up to ``demand`` of ``total`` frames of window ``key`` for ``member``; updates
    ``state`` (``{"busy": {member: bool}, "claims": {key: {member: frames}}}``), returns the
    frames claimed."""
    busy = state.setdefault("busy", {})
    claims = state.setdefault("claims", {})
    busy[str(member)] = demand > 0
    mine = claims.setdefault(key, {})
    if str(member) in mine:  # asked twice for one window: the first answer stands
        return mine[str(member)]
    left = total - sum(mine.values())
    waiting = sum(1 for m, b in busy.items() if b and m != str(member) and m not in mine)
    got = max(0, min(demand, left // (1 + waiting) if waiting else left))
    mine[str(member)] = got
    while len(claims) > KEEP:
        claims.pop(next(iter(claims)))
    return got


def top_up(state: dict, member: int, key: str, demand: int, total: int) -> int:
    """Up to ``demand`` more frames of window ``key`` for ``member``, from what no agent holds
    (never claimed); added to its claim, returns the frames added."""
    mine = state.setdefault("claims", {}).setdefault(key, {})
    got = max(0, min(demand, total - sum(mine.values())))
    mine[str(member)] = mine.get(str(member), 0) + got
    return got


class MemoryShare:
    """Claims of one rack's agents living in one process."""

    def __init__(self, total: int):
        self.total, self.state = total, {}

    def member(self, n: int) -> "Claimer":
        return Claimer(self, n)

    def apply(self, rule, member: int, key: str, n: int) -> int:
        return rule(self.state, member, key, n, self.total)


class FileShare:
    """Claims of one rack's agents in ``path`` (JSON), read and written under ``flock``."""

    def __init__(self, path: Path, total: int):
        self.path, self.total = Path(path), total

    def member(self, n: int) -> "Claimer":
        return Claimer(self, n)

    def apply(self, rule, member: int, key: str, n: int) -> int:
        """``rule`` (decide, top_up) on the rack's state, read and written under the lock."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with os.fdopen(os.dup(fd), "r+") as f:
                text = f.read()
                state = json.loads(text) if text.strip() else {}
                got = rule(state, member, key, n, self.total)
                f.seek(0)
                f.truncate()
                f.write(json.dumps(state))
            return got
        finally:
            os.close(fd)  # releases the lock


class ShmShare:
    """Claims of one rack's agents in a shared-memory region ``path`` (on tmpfs), mapped by each:
    ``MEMBERS`` busy flags (-1: not said yet), then ``KEEP`` window records (the window's key, or
    -1, and each member's claim, -1: none yet), a window at the record its key hashes to (older
    windows there are over).  Each claim holds ``flock`` on the file while it reads the busy flags
    and its window's record, runs the same rule (:func:`decide`, :func:`top_up`) and writes back
    only what changed."""

    MEMBERS = 16
    _BUSY = struct.Struct(f"{MEMBERS}b")
    _REC = struct.Struct(f"q{MEMBERS}i")
    SIZE = _BUSY.size + KEEP * _REC.size

    def __init__(self, path: Path, total: int):
        self.path, self.total = Path(path), total
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            if os.fstat(self.fd).st_size < self.SIZE:  # the rack's first agent lays it out
                os.ftruncate(self.fd, self.SIZE)
                init = self._BUSY.pack(*[-1] * self.MEMBERS) + self._REC.pack(-1, *[-1] * self.MEMBERS) * KEEP
                os.pwrite(self.fd, init, 0)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.mem = mmap.mmap(self.fd, self.SIZE)

    def member(self, n: int) -> "Claimer":
        if not 0 <= n < self.MEMBERS:
            raise ValueError(f"a rack shares its circuits among at most {self.MEMBERS} agents, not {n + 1}")
        return Claimer(self, n)

    def apply(self, rule, member: int, key: str, n: int) -> int:
        rotor, slot = (int(x) for x in key.split(":"))
        k = rotor << 40 | slot
        at = self._BUSY.size + (k * 0x9E3779B1 % KEEP) * self._REC.size
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            busy = self._BUSY.unpack_from(self.mem, 0)
            rec_key, *claims = self._REC.unpack_from(self.mem, at)
            if rec_key != k:
                claims = [-1] * self.MEMBERS
            state = {"busy": {str(m): b == 1 for m, b in enumerate(busy) if b >= 0},
                     "claims": {key: {str(m): c for m, c in enumerate(claims) if c >= 0}}}
            got = rule(state, member, key, n, self.total)
            if str(member) in state["busy"]:
                self.mem[member] = 1 if state["busy"][str(member)] else 0
            mine = state["claims"][key]
            self._REC.pack_into(self.mem, at, k, *[mine.get(str(m), -1) for m in range(self.MEMBERS)])
            return got
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.mem.close()
        os.close(self.fd)


class Claimer:
    """One agent's handle on its rack's share, per window ``(rotor, slot)``: ``claim`` at its start,
    ``top_up`` when a flow joins it open.

    An idle agent's claim (demand 0) that the rack already knows is idle changes nothing that
    :func:`decide` reads (a claim of 0 frames takes nothing from the window, and an idle member
    is not waited for), so it is answered here without the file (``skipped``).  Every agent
    claims at the start of each of its rack's windows, 40 a second: through the file, sixteen
    agents rewrote their racks' files 640 times a second, and on ext4 each rewrite of a file
    truncated to nothing starts its write-back (``auto_da_alloc``).  Measured here with no
    fabric running (16 processes, 40 idle claims a second each, 30 s): worst claim 69 ms, 29
    over 20 ms, against 4.5 ms and none on tmpfs (docs/notes/agents-on-tmpfs.md)."""

    def __init__(self, share, n: int):
        self.share, self.n = share, n
        # What this member last told the file: None, nothing yet (another handle on the same
        # member may have said it was busy), so its first idle claim goes through the file.
        self.idle_said: bool | None = None
        self.skipped = 0

    def claim(self, window: tuple[int, int], demand: int) -> int:
        if demand <= 0 and self.idle_said is True:
            self.skipped += 1
            return 0
        self.idle_said = demand <= 0
        return self.share.apply(decide, self.n, f"{window[0]}:{window[1]}", demand)

    def top_up(self, window: tuple[int, int], demand: int) -> int:
        return self.share.apply(top_up, self.n, f"{window[0]}:{window[1]}", demand)
