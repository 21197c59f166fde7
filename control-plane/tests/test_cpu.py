"""fabric/cpu.py: the PM QoS request idle CPUs poll under, held while the file is open."""

import os
import struct

import pytest

from p4rotor.fabric.cpu import IdlePoll, cpu_list, default_switch_cpus


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


def test_cpu_list_normalised_and_checked_against_the_machine():
    assert cpu_list("1", {0, 1}) == "1"
    assert cpu_list("3,1-2", {0, 1, 2, 3}) == "1,2,3"
    assert cpu_list(" 2 , 3", {0, 1, 2, 3}) == "2,3"


@pytest.mark.parametrize("text,needle", [("2", "CPU 2 is not one this machine lets us use (0,1)"),
                                         ("0-1", "leaves no CPU for the hosts"),
                                         ("x", "'x' is not a CPU number"),
                                         ("", "is not a CPU number"),
                                         ("1-0", "is not a range"),
                                         ("-1", "is not a CPU number")])
def test_cpu_list_bad_input_one_line(text, needle):
    with pytest.raises(ValueError) as ex:
        cpu_list(text, {0, 1})
    assert needle in str(ex.value) and "\n" not in str(ex.value)


def test_switches_get_the_upper_half_of_the_cpus():
    assert default_switch_cpus({0, 1}) == "1"
    assert default_switch_cpus({0, 1, 2, 3}) == "2,3"
    assert default_switch_cpus({0, 1, 2}) == "2"
    assert default_switch_cpus({5}) is None  # one CPU: the switches run anywhere
