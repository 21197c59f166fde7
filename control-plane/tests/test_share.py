"""host/share.py: the agents of a rack claiming each circuit window's frames between them."""

from __future__ import annotations

import multiprocessing

import pytest

from p4rotor.host.share import KEEP, FileShare, MemoryShare, ShmShare, decide, top_up


def test_alone_an_agent_takes_what_it_asks_up_to_the_window():
    s = MemoryShare(10)
    assert s.member(0).claim((0, 5), 4) == 4
    assert s.member(1).claim((0, 5), 20) == 6  # what is left of the window
    assert s.member(0).claim((1, 5), 20) == 5  # another window, the sibling still busy: half
    s.member(1).claim((1, 5), 0)  # ... until it has nothing left
    assert s.member(0).claim((2, 5), 20) == 10


def test_busy_siblings_split_the_window_evenly():
    s = MemoryShare(10)
    a, b = s.member(0), s.member(1)
    a.claim((0, 1), 10), b.claim((0, 1), 10)  # both say they are busy
    assert a.claim((0, 2), 10) == 5  # b is busy and has not claimed window 2: half
    assert b.claim((0, 2), 10) == 5
    b.claim((0, 3), 0)  # b has nothing any more
    assert a.claim((0, 4), 10) == 10


def test_a_window_claimed_twice_keeps_its_first_answer():
    s = MemoryShare(10)
    assert s.member(0).claim((2, 7), 3) == 3
    assert s.member(0).claim((2, 7), 9) == 3


def test_a_top_up_takes_what_is_left_of_the_window_never_more():
    s = MemoryShare(10)
    a, b = s.member(0), s.member(1)
    a.claim((0, 1), 10), b.claim((0, 1), 10)
    assert a.claim((0, 2), 10) == 5 and b.claim((0, 2), 3) == 3
    assert a.top_up((0, 2), 4) == 2 and a.claim((0, 2), 0) == 7  # a claim again answers the total
    assert b.top_up((0, 2), 4) == 0


@pytest.mark.parametrize("kind", [FileShare, ShmShare])
def test_top_up_through_the_file(tmp_path, kind):
    f = kind(tmp_path / "share-rack0", 10)
    assert f.member(0).claim((1, 1), 6) == 6
    assert f.member(1).top_up((1, 1), 9) == 4 and f.member(1).top_up((1, 1), 9) == 0
    state: dict = {}
    assert top_up(state, 0, "k", 3, 2) == 2


def test_old_windows_are_forgotten():
    state: dict = {}
    for k in range(KEEP + 10):
        decide(state, 0, f"0:{k}", 1, 10)
    assert len(state["claims"]) == KEEP and f"0:{KEEP + 9}" in state["claims"]


def _claim(kind, path, n, q):
    q.put(kind(path, 10).member(n).claim((0, 1), 10))


@pytest.mark.parametrize("kind", [FileShare, ShmShare])
def test_file_share_between_processes_never_gives_more_than_the_window(tmp_path, kind):
    path = tmp_path / "share-rack0"
    q = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=_claim, args=(kind, path, n, q)) for n in range(3)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(10)
    got = sorted(q.get(timeout=5) for _ in ps)
    assert sum(got) == 10 and got[-1] == 10  # the first took the idle rack's whole window


def test_an_idle_claim_the_rack_already_knows_leaves_the_file_alone(tmp_path):
    """Idle and known idle: answered 0 without the file (40 claims a second per agent rewrote it);
    its first claim, every busy one, and the first idle one after a busy one still go through
    it, so the split between busy siblings is as before."""
    path = tmp_path / "share-rack0.json"
    a, b = FileShare(path, 10).member(0), FileShare(path, 10).member(1)
    assert a.claim((0, 1), 0) == 0 and path.exists() and a.skipped == 0  # said once
    before = path.read_text()
    assert a.claim((0, 2), 0) == 0 and a.skipped == 1 and path.read_text() == before
    assert b.claim((0, 2), 4) == 4  # busy: written (a is not waited for)
    assert a.claim((0, 3), 6) == 5 and b.claim((0, 3), 6) == 5  # both busy: half each
    assert b.claim((0, 4), 0) == 0 and b.skipped == 0  # b says it is idle once...
    before = path.stat().st_mtime_ns, path.read_text()
    assert b.claim((0, 5), 0) == 0 and b.skipped == 1  # ...then leaves the file alone
    assert (path.stat().st_mtime_ns, path.read_text()) == before
    assert a.claim((0, 6), 10) == 10  # b idle: a takes the whole window
    m = MemoryShare(10).member(0)
    m.claim((0, 1), 0)
    assert m.claim((0, 2), 0) == 0 and "0:2" not in m.share.state["claims"]


def test_shared_memory_claims_split_as_the_file_does_and_rewrite_nothing(tmp_path):
    """The same rule through the mapped region: what the file-based claims give, step by step,
    and the file's size and inode never change (no truncate, no rewrite)."""
    steps = [(0, (0, 1), 0), (1, (0, 2), 4), (0, (0, 3), 6), (1, (0, 3), 6), (1, (0, 4), 0), (0, (0, 6), 10),
             (0, (1, 7), 3), (1, (1, 7), 9)]
    f = FileShare(tmp_path / "f.json", 10)
    m = ShmShare(tmp_path / "m.shm", 10)
    fa, fb = f.member(0), f.member(1)
    ma, mb = m.member(0), m.member(1)
    st = (tmp_path / "m.shm").stat()
    for who, window, demand in steps:
        assert (fa, fb)[who].claim(window, demand) == (ma, mb)[who].claim(window, demand)
    assert fa.top_up((1, 7), 5) == ma.top_up((1, 7), 5)
    after = (tmp_path / "m.shm").stat()
    assert (after.st_size, after.st_ino) == (st.st_size, st.st_ino) == (ShmShare.SIZE, st.st_ino)
    with pytest.raises(ValueError):
        m.member(ShmShare.MEMBERS)
