"""TEST HELPER: the TCP addresses a process and its descendants listen on, read from Linux's /proc
(the sockets each process holds, matched by inode against /proc/net/tcp and tcp6)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

_LISTEN = "0A"


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return kids


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += _children(current)
    return tree


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir() if fds.is_dir() else ():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def _address(hex_ip: str) -> str:
    raw = bytes.fromhex(hex_ip)
    # /proc prints each 32-bit word of the address in host (little-endian) order
    return str(ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))))


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(IP, port) of every TCP socket in LISTEN state held by ``pid`` or its descendants."""
    inodes = set().union(*(_socket_inodes(p) for p in process_tree(pid)))
    found: set[tuple[str, int]] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == _LISTEN and fields[9] in inodes:
                ip, port = fields[1].split(":")
                found.add((_address(ip), int(port, 16)))
    return found


def all_loopback(addresses: set[tuple[str, int]]) -> bool:
    return bool(addresses) and all(ipaddress.ip_address(ip).is_loopback for ip, _ in addresses)
