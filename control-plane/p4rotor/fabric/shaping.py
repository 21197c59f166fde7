"""A host's sending shaper: the commands that hold a host link to its access rate, and its drops.

Every host sends at most its access rate (htb on its link to its switch), in two classes: the
agents' frames (one DSCP, paced below the agents' share) first -- a frame that waits behind a TCP
burst misses its circuit's window --, then everything else in one FIFO.

**One frame per packet.**  Since Linux 6.x TCP builds GSO super-packets whatever the device's
features (``ethtool -K gso off tso off`` no longer stops it: ``sk_setup_caps`` forces GSO on for
TCP), and htb sends a super-packet as one unit: on this kernel a long flow's queue held 4
packets of ~35 KB each (142 KB, 200 ms at 5.8 Mb/s), a short flow behind it waited for all of
them, and the link carried 35 KB bursts.  ``gso_max_segs 1`` makes every packet one frame, and
TCP's small queues then keep a flow to ~2 frames in the qdisc: a 30 KB flow sharing a host with
a long one took 67-69 ms (its fair half of 5.8 Mb/s: 83 ms) instead of 390-1 270 ms (the
side-by-side measurement is in docs/notes/one-frame-per-packet.md).
"""

from __future__ import annotations

import json

QUANTUM = 1600  # bytes: a full frame per round whatever the rate (rate / r2q is below the MTU here)


def link_commands(dev: str) -> list[str]:
    """Shell commands (run in the host's namespace) that make ``dev`` take one frame per packet."""
    return [f"ethtool -K {dev} tso off gso off", f"ip link set dev {dev} gso_max_segs 1"]


def shaper_batch(dev: str, access_bps: float, agent_bps: float, agent_tos: int) -> str:
    """The ``tc -batch`` lines that shape ``dev``: at most ``access_bps``; frames whose TOS byte
    has the DSCP of ``agent_tos`` (DSCP << 2) first, guaranteed ``agent_bps``; the rest after them."""
    if not 0 < agent_bps < access_bps:
        raise ValueError(f"agent rate {agent_bps:g} b/s must be in (0, access rate {access_bps:g})")
    kbit, agent = int(access_bps / 1000), int(agent_bps / 1000)
    return "\n".join([
        f"qdisc replace dev {dev} root handle 1: htb default 20 r2q 100",
        f"class add dev {dev} parent 1: classid 1:1 htb rate {kbit}kbit quantum {QUANTUM}",
        f"class add dev {dev} parent 1:1 classid 1:10 htb rate {agent}kbit ceil {kbit}kbit prio 0 quantum {QUANTUM}",
        f"class add dev {dev} parent 1:1 classid 1:20 htb rate {kbit - agent}kbit ceil {kbit}kbit prio 1 "
        f"quantum {QUANTUM}",
        f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip tos {agent_tos:#x} 0xfc flowid 1:10",
    ]) + "\n"


def qdisc_drops(tc_json: str) -> int:
    """Packets the root qdisc dropped (its classes' drops included), from ``tc -s -j qdisc show
    dev D``'s output; 0 for a device without a qdisc of its own."""
    try:
        rows = json.loads(tc_json or "[]")
    except json.JSONDecodeError as ex:
        raise ValueError(f"tc's qdisc statistics are not JSON: {ex}") from None
    return sum(int(r.get("drops", 0)) for r in rows if isinstance(r, dict) and r.get("root"))
