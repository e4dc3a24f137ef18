"""Repeated wrong keys on the sign-in form are slowed down: per client address, and overall.

After ``FREE`` wrong keys from one address, each further try from it must wait, twice as long
after each new failure (from ``FIRST_WAIT`` seconds up to ``LONGEST_WAIT``); a right key clears
the address. Over ``OVERALL`` wrong keys in a minute on the whole server, every try waits for
the minute to pass. Memory is bounded: at most ``MOST_ADDRESSES`` addresses are remembered (the
oldest forgotten first). Behind a reverse proxy every client has the proxy's address, and the
per-address limit acts as a second overall one (X-Forwarded-For is not trusted).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

FREE = 3
FIRST_WAIT = 5.0
LONGEST_WAIT = 300.0
OVERALL = 60
MOST_ADDRESSES = 4096


class Throttle:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._addresses: dict[str, tuple[int, float]] = {}  # address -> (failures, wait until)
        self._recent: deque[float] = deque(maxlen=OVERALL)  # the last OVERALL failures' times

    def wait(self, address: str) -> float:
        """Seconds ``address`` must wait before its next try (0: it may try now)."""
        now = self._clock()
        overall = 0.0
        if len(self._recent) == OVERALL:
            overall = self._recent[0] + 60.0 - now
        _, until = self._addresses.get(address, (0, 0.0))
        return max(0.0, overall, until - now)

    def failed(self, address: str) -> None:
        now = self._clock()
        self._recent.append(now)
        failures, _ = self._addresses.pop(address, (0, 0.0))
        failures += 1
        until = 0.0
        if failures >= FREE:
            until = now + min(LONGEST_WAIT, FIRST_WAIT * 2 ** (failures - FREE))
        if len(self._addresses) >= MOST_ADDRESSES:
            self._addresses.pop(next(iter(self._addresses)))
        self._addresses[address] = (failures, until)

    def succeeded(self, address: str) -> None:
        self._addresses.pop(address, None)
