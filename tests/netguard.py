"""TEST FIXTURE: a socket guard that lets only loopback through, recording what else was tried.

``install()`` patches ``socket.socket.connect`` / ``connect_ex``, ``socket.create_connection`` and
``socket.getaddrinfo``: any other host fails with ENETUNREACH (as on a machine without a network)
and is appended to :data:`ATTEMPTS`.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any

ATTEMPTS: list[str] = []
_real = {"connect": socket.socket.connect, "connect_ex": socket.socket.connect_ex,
         "getaddrinfo": socket.getaddrinfo, "create_connection": socket.create_connection}


def _loopback(host: Any) -> bool:
    if host in ("localhost", "", None) or isinstance(host, bytes) and host == b"localhost":
        return True
    try:
        return ipaddress.ip_address(host.decode() if isinstance(host, bytes) else host).is_loopback
    except ValueError:
        return False


def _refuse(host: Any) -> OSError:
    ATTEMPTS.append(str(host))
    return OSError(errno.ENETUNREACH, f"network unreachable (test guard): {host}")


def install() -> None:
    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            raise _refuse(address[0])
        return _real["connect"](self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            _refuse(address[0])
            return errno.ENETUNREACH
        return _real["connect_ex"](self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _loopback(host):
            raise socket.gaierror(socket.EAI_NONAME, str(_refuse(host)))
        return _real["getaddrinfo"](host, *args, **kwargs)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
        if not _loopback(address[0]):
            raise _refuse(address[0])
        return _real["create_connection"](address, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]  # on purpose: every socket of the process is guarded
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]  # on purpose, as connect
    socket.getaddrinfo = getaddrinfo
    socket.create_connection = create_connection
