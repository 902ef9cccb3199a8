"""The registry: immutable tool versions and publications, in SQLite (default) or PostgreSQL.

A publication is one transaction: every new version of it lands, or none does. Versions are never
updated in place; the current version of a tool is the newest one published.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tether.errors import SourceError
from tether.sources.sqlalchemy import driver_url

SCHEMA_VERSION = 1
_MIGRATIONS = [
    """CREATE TABLE IF NOT EXISTS tether_meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS publications (
         id INTEGER PRIMARY KEY, published_at VARCHAR(40) NOT NULL, rule VARCHAR(200) NOT NULL,
         tools TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS tool_versions (
         name VARCHAR(200) NOT NULL, version VARCHAR(40) NOT NULL,
         publication INTEGER NOT NULL REFERENCES publications(id),
         content_hash VARCHAR(80) NOT NULL, definition TEXT NOT NULL, plan TEXT NOT NULL,
         published_at VARCHAR(40) NOT NULL, PRIMARY KEY (name, version))""",
    """CREATE TABLE IF NOT EXISTS call_log (
         at VARCHAR(40) NOT NULL, username VARCHAR(200) NOT NULL, role VARCHAR(200) NOT NULL,
         tool VARCHAR(200) NOT NULL, version VARCHAR(40), arguments TEXT NOT NULL,
         latency_ms DOUBLE PRECISION NOT NULL, row_count INTEGER, error TEXT,
         as_of VARCHAR(40), deprecated INTEGER NOT NULL DEFAULT 0)""",
]

VOLATILE_KEYS = ("version", "supersedes", "generated_at", "change_level", "change_kind",
                 "change_note", "deprecation", "review")
"""Provenance keys set by publication, not by generation: excluded from the content hash."""


@dataclass(frozen=True)
class ToolVersion:
    name: str
    version: str
    publication: int
    content_hash: str
    definition: dict[str, Any]
    plan: dict[str, Any]
    published_at: str


@dataclass(frozen=True)
class NewVersion:
    name: str
    version: str
    definition: dict[str, Any]
    plan: dict[str, Any]


def content_hash(wire: dict[str, Any]) -> str:
    """sha256 of a wire definition without its publication fields."""
    d = json.loads(json.dumps(wire))
    ctx = d.get("_meta", {}).get("tether/context", {})
    for k in VOLATILE_KEYS:
        ctx.pop(k, None)
    blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def registry_url(url: str, root: Path) -> str:
    """sqlite:///relative paths resolve against the project directory."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        path = root / url[len("sqlite:///"):]
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"
    return driver_url(url)


class Registry:
    def __init__(self, url: str, root: Path):
        self.url = registry_url(url, root)
        try:
            self.engine = sa.create_engine(self.url)
            with self.engine.begin() as c:
                for ddl in _MIGRATIONS:
                    c.execute(sa.text(ddl))
                c.execute(sa.text(
                    "INSERT INTO tether_meta (key, value) SELECT 'schema_version', :v "
                    "WHERE NOT EXISTS (SELECT 1 FROM tether_meta WHERE key = 'schema_version')"),
                    {"v": str(SCHEMA_VERSION)})
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).splitlines()[0]
            raise SourceError(f"the registry at {url} cannot be opened: {reason}",
                              hint="Check registry.url in tether.yaml.") from None

    @contextmanager
    def _tx(self) -> Iterator[sa.Connection]:
        with self.engine.begin() as c:
            yield c

    def current(self) -> dict[str, ToolVersion]:
        """The newest version of every tool, by name."""
        out: dict[str, ToolVersion] = {}
        for v in self.versions():
            out[v.name] = v  # versions() is ordered by publication, so the newest wins
        return out

    def versions(self, name: str | None = None) -> list[ToolVersion]:
        sql = ("SELECT name, version, publication, content_hash, definition, plan, published_at "
               "FROM tool_versions" + (" WHERE name = :n" if name else "")
               + " ORDER BY publication, name")
        with self._tx() as c:
            rows = c.execute(sa.text(sql), {"n": name} if name else {}).fetchall()
        return [ToolVersion(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), r[6])
                for r in rows]

    def publish(self, versions: list[NewVersion], rule: str, at: dt.datetime) -> int | None:
        """Publish all ``versions`` in one transaction; returns the publication id (None if empty)."""
        if not versions:
            return None
        stamp = at.astimezone(dt.UTC).isoformat()
        with self._tx() as c:
            pid = int(c.execute(sa.text("SELECT COALESCE(MAX(id), 0) + 1 FROM publications")
                                ).scalar_one())
            c.execute(sa.text("INSERT INTO publications (id, published_at, rule, tools) "
                              "VALUES (:id, :at, :rule, :tools)"),
                      {"id": pid, "at": stamp, "rule": rule,
                       "tools": json.dumps(sorted(v.name for v in versions))})
            for v in versions:
                c.execute(sa.text(
                    "INSERT INTO tool_versions (name, version, publication, content_hash, "
                    "definition, plan, published_at) VALUES (:n, :v, :p, :h, :d, :pl, :at)"),
                    {"n": v.name, "v": v.version, "p": pid, "h": content_hash(v.definition),
                     "d": json.dumps(v.definition, sort_keys=True), "pl": json.dumps(v.plan),
                     "at": stamp})
        return pid

    def latest_publication(self) -> int:
        with self._tx() as c:
            return int(c.execute(sa.text("SELECT COALESCE(MAX(id), 0) FROM publications")
                                 ).scalar_one())

    def record_calls(self, calls: list[dict[str, Any]]) -> None:
        """Append call records (one transaction; the server batches them)."""
        if not calls:
            return
        with self._tx() as c:
            c.execute(sa.text(
                "INSERT INTO call_log (at, username, role, tool, version, arguments, latency_ms, "
                "row_count, error, as_of, deprecated) VALUES (:at, :user, :role, :tool, :version, "
                ":arguments, :latency_ms, :rows, :error, :as_of, :deprecated)"), calls)

    def calls(self) -> list[dict[str, Any]]:
        with self._tx() as c:
            rows = c.execute(sa.text(
                "SELECT at, username, role, tool, version, arguments, latency_ms, row_count, "
                "error, as_of, deprecated FROM call_log ORDER BY at, tool")).mappings().all()
        return [dict(r) for r in rows]

    def close(self) -> None:
        self.engine.dispose()
