"""fabric/cpu.py: the PM QoS request idle CPUs poll under, held while the file is open."""

import os
import struct

from p4rotor.fabric.cpu import IdlePoll


def test_holds_a_zero_latency_request_until_released(tmp_path):
    dev = tmp_path / "cpu_dma_latency"  # a stand-in: the kernel's file takes a 32-bit int
    dev.write_bytes(b"")
    p = IdlePoll(dev)
    assert not p.held
    assert p.hold() and p.held and p.why_not is None
    assert p.hold()  # held already: one request, not two
    assert struct.unpack("i", dev.read_bytes()) == (0,)
    fd = p.fd
    p.release()
    assert not p.held
    try:
        os.fstat(fd)
        raise AssertionError("the request's file is still open")
    except OSError:
        pass


def test_says_why_when_it_cannot(tmp_path):
    p = IdlePoll(tmp_path / "absent")
    assert not p.hold() and not p.held
    assert "cannot open" in p.why_not and "absent" in p.why_not
    p.release()  # nothing held: nothing to do


def test_context_manager_releases(tmp_path):
    dev = tmp_path / "d"
    dev.write_bytes(b"")
    with IdlePoll(dev, latency_us=5) as p:
        assert p.held
    assert not p.held and struct.unpack("i", dev.read_bytes()) == (5,)


def test_the_real_device_when_root():
    """On this machine, as root, the request really holds (skips loudly where it cannot)."""
    import pytest

    if not os.path.exists("/dev/cpu_dma_latency") or os.geteuid() != 0:
        pytest.skip("no /dev/cpu_dma_latency or not root: idle CPUs cannot be made to poll here")
    with IdlePoll() as p:
        assert p.held, p.why_not
