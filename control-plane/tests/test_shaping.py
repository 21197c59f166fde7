"""A host's sending shaper as text (fabric/shaping.py); mininet/test_host_shaping.py runs it."""

import pytest

from p4rotor.fabric.shaping import link_commands, qdisc_drops, shaper_batch


def test_every_packet_is_one_frame():
    assert "ip link set dev h-eth0 gso_max_segs 1" in link_commands("h-eth0")


def test_agents_first_then_one_fifo_within_the_access_rate():
    lines = shaper_batch("h-eth0", 5_768_000, 5_768_000 / 1.25, 0x20).splitlines()
    assert lines[0] == "qdisc replace dev h-eth0 root handle 1: htb default 20 r2q 100"
    assert "classid 1:1 htb rate 5768kbit" in lines[1]
    assert "classid 1:10 htb rate 4614kbit ceil 5768kbit prio 0" in lines[2]
    assert "classid 1:20 htb rate 1154kbit ceil 5768kbit prio 1" in lines[3]
    assert lines[4].endswith("match ip tos 0x20 0xfc flowid 1:10")


@pytest.mark.parametrize("agent", [0, 5_768_000, 6_000_000])
def test_an_agent_share_outside_the_access_rate_is_refused(agent):
    with pytest.raises(ValueError, match="agent rate"):
        shaper_batch("h-eth0", 5_768_000, agent, 0x20)


def test_qdisc_drops_are_the_root_qdiscs():
    out = ('[{"kind":"htb","handle":"1:","root":true,"drops":7},'
           '{"kind":"pfifo","handle":"8001:","parent":"1:20","drops":7}]')
    assert qdisc_drops(out) == 7
    assert qdisc_drops("") == 0 and qdisc_drops("[]") == 0
    with pytest.raises(ValueError, match="not JSON"):
        qdisc_drops("Error: Cannot find device")
