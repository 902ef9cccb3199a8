"""One thread that interrupts statements running past their deadline.

A statement timeout needs something outside the running statement to cancel it. A timer thread
per statement did that, and measured on a loaded 2-core machine, starting it cost more than the
statement it guarded (1.5 ms of a 2.6 ms call). Here one daemon thread keeps the deadlines in a
heap; arming one is a push, and the thread is woken only when a new deadline is earlier than
every other. A statement that finishes first is disarmed (left in the heap, skipped when due).
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress


class Watchdog:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    @contextmanager
    def guard(self, timeout: float | None, interrupt: Callable[[], None]) -> Iterator[None]:
        """Call ``interrupt`` if the block is still running after ``timeout`` seconds."""
        if not timeout:
            yield
            return
        token = self._arm(time.monotonic() + timeout, interrupt)
        try:
            yield
        finally:
            with self._cond:
                self._armed.pop(token, None)

    def _arm(self, deadline: float, interrupt: Callable[[], None]) -> int:
        with self._cond:
            token = next(self._ids)
            self._armed[token] = interrupt
            earliest = not self._heap or deadline < self._heap[0][0]
            heapq.heappush(self._heap, (deadline, token))
            if self._thread is None or not self._thread.is_alive():  # first, or after a fork
                self._thread = threading.Thread(target=self._loop, name="tether-watchdog",
                                                daemon=True)
                self._thread.start()
            elif earliest:
                self._cond.notify()
            return token

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                interrupt = self._armed.pop(token)
            with suppress(Exception):  # a statement that ended meanwhile: nothing to interrupt
                interrupt()


WATCHDOG = Watchdog()
"""The process's one watchdog (sources share it)."""


def _after_fork() -> None:
    """A forked child has no watchdog thread and may hold a copied lock: start afresh."""
    WATCHDOG.__init__()  # type: ignore[misc]


os.register_at_fork(after_in_child=_after_fork)
