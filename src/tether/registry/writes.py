"""The writes write tools applied, in the registry: one row per write, found by its key.

A write claims its confirmation (the caller, the tool and the token) and, when given, its
idempotency key before it touches the data, in a row whose two keys are unique: a second call
with either, on this server or a replica, finds the row instead of writing again. The same
idempotency key (or the same confirmation without one) is answered with the first call's result
once it is done; a confirmation spent under another key is refused: it applies once. The row
then holds the rows changed with their before and after values, written just before the data's
COMMIT (`committing`) and marked `applied` after it. A claim is never taken over: a writer that
died leaves its key spent (`pending`, `committing` or `unsure`), and a new dry run gives a new
confirmation; nothing is ever applied twice, and nothing applied is left off the record.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from tether.errors import TetherError
from tether.registry.store import Registry

_COLUMNS = ("SELECT write_id, write_key, username, tool, version, status, arguments, body, "
            "write_at, updated_at, idem_key FROM writes")


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
        with _registry_errors(conflicts=True), registry.engine.begin() as c:
            c.execute(sa.text(
                "INSERT INTO writes (write_id, write_key, idem_key, username, tool, version, "
                "status, arguments, write_at, updated_at) VALUES (:id, :k, :i, :u, :t, :v, "
                "'pending', :a, :at, :at)"),
                {"id": wid, "k": key, "i": idem, "u": user[:200], "t": tool[:200], "v": version,
                 "a": json.dumps(args, sort_keys=True, default=str), "at": stamp})
        return wid, None
    except sa.exc.IntegrityError:
        pass
    with _registry_errors(), registry.engine.begin() as c:  # the key's write answers first
        r = c.execute(sa.text(_COLUMNS + " WHERE idem_key = :i OR write_key = :k ORDER BY "
                              "CASE WHEN idem_key = :i THEN 0 ELSE 1 END"),
                      {"k": key, "i": idem}).fetchone()
    if r is None:  # released meanwhile: try again
        if tries <= 0:
            raise TetherError("the write's key could not be taken; try again")
        return claim(registry, key, idem, user, tool, version, args, at, tries - 1)
    return str(r[0]), _row(r)


def finish(registry: Registry, wid: str, body: dict[str, Any], at: dt.datetime,
           status: str = "applied", product: str | None = None) -> None:
    """The write's result kept under its key: ``committing`` just before the data's COMMIT (a
    process that dies after it leaves the rows on record), ``applied`` once it is committed.
    With ``product``, each row it changes is recorded by its key (:func:`origins`)."""
    stamp = at.astimezone(dt.UTC).isoformat()
    with _registry_errors(), registry.engine.begin() as c:
        c.execute(sa.text("UPDATE writes SET status = :s, body = :b, updated_at = :at "
                          "WHERE write_id = :id"),
                  {"s": status, "b": json.dumps(body, sort_keys=True, default=str),
                   "at": stamp, "id": wid})
        if product is not None:
            rows = [{"id": wid, "p": product[:200], "k": row_key(ch["key"]),
                     "t": str(body.get("action", ""))[:200], "at": stamp,
                     "b": json.dumps(ch["before"], sort_keys=True, default=str),
                     "a": json.dumps(ch["after"], sort_keys=True, default=str)}
                    for ch in body.get("changes") or []]
            if rows:
                c.execute(sa.text(
                    "INSERT INTO write_rows (write_id, product, row_key, tool, before_values, "
                    "after_values, write_at) VALUES (:id, :p, :k, :t, :b, :a, :at)"), rows)


def row_key(key: dict[str, Any]) -> str:
    """A row's key as the registry finds it: a digest of its columns' values as JSON shows
    them."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def origins(registry: Registry, product: str, keys: list[dict[str, Any]]
            ) -> dict[str, dict[str, Any]]:
    """row_key -> the newest write that changed that row (its tool, write id, and the values
    before and after), among writes that applied or may have (committing, unsure)."""
    if not keys:
        return {}
    wanted = sorted({row_key(k) for k in keys})
    sql = sa.text(
        "SELECT r.row_key, r.tool, r.write_id, r.before_values, r.after_values FROM write_rows r "
        "JOIN writes w ON w.write_id = r.write_id WHERE r.product = :p AND r.row_key IN :ks "
        "AND w.status IN ('committing', 'applied', 'unsure') ORDER BY r.write_at DESC"
    ).bindparams(sa.bindparam("ks", expanding=True))
    with _registry_errors(), registry.engine.begin() as c:
        found = c.execute(sql, {"p": product, "ks": wanted}).fetchall()
    out: dict[str, dict[str, Any]] = {}
    for k, tool, wid, before, after in found:
        out.setdefault(k, {"tool": tool, "write_id": wid, "before": json.loads(before),
                           "after": json.loads(after)})
    return out


def unsure(registry: Registry, wid: str, at: dt.datetime) -> None:
    """The engine failed at or after the write's UPDATE: whether it committed is not known. The
    key stays spent (never applied twice); its result says to check the rows."""
    with _registry_errors(), registry.engine.begin() as c:
        c.execute(sa.text("UPDATE writes SET status = 'unsure', updated_at = :at WHERE "
                          "write_id = :id AND status <> 'applied'"),
                  {"at": at.astimezone(dt.UTC).isoformat(), "id": wid})


def release(registry: Registry, wid: str) -> None:
    """The write was refused before anything was committed: its key is free again."""
    with _registry_errors(), registry.engine.begin() as c:
        c.execute(sa.text("DELETE FROM writes WHERE write_id = :id AND status = 'pending'"),
                  {"id": wid})


@contextmanager
def _registry_errors(conflicts: bool = False) -> Iterator[None]:
    """A registry that fails says so cleanly (``conflicts``: a unique-key conflict, a claim
    already held, goes through as it is)."""
    try:
        yield
    except sa.exc.IntegrityError:
        if conflicts:
            raise
        raise TetherError("the registry refused the write's record",
                          hint="Check registry.url; the write's rows say whether it applied."
                          ) from None
    except sa.exc.SQLAlchemyError as e:
        reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
        raise TetherError(f"the registry could not record the write: {reason[:200]}",
                          hint="Check registry.url; the write's rows say whether it applied."
                          ) from None


def writes(registry: Registry, user: str | None = None, limit: int = 100
           ) -> list[dict[str, Any]]:
    """The newest writes (of ``user``), newest first."""
    sql = _COLUMNS + (" WHERE username = :u" if user else "") + " ORDER BY write_at DESC"
    with registry.engine.begin() as c:
        rows = c.execute(sa.text(sql), {"u": user} if user else {}).fetchmany(limit)
    return [_row(r) for r in rows]
