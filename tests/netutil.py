"""Ports for servers the tests start, safe when several test processes run at once
(pytest-xdist workers, other developers' runs on the same machine).

Asking the kernel for a free port, closing the socket and handing the number to
a server leaves a window in which another process can take the port: then the
server fails to start or, worse, the test talks to somebody else's server. An
in-process server therefore gets the socket itself (:func:`bound_socket`, passed
to ``uvicorn.Server.run(sockets=[...])``), so the port is never free in between.
Only a server in a subprocess, which can be given a number and nothing else,
uses :func:`free_port`; its start-up helper checks the process is alive.
"""

from __future__ import annotations

import socket


def bound_socket(port: int = 0) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:``port`` (0: a port the kernel picks), not yet
    listening. ``SO_REUSEADDR`` lets a restarted server bind its old port again while
    connections of its previous life are in TIME_WAIT."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def free_port() -> int:
    """A port that was free a moment ago (for a server in a subprocess only)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
