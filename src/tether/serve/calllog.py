"""The call log: every call a server answers (or refuses), written to the registry in batches.

Owns the entries waiting to be written, how many were dropped while the registry could not be
reached, and why it could not. An entry is written in a batch of 50, within half a second by the
server's background loop, and at shutdown; while the registry is away entries wait (at most
MAX_PENDING, the oldest going first) and the log says when it went and when it came back. May
call: the registry's call log and stderr. What an entry says of a call is the caller's
(serve/calls.py); what is stored of its arguments is capped here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from tether.registry import Registry
from tether.sources.base import first_line

MAX_PENDING = 100_000
"""Call log entries kept while the registry cannot be reached; the oldest go past this."""
BATCH = 50
"""Entries written at once, whenever this many wait."""
LOGGED_ARGUMENTS = 4096
"""Bytes of a call's arguments the call log keeps; beyond that, a prefix and a sha256."""


class CallLog:
    def __init__(self, registry: Registry, log: Callable[[str], None]):
        self.registry = registry
        self.log = log
        self.pending: list[dict[str, Any]] = []
        self.lost = 0
        self.error: str | None = None  # why the registry could not be written, if so

    def record(self, entry: dict[str, Any]) -> None:
        """One call's entry (its time stamped now; a NUL a client sent replaced, as no text
        column takes it)."""
        self.pending.append({k: v.replace("\x00", "\ufffd") if isinstance(v, str) else v
                             for k, v in {"at": dt.datetime.now(dt.UTC).isoformat(),
                                          **entry}.items()})

    @property
    def due(self) -> bool:
        """A batch waits and the registry is reachable: write it now (never on the event
        loop)."""
        return len(self.pending) >= BATCH and self.error is None

    def flush(self) -> bool:
        """The pending calls into the registry's log. While the registry cannot be reached they
        wait (the oldest are dropped past MAX_PENDING, and the log says how many); False then."""
        batch, self.pending = self.pending, []
        try:
            self.registry.record_calls(batch)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as e:  # unreachable: wait
            kept = (batch + self.pending)[-MAX_PENDING:]
            self.lost += len(batch) + len(self.pending) - len(kept)
            self.pending = kept
            self.down(e)
            return False
        except sa.exc.SQLAlchemyError:  # an entry the registry refuses: never the others
            for entry in batch:
                try:
                    self.registry.record_calls([entry])
                except sa.exc.SQLAlchemyError as e:
                    self.log(f"tether: a call log entry for {entry.get('tool')!r} was refused "
                             f"by the registry and dropped ({first_line(e)})")
        return True

    def down(self, e: Exception) -> None:
        if self.error is None:
            self.log(f"tether: the registry cannot be reached ({first_line(e)}); serving what "
                     "was last read, keeping the call log's new entries until it is back")
        self.error = str(e)

    def up(self) -> None:
        if self.error is not None:
            lost = f"; {self.lost} call log entries were dropped" if self.lost else ""
            self.log(f"tether: the registry is back{lost}")
        self.error = None

    def close(self) -> None:
        if not self.flush() and self.pending:
            self.log(f"tether: {len(self.pending)} call log entries could not be written: the "
                     "registry cannot be reached")


def logged_arguments(args: dict[str, Any]) -> str:
    """A call's arguments as the call log stores them: the JSON when it is at most 4 KiB, else
    ``{"truncated": <its first 4000 bytes>, "sha256": ..., "bytes": ...}``."""
    text = json.dumps(args, sort_keys=True, default=str)
    data = text.encode()
    if len(data) <= LOGGED_ARGUMENTS:
        return text
    return json.dumps({"truncated": data[:4000].decode(errors="ignore"),
                       "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})


def capped_details(found: dict[str, Any]) -> str | None:
    """What the server read a call as, as the call log keeps it (for `tether learn`): within
    LOGGED_ARGUMENTS, a write's rows left to the registry's writes first, then the names a
    caller made up."""
    kept = {k: v for k, v in found.items() if v}
    text = json.dumps(kept, sort_keys=True, default=str)
    write = kept.get("write")
    if len(text.encode()) > LOGGED_ARGUMENTS and isinstance(write, dict):  # the registry's
        kept["write"] = {k: v for k, v in write.items() if k != "changes"}  # writes keep them
        text = json.dumps(kept, sort_keys=True, default=str)
    if len(text.encode()) > LOGGED_ARGUMENTS:  # names a caller made up: capped like arguments
        kept = {k: v for k, v in kept.items() if k not in ("interpreted", "moved_values")}
        text = json.dumps(kept, sort_keys=True, default=str)
    return text if kept else None
