"""The writes write tools applied, in the registry: one row per write, found by its key.

A write claims its confirmation (the caller, the tool and the token) and, when given, its
idempotency key before it touches the data, in a row whose two keys are unique: a second call
with either, on this server or a replica, finds the row instead of writing again. The same
idempotency key (or the same confirmation without one) is answered with the first call's result
once it is done; a confirmation spent under another key is refused: it applies once. The row
then holds the rows changed with their before and after values. A claim whose writer died is
taken over after a while (the confirmation is bound to the rows as they were, so a write that
did land is not applied twice).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from typing import Any

import sqlalchemy as sa

from tether.errors import TetherError
from tether.registry.store import Registry

_COLUMNS = ("SELECT write_id, write_key, username, tool, version, status, arguments, body, "
            "write_at, updated_at, idem_key FROM writes")
STALE_SECONDS = 120.0
"""A pending claim older than this is taken to be a writer that died."""


def write_key(user: str, tool: str, key: str) -> str:
    return hashlib.sha256(json.dumps([user, tool, key]).encode()).hexdigest()


def _row(r: Any) -> dict[str, Any]:
    return {"write_id": r[0], "key": r[1], "user": r[2], "tool": r[3], "version": r[4],
            "status": r[5], "arguments": json.loads(r[6]),
            "body": json.loads(r[7]) if r[7] else None, "write_at": r[8], "updated_at": r[9],
            "idem_key": r[10]}


def claim(registry: Registry, key: str, idem: str | None, user: str, tool: str, version: str,
          args: dict[str, Any], at: dt.datetime, tries: int = 3
          ) -> tuple[str, dict[str, Any] | None]:
    """(write id, None) when this call holds its confirmation ``key`` (and idempotency key
    ``idem``) now; (the id, the row) of the write that holds either already."""
    stamp = at.astimezone(dt.UTC).isoformat()
    wid = "w-" + uuid.uuid4().hex[:16]
    try:
        with registry.engine.begin() as c:
            c.execute(sa.text(
                "INSERT INTO writes (write_id, write_key, idem_key, username, tool, version, "
                "status, arguments, write_at, updated_at) VALUES (:id, :k, :i, :u, :t, :v, "
                "'pending', :a, :at, :at)"),
                {"id": wid, "k": key, "i": idem, "u": user[:200], "t": tool[:200], "v": version,
                 "a": json.dumps(args, sort_keys=True, default=str), "at": stamp})
        return wid, None
    except sa.exc.IntegrityError:
        pass
    with registry.engine.begin() as c:  # the idempotency key's write first: it answers
        r = c.execute(sa.text(_COLUMNS + " WHERE idem_key = :i OR write_key = :k ORDER BY "
                              "CASE WHEN idem_key = :i THEN 0 ELSE 1 END"),
                      {"k": key, "i": idem}).fetchone()
    if r is None:  # released meanwhile: try again
        if tries <= 0:
            raise TetherError("the write's key could not be taken; try again")
        return claim(registry, key, idem, user, tool, version, args, at, tries - 1)
    row = _row(r)
    held = dt.datetime.fromisoformat(row["updated_at"])
    if row["status"] == "pending" and (at - held).total_seconds() > STALE_SECONDS:
        with registry.engine.begin() as c:  # take over a dead writer's claim, once
            took = c.execute(sa.text(
                "UPDATE writes SET updated_at = :at WHERE write_id = :id AND status = 'pending' "
                "AND updated_at = :old"), {"at": stamp, "id": row["write_id"],
                                           "old": row["updated_at"]}).rowcount
        if took == 1:
            return row["write_id"], None
    return row["write_id"], row


def finish(registry: Registry, wid: str, body: dict[str, Any], at: dt.datetime) -> None:
    """The write is committed: its result (rows before and after) kept under its key."""
    with registry.engine.begin() as c:
        c.execute(sa.text("UPDATE writes SET status = 'applied', body = :b, updated_at = :at "
                          "WHERE write_id = :id"),
                  {"b": json.dumps(body, sort_keys=True, default=str),
                   "at": at.astimezone(dt.UTC).isoformat(), "id": wid})


def release(registry: Registry, wid: str) -> None:
    """The write did not happen: its key is free again (a retry may apply it)."""
    with registry.engine.begin() as c:
        c.execute(sa.text("DELETE FROM writes WHERE write_id = :id AND status = 'pending'"),
                  {"id": wid})


def writes(registry: Registry, user: str | None = None, limit: int = 100
           ) -> list[dict[str, Any]]:
    """The newest writes (of ``user``), newest first."""
    sql = _COLUMNS + (" WHERE username = :u" if user else "") + " ORDER BY write_at DESC"
    with registry.engine.begin() as c:
        rows = c.execute(sa.text(sql), {"u": user} if user else {}).fetchmany(limit)
    return [_row(r) for r in rows]
