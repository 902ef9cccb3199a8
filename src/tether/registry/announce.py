"""Publications announced to every server on a PostgreSQL registry (LISTEN/NOTIFY).

A publication's transaction sends one notification per version on the channel
``tether_publications`` (payload: the registry's id, the publication, tool, version, kind).
PostgreSQL delivers them when the transaction commits, and never if it rolls back, so a replica
hears of exactly what the registry holds. A replica keeps one connection of its own that
LISTENs; hearing of a publication newer than the one it serves, it reads the registry again. It
also reads the registry when it (re)connects, and every few seconds in any case, so a replica
that started late or lost its connection catches up without any message. A SQLite registry has
no channel: its servers read it on each tick.

The channel is per database, not per schema: a payload for another registry (another schema of
the same database) is ignored by its id.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

import sqlalchemy as sa

from tether.sources.sqlalchemy import libpq_url

CHANNEL = "tether_publications"


def announce(c: sa.Connection, registry_id: str, publication: int,
             versions: list[tuple[str, str, str]]) -> None:
    """Within the publishing transaction: one notification per (tool, version, kind)."""
    if c.dialect.name != "postgresql" or not versions:
        return
    c.execute(sa.text("SELECT pg_notify(:topic, :payload)"), [
        {"topic": CHANNEL, "payload": json.dumps({
            "registry": registry_id, "publication": publication, "tool": tool[:200],
            "version": version, "kind": kind})}
        for tool, version, kind in versions])


class Listener:
    """One server's ear on the channel: a connection of its own, LISTENing.

    :meth:`wait` blocks up to ``timeout`` seconds and says whether the registry should be read
    now: a publication newer than ``newest`` was announced, or the connection was (re)made and
    what was announced meanwhile is unknown. When PostgreSQL cannot be reached it waits out the
    timeout and says yes (the caller's read of the registry then fails, and says so).
    """

    def __init__(self, url: str, registry_id: str, connect_timeout: int = 2):
        self.url = libpq_url(url)
        self.registry_id = registry_id
        self.connect_timeout = connect_timeout
        self._conn: Any = None
        self._lock = threading.Lock()  # one waiter at a time; close waits for it
        self._closed = False

    def wait(self, timeout: float, newest: int) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._conn is None:
                return self._connect(timeout)
            try:
                return self._listen(timeout, newest)
            except Exception:  # the connection broke (a restart, a network cut): start again
                self._drop()
                return True

    def _connect(self, timeout: float) -> bool:
        import psycopg

        started = time.monotonic()
        try:
            self._conn = psycopg.connect(self.url, autocommit=True,
                                         connect_timeout=self.connect_timeout)
            self._conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error:
            self._drop()
            time.sleep(max(0.0, timeout - (time.monotonic() - started)))
        return True

    def _listen(self, timeout: float, newest: int) -> bool:
        found = False
        deadline = time.monotonic() + timeout
        while not found:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for note in self._conn.notifies(timeout=left, stop_after=1):
                found = self._newer(note.payload, newest)
        # the rest of a large publication arrives at once: take it now, not one per tick
        for note in self._conn.notifies(timeout=0.05):
            self._newer(note.payload, newest)
        return True

    def _newer(self, payload: str, newest: int) -> bool:
        try:
            said = json.loads(payload)
            if said.get("registry") != self.registry_id:
                return False
            return int(said["publication"]) > newest
        except (ValueError, TypeError, KeyError, AttributeError):
            return False  # not ours to read

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._drop()
