"""Learn's proposals in the registry: one row each, found again by its key (the rule, the place
and the subject), so a second run of `tether learn` updates the evidence instead of adding a
twin, and a dismissed proposal stays dismissed until newer evidence arrives."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from tether.errors import TetherError
from tether.registry.store import Registry

_COLUMNS = ("SELECT id, proposal_key, rule, product, status, support, newest, body, created_at, "
            "updated_at, decided_by, decided_at, publication FROM learn_proposals")


def _row(r: Any) -> dict[str, Any]:
    return {"id": int(r[0]), "key": r[1], "rule": r[2], "product": r[3], "status": r[4],
            "support": int(r[5]), "newest": r[6], "body": json.loads(r[7]),
            "created_at": r[8], "updated_at": r[9], "decided_by": r[10], "decided_at": r[11],
            "publication": r[12]}


def proposals(registry: Registry, status: str | None = None) -> list[dict[str, Any]]:
    """Every proposal (or those with ``status``), by id."""
    sql = _COLUMNS + (" WHERE status = :s" if status else "") + " ORDER BY id"
    with registry.engine.begin() as c:
        rows = c.execute(sa.text(sql), {"s": status} if status else {}).fetchall()
    return [_row(r) for r in rows]


def proposal(registry: Registry, pid: int) -> dict[str, Any] | None:
    with registry.engine.begin() as c:
        r = c.execute(sa.text(_COLUMNS + " WHERE id = :id"), {"id": pid}).fetchone()
    return _row(r) if r is not None else None


Merge = Callable[[dict[str, Any] | None, dict[str, Any]], dict[str, Any] | None]
"""(the stored row or None, the found proposal) -> the row to write, or None to leave it."""


_LOCK = 2122186755  # the advisory lock learn's writers take turns on (PostgreSQL)
_TRIES = 5


@contextmanager
def _turn(registry: Registry) -> Iterator[sa.Connection]:
    """One writer at a time: PostgreSQL's advisory lock, SQLite's write lock taken at the start
    (BEGIN IMMEDIATE), so two runs never read the same rows and both write."""
    with registry.engine.connect() as c:
        if c.dialect.name == "sqlite":
            c.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield c
                c.exec_driver_sql("COMMIT")
            except BaseException:
                c.exec_driver_sql("ROLLBACK")
                raise
            return
        with c.begin():
            if c.dialect.name == "postgresql":
                c.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})
            yield c


def _retried(fn: Callable[[], Any]) -> Any:
    """SQLite answers "database is locked" to a writer that waited past its timeout."""
    for attempt in range(_TRIES):
        try:
            return fn()
        except sa.exc.OperationalError as e:
            if "locked" not in str(e) or attempt == _TRIES - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    return None


def save(registry: Registry, found: list[dict[str, Any]], merge: Merge, at: dt.datetime
         ) -> list[int]:
    """Store what one run of learn found, in one transaction: each found proposal (``key``,
    ``rule``, ``product``, ``support``, ``newest``, ``body``) merged with the row of its key by
    ``merge``; the ids of the rows written."""
    return list(_retried(lambda: _save(registry, found, merge, at)))


def _save(registry: Registry, found: list[dict[str, Any]], merge: Merge, at: dt.datetime
          ) -> list[int]:
    stamp = at.astimezone(dt.UTC).isoformat()
    ids: list[int] = []
    with _turn(registry) as c:
        for p in found:
            r = c.execute(sa.text(_COLUMNS + " WHERE proposal_key = :k"), {"k": p["key"]}
                          ).fetchone()
            old = _row(r) if r is not None else None
            new = merge(old, p)
            if new is None:
                continue
            values = {"k": p["key"], "rule": p["rule"][:60], "product": p["product"][:200],
                      "status": new["status"], "support": new["support"],
                      "newest": new["newest"], "body": json.dumps(new["body"], sort_keys=True,
                                                                  default=str),
                      "at": stamp}
            if old is None:
                pid = int(c.execute(sa.text("SELECT COALESCE(MAX(id), 0) + 1 FROM "
                                            "learn_proposals")).scalar_one())
                c.execute(sa.text(
                    "INSERT INTO learn_proposals (id, proposal_key, rule, product, status, "
                    "support, newest, body, created_at, updated_at) VALUES (:id, :k, :rule, "
                    ":product, :status, :support, :newest, :body, :at, :at)"), values | {"id": pid})
            else:
                pid = old["id"]
                reopened = old["status"] != new["status"]  # a decision no longer stands
                c.execute(sa.text(
                    "UPDATE learn_proposals SET status = :status, support = :support, "
                    "newest = :newest, body = :body, updated_at = :at"
                    + (", decided_by = NULL, decided_at = NULL" if reopened else "")
                    + " WHERE id = :id"), values | {"id": pid})
            ids.append(pid)
    return ids


def decide(registry: Registry, pid: int, status: str, by: str, at: dt.datetime,
           body: dict[str, Any], publication: int | None = None,
           expected: str | None = None) -> None:
    """Record a decision on a proposal (applied or dismissed) and its body as decided; with
    ``expected``, only while its status is still that (else an error: someone decided first)."""
    def go() -> int:
        with _turn(registry) as c:
            return int(c.execute(sa.text(
                "UPDATE learn_proposals SET status = :s, decided_by = :by, decided_at = :at, "
                "updated_at = :at, body = :body, publication = :pub WHERE id = :id"
                + (" AND status = :expected" if expected else "")),
                {"s": status, "by": by[:200], "at": at.astimezone(dt.UTC).isoformat(),
                 "body": json.dumps(body, sort_keys=True, default=str), "pub": publication,
                 "id": pid, "expected": expected}).rowcount)

    if _retried(go) == 0:
        raise TetherError(f"proposal {pid} was decided by someone else meanwhile.",
                          hint=f"See what was decided: tether learn report {pid}")
