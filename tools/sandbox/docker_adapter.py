"""docker-py's adapter: the one module that touches private parts of docker-py (and of the socket
it hands back), tests/test_public_apis.py.

An exec's output is read from the raw socket (`exec_start(socket=True)`, public) so that it can be
cut after a timeout. Two things around it have no public door:
- the socket comes with the client's read timeout (60 s by default): a quiet command would be cut
  off. docker-py clears it with `APIClient._disable_socket_timeout` before its own stream readers;
  we call the same method, so the rule stays docker-py's.
- over plain HTTP the socket is a `socket.SocketIO` around the real socket (`._sock`), and only
  the real socket can be shut down from another thread.
tests/test_adapters.py fails when an upgrade moves either.
"""

from __future__ import annotations

import socket
from typing import Any


def exec_socket(api: Any, exec_id: str) -> Any:
    """The raw output socket of exec `exec_id`, started now, without a read timeout."""
    sock = api.exec_start(exec_id, socket=True)
    api._disable_socket_timeout(sock)
    return sock


def send(sock: Any, data: bytes) -> None:
    """Write `data` to an exec socket's stdin."""
    getattr(sock, "_sock", sock).sendall(data)


def shutdown(sock: Any) -> None:
    """Shut an exec socket down for both directions (a blocked reader returns); closed is fine."""
    try:
        getattr(sock, "_sock", sock).shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):  # already closed: its _sock is None
        pass
