"""An agent's own frames for one destination: flows served in turn, each in order (host/flowqueue.py)."""

from __future__ import annotations

import pytest

from p4rotor.host.flowqueue import FlowQueue


def _drain(q):
    out = []
    while q:
        out.append(q.popleft())
    return out


def test_flows_take_turns_and_keep_their_order():
    q = FlowQueue()
    for s in range(4):
        q.append((1, s, b""))  # a large flow first
    q.append((2, 0, b""))
    q.append((2, 1, b""))  # a small one behind it
    assert len(q) == 6
    assert [(f, s) for f, s, _ in _drain(q)] == [(1, 0), (2, 0), (1, 1), (2, 1), (1, 2), (1, 3)]
    assert len(q) == 0 and not q


def test_a_small_flow_behind_a_large_one_finishes_in_twice_its_size():
    q = FlowQueue()
    for s in range(1000):
        q.append((7, s, b""))
    q.popleft()
    for s in range(10):
        q.append((8, s, b""))
    order = [f for f, _, _ in _drain(q)]
    assert max(i for i, f in enumerate(order) if f == 8) < 20  # FIFO: after 999 frames


def test_what_goes_back_leaves_first_in_its_order():
    q = FlowQueue()
    for f in (1, 2):
        for s in range(3):
            q.append((f, s, b""))
    taken = [q.popleft() for _ in range(3)]  # (1,0) (2,0) (1,1)
    for item in reversed(taken):  # the agent returns an unsent window's frames this way
        q.appendleft(item)
    assert _drain(q)[:3] == taken  # they leave again as they left
    assert len(q) == 0


def test_every_item_is_kept_once_and_empty_pop_raises():
    q = FlowQueue()
    items = [(f, s, b"") for f in range(5) for s in range(f + 1)]
    for it in items:
        q.append(it)
    q.appendleft(q.popleft())
    assert sorted(q) == sorted(items) and len(q) == len(items)
    assert sorted(_drain(q)) == sorted(items)
    with pytest.raises(IndexError):
        q.popleft()
