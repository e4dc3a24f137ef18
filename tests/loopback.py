"""Loopback socket conditions for the HTTP client tests (no tests here)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def full_listen_queue() -> Iterator[tuple[str, int]]:
    """The address of a listener that never accepts, its queue full: the kernel drops further
    SYNs, so a connect to it hangs, all on 127.0.0.1."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(address)
            fillers.append(filler)
        yield address
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
