"""A TUN interface for the RotorLB agent: unmodified applications (iperf3, curl) send IP packets to
another rack's TUN address; the agent carries them as bulk data and writes them into the
destination host's TUN interface.  Addresses: 10.200.<rack>.<n>/16 (``rack_of`` reads the rack)."""

from __future__ import annotations

import fcntl
import ipaddress
import os
import struct
import subprocess

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
NET = ipaddress.ip_network("10.200.0.0/16")


class TunError(OSError):
    pass


class Tun:
    def __init__(self, name: str, addr: str, mtu: int):
        iface = ipaddress.ip_interface(addr)
        if iface.ip not in NET:
            raise TunError(f"TUN address {addr} is outside {NET}")
        try:
            self.fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            fcntl.ioctl(self.fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
        except OSError as ex:
            raise TunError(f"cannot create TUN interface {name}: {ex.strerror}") from None
        for cmd in (["ip", "addr", "add", str(iface), "dev", name], ["ip", "link", "set", name, "mtu", str(mtu), "up"]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise TunError(f"{' '.join(cmd)}: {r.stderr.strip()}")
        self.name = name
        self.host = iface.ip.packed[3]  # agents pair by host number: 10.200.<rack>.<host>

    def rack_of(self, packet: bytes) -> int | None:
        """The destination rack of an IPv4 packet to the TUN address of this agent's host number in
        another rack (None: anything else: not IPv4, outside 10.200/16, another host number)."""
        if len(packet) < 20 or packet[0] >> 4 != 4:
            return None
        dst = ipaddress.IPv4Address(packet[16:20])
        if dst not in NET or dst.packed[3] != self.host:
            return None
        return dst.packed[2]

    def read_all(self) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(os.read(self.fd, 65535))
            except BlockingIOError:
                return out

    def write(self, packet: bytes) -> bool:
        """Hand a packet to the kernel; False if it refused it (the caller counts that)."""
        try:
            os.write(self.fd, packet)
            return True
        except OSError:
            return False

    def close(self) -> None:
        os.close(self.fd)
