"""The registry: immutable tool versions and publications, in SQLite (default) or PostgreSQL.

A publication is one transaction: every new version of it lands, or none does. Versions are never
updated in place; the current version of a tool is the newest one published.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tether.context.meta import context_of, context_sql
from tether.errors import SourceError, TetherError
from tether.keyfile import private_file
from tether.policy.versions import POLICY_KIND
from tether.registry.announce import Listener, announce
from tether.sources.sqlalchemy import driver_url

SCHEMA_VERSION = 7
_PUBLISH_LOCK = 0x7E7E_0001  # the advisory lock a PostgreSQL publication holds to its commit
_EVENTS_LOCK = 0x7E7E_0002  # the same for recording drift events
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
    """CREATE TABLE IF NOT EXISTS check_state (
         key VARCHAR(200) PRIMARY KEY, value TEXT NOT NULL, updated_at VARCHAR(40) NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS drift_events (
         id INTEGER PRIMARY KEY, kind VARCHAR(40) NOT NULL, subject VARCHAR(400) NOT NULL,
         details TEXT NOT NULL, first_observed_at VARCHAR(40), detected_at VARCHAR(40) NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS reviews (
         id INTEGER PRIMARY KEY, status VARCHAR(20) NOT NULL, route VARCHAR(20) NOT NULL,
         rule VARCHAR(200), decided_by VARCHAR(200), created_at VARCHAR(40) NOT NULL,
         decided_at VARCHAR(40), body TEXT NOT NULL)""",
]

# Changes to tables that already exist, by the schema version that brought them; each runs once
# (an older registry is brought forward when opened, and keeps everything it holds).
_UPGRADES: dict[int, list[str]] = {
    2: ["ALTER TABLE reviews ADD COLUMN comment TEXT"],  # the decider's comment
    3: ["ALTER TABLE reviews ADD COLUMN author VARCHAR(200)"],  # who ran what opened it
    # a drift event's natural key: the state it was detected against, its kind, subject and
    # details; two checks that read the same state (run at once, or one killed and run again)
    # record it once
    4: ["ALTER TABLE drift_events ADD COLUMN natural_key VARCHAR(64)",
        "CREATE UNIQUE INDEX drift_events_natural_key ON drift_events (natural_key)"],
    # what the server read a call as (the product, interpreted arguments, a refusal's reason),
    # for `tether learn`; and the proposals learn makes
    5: ["ALTER TABLE call_log ADD COLUMN details TEXT",
        """CREATE TABLE learn_proposals (
             id INTEGER PRIMARY KEY, proposal_key VARCHAR(64) NOT NULL UNIQUE,
             rule VARCHAR(60) NOT NULL, product VARCHAR(200) NOT NULL,
             status VARCHAR(20) NOT NULL, support INTEGER NOT NULL, newest VARCHAR(40),
             body TEXT NOT NULL, created_at VARCHAR(40) NOT NULL, updated_at VARCHAR(40) NOT NULL,
             decided_by VARCHAR(200), decided_at VARCHAR(40), publication INTEGER)"""],
    # each write a write tool applied (or is applying): its key is claimed before the write,
    # so a replayed key applies once whichever replica takes it (registry/writes.py)
    6: ["""CREATE TABLE writes (
             write_id VARCHAR(40) PRIMARY KEY, write_key VARCHAR(64) NOT NULL UNIQUE,
             idem_key VARCHAR(64) UNIQUE,
             username VARCHAR(200) NOT NULL, tool VARCHAR(200) NOT NULL, version VARCHAR(40),
             status VARCHAR(20) NOT NULL, arguments TEXT NOT NULL, body TEXT,
             write_at VARCHAR(40) NOT NULL, updated_at VARCHAR(40) NOT NULL)"""],
    # each row a write changed, with its values before and after, found by the row's key: an
    # action's inverse returns a row to the state it came from (registry/writes.py, origins)
    7: ["""CREATE TABLE write_rows (
             write_id VARCHAR(40) NOT NULL, product VARCHAR(200) NOT NULL,
             row_key VARCHAR(64) NOT NULL, tool VARCHAR(200) NOT NULL,
             before_values TEXT NOT NULL, after_values TEXT NOT NULL,
             write_at VARCHAR(40) NOT NULL)""",
        "CREATE INDEX write_rows_row ON write_rows (product, row_key)"],
}

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


@dataclass(frozen=True)
class VersionInfo:
    """What a version says about its publication (from ``_meta["tether/context"]``), read
    without parsing its whole definition or plan: history and drift metrics need only this."""

    name: str
    version: str
    publication: int
    published_at: str
    supersedes: str | None
    change_level: str | None
    change_kind: str | None
    change_note: str | None
    review: dict[str, Any]
    deprecation: dict[str, Any]
    retired: bool
    noted: bool  # the description carries a "Changed in" sentence the model reads


@dataclass
class _EventTally:
    last: int = 0
    count: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    lags: list[float] = field(default_factory=list)


_EVENTS: dict[tuple[str, str], _EventTally] = {}
"""(registry URL, registry id) -> the drift events tallied so far (see event_stats)."""
_INDEXED: dict[tuple[str, str], list[VersionInfo]] = {}
"""(registry URL, registry id) -> the versions read so far (see :meth:`Registry.version_index`)."""

_INFO_FIELDS = ("supersedes", "change_level", "change_kind", "change_note", "review",
                "deprecation", "retired")


CHANGE_SENTENCE = re.compile(r"\s*Changed in \d+\.\d+\.\d+: .*$", re.S)


def unnoted(wire: dict[str, Any]) -> dict[str, Any]:
    """A copy of a wire definition without the "Changed in" sentence a publication put at the
    end of its description (nor that sentence's source): the definition as generation made it.
    The change note itself stays in the context (``change_note``) and in `tether versions`."""
    d: dict[str, Any] = json.loads(json.dumps(wire))
    if isinstance(d.get("description"), str):
        d["description"] = CHANGE_SENTENCE.sub("", d["description"])
    sources = context_of(d).get("sources")
    if isinstance(sources, dict):
        for sentence in [s for s in sources if s.startswith("Changed in ")]:
            del sources[sentence]
    return d


def content_hash(wire: dict[str, Any]) -> str:
    """sha256 of a wire definition without its publication fields (version, review, the change
    note sentence in the description): what generation alone decides."""
    d = unnoted(wire)
    ctx = context_of(d)
    for k in VOLATILE_KEYS:
        ctx.pop(k, None)
    blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def registry_url(url: str, root: Path) -> str:
    """sqlite:///relative paths resolve against the project directory."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        path = root / url[len("sqlite:///"):]
        private_file(path)  # the call log holds every user's arguments: mode 600
        return f"sqlite:///{path}"
    return driver_url(url)


class Registry:
    def __init__(self, url: str, root: Path):
        self.url = registry_url(url, root)
        self._saved: dict[str, str] = {}  # check_state as last read, to write only what changed
        self._saved_values: dict[str, Any] = {}
        self._basis = ""  # a hash of the state last read: what events are detected against
        try:
            # a registry that does not answer fails a read in seconds, not the OS's minutes
            self.engine = sa.create_engine(self.url, **(
                {"connect_args": {"connect_timeout": 5}} if self.url.startswith("postgresql")
                else {}))
            with self.engine.begin() as c:
                for ddl in _MIGRATIONS:
                    c.execute(sa.text(ddl))
                fresh = c.execute(sa.text(
                    "SELECT COUNT(*) FROM tether_meta WHERE key = 'schema_version'")
                    ).scalar_one() == 0
                if fresh:  # the tables were just created in their newest form
                    self._created(c)
                # who this registry is: a registry removed and made again at the same URL is
                # another one, and nothing read from the first may stand for the second
                c.execute(sa.text(
                    "INSERT INTO tether_meta (key, value) SELECT 'registry_id', :v WHERE NOT "
                    "EXISTS (SELECT 1 FROM tether_meta WHERE key = 'registry_id')"),
                    {"v": uuid.uuid4().hex})
                self.registry_id = str(c.execute(sa.text(
                    "SELECT value FROM tether_meta WHERE key = 'registry_id'")).scalar_one())
            self._upgrade()
        except sa.exc.SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).splitlines()[0]
            raise SourceError(f"the registry at {url} cannot be opened: {reason}",
                              hint="Check registry.url in tether.yaml.") from None

    def _created(self, c: sa.Connection) -> None:
        """A new registry: its tables have every column, so it starts at the newest version.
        (CREATE TABLE above leaves out what upgrades add; add it here.)"""
        for version in sorted(_UPGRADES):
            for ddl in _UPGRADES[version]:
                c.execute(sa.text(ddl))
        c.execute(sa.text("INSERT INTO tether_meta (key, value) VALUES ('schema_version', :v)"),
                  {"v": str(SCHEMA_VERSION)})

    def _upgrade(self) -> None:
        """Bring an older registry forward, one version per transaction. On PostgreSQL the row
        lock on the version makes a second process opening it at once wait, then see it done."""
        for version in sorted(_UPGRADES):
            with self._tx() as c:
                lock = " FOR UPDATE" if c.dialect.name == "postgresql" else ""
                have = int(c.execute(sa.text(
                    "SELECT value FROM tether_meta WHERE key = 'schema_version'" + lock)
                    ).scalar_one())
                if have >= version:
                    continue
                for ddl in _UPGRADES[version]:
                    c.execute(sa.text(ddl))
                c.execute(sa.text("UPDATE tether_meta SET value = :v WHERE key = "
                                  "'schema_version'"), {"v": str(version)})

    @contextmanager
    def _tx(self) -> Iterator[sa.Connection]:
        with self.engine.begin() as c:
            yield c

    def current(self) -> dict[str, ToolVersion]:
        """The newest version of every tool, by name (in the order tools were first
        published). Only those rows' definitions are read and parsed, not the history's; one
        grouped pass finds them (a correlated MAX per row read the history once per version).
        The access policy's versions are not tools: :meth:`current_policy` reads them."""
        with self._tx() as c:
            rows = c.execute(sa.text(
                "SELECT t.name, t.version, t.publication, t.content_hash, t.definition, t.plan, "
                "t.published_at FROM tool_versions t JOIN (SELECT name, MIN(publication) AS "
                "first, MAX(publication) AS last FROM tool_versions WHERE name <> :policy "
                "GROUP BY name) m ON t.name = m.name AND t.publication = m.last "
                "ORDER BY m.first, t.name"), {"policy": POLICY_KIND}).fetchall()
        return {r[0]: ToolVersion(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]),
                                  r[6]) for r in rows}

    def versions(self, name: str | None = None, publication: int | None = None
                 ) -> list[ToolVersion]:
        """Published versions, oldest first: all, one tool's, or one publication's (the access
        policy's only when asked for by its name)."""
        where = [w for w, v in (("name = :n", name), ("publication = :p", publication))
                 if v is not None] + ([] if name == POLICY_KIND else ["name <> :policy"])
        sql = ("SELECT name, version, publication, content_hash, definition, plan, published_at "
               "FROM tool_versions" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY publication, name")
        with self._tx() as c:
            rows = c.execute(sa.text(sql), {"n": name, "p": publication,
                                            "policy": POLICY_KIND}).fetchall()
        return [ToolVersion(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), r[6])
                for r in rows]

    def current_policy(self) -> ToolVersion | None:
        """The newest published version of the access policy (None before the first)."""
        with self._tx() as c:
            row = c.execute(sa.text(
                "SELECT name, version, publication, content_hash, definition, plan, published_at "
                "FROM tool_versions WHERE name = :policy ORDER BY publication DESC LIMIT 1"),
                {"policy": POLICY_KIND}).fetchone()
        if row is None:
            return None
        return ToolVersion(row[0], row[1], row[2], row[3], json.loads(row[4]),
                           json.loads(row[5]), row[6])

    def version_index(self) -> list[VersionInfo]:
        """Every version's publication facts, oldest first, extracted by the database.

        Versions are immutable and publication ids only grow, so what one read found stays
        true: later reads (in this process) fetch only the publications made since."""
        known = _INDEXED.setdefault((self.url, self.registry_id), [])
        last = known[-1].publication if known else 0
        if known:
            with self._tx() as c:
                held = c.execute(sa.text("SELECT COUNT(*) FROM tool_versions WHERE "
                                         "publication <= :p AND name <> :policy"),
                                 {"p": last, "policy": POLICY_KIND}).scalar_one()
            if held != len(known):  # cannot happen to an append-only history; start over
                known.clear()
                last = 0
        fresh = self._version_rows(last)
        if fresh:
            known += fresh
        return list(known)

    def _version_rows(self, after: int) -> list[VersionInfo]:
        pg = self.engine.dialect.name == "postgresql"

        def field(key: str) -> str:
            return context_sql("definition", key, pg)

        described = ("strpos((definition::jsonb) ->> 'description', 'Changed in ') > 0" if pg
                     else "instr(json_extract(definition, '$.description'), 'Changed in ') > 0")
        sql = ("SELECT name, version, publication, published_at, "
               + ", ".join(field(k) for k in _INFO_FIELDS)
               + f", {described} FROM tool_versions WHERE publication > :after "
               "AND name <> :policy ORDER BY publication, name")
        with self._tx() as c:
            rows = c.execute(sa.text(sql), {"after": after, "policy": POLICY_KIND}).fetchall()

        def obj(text: Any) -> dict[str, Any]:
            value = json.loads(text) if isinstance(text, str) and text[:1] == "{" else None
            return value if isinstance(value, dict) else {}

        return [VersionInfo(r[0], r[1], int(r[2]), r[3], r[4], r[5], r[6], r[7], obj(r[8]),
                            obj(r[9]), r[10] is not None, bool(r[11])) for r in rows]

    def publish(self, versions: list[NewVersion], rule: str, at: dt.datetime) -> int | None:
        """Publish all ``versions`` in one transaction; returns the publication id (None if empty)."""
        if not versions:
            return None
        stamp = at.astimezone(dt.UTC).isoformat()
        try:
            with self._tx() as c:
                return self._publish(c, versions, rule, stamp)
        except sa.exc.IntegrityError:
            raise TetherError(
                "another publication of the same tool version landed first (two checks or "
                "builds ran at once); nothing of this one was published.",
                hint="Run it again: it starts from what is published now.") from None

    def _publish(self, c: sa.Connection, versions: list[NewVersion], rule: str, stamp: str
                 ) -> int:
        if c.dialect.name == "postgresql":  # publishers on several machines take turns
            c.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PUBLISH_LOCK})
        pid = int(c.execute(sa.text("SELECT COALESCE(MAX(id), 0) + 1 FROM publications")
                            ).scalar_one())
        c.execute(sa.text("INSERT INTO publications (id, published_at, rule, tools) "
                          "VALUES (:id, :at, :rule, :tools)"),
                  {"id": pid, "at": stamp, "rule": rule,
                   "tools": json.dumps(sorted(v.name for v in versions))})
        c.execute(sa.text(  # one statement, many rows: thousands of tools publish at once
            "INSERT INTO tool_versions (name, version, publication, content_hash, "
            "definition, plan, published_at) VALUES (:n, :v, :p, :h, :d, :pl, :at)"),
            [{"n": v.name, "v": v.version, "p": pid, "h": content_hash(v.definition),
              "d": json.dumps(v.definition, sort_keys=True), "pl": json.dumps(v.plan),
              "at": stamp} for v in versions])
        announce(c, self.registry_id, pid, [
            (v.name, v.version, POLICY_KIND if v.name == POLICY_KIND
             else str((v.plan or {}).get("kind", ""))) for v in versions])
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
                "row_count, error, as_of, deprecated, details) VALUES (:at, :user, :role, :tool, "
                ":version, :arguments, :latency_ms, :rows, :error, :as_of, :deprecated, :details)"),
                [{"details": None} | c for c in calls])

    def calls(self, since: str | None = None) -> list[dict[str, Any]]:
        """The call log, oldest first; with ``since`` (an ISO 8601 UTC time), the calls from
        then on. ``details`` is what the server read the call as (JSON text, or None)."""
        where = " WHERE at >= :since" if since else ""
        with self._tx() as c:
            rows = c.execute(sa.text(
                "SELECT at, username, role, tool, version, arguments, latency_ms, row_count, "
                f"error, as_of, deprecated, details FROM call_log{where} ORDER BY at, tool"),
                {"since": since} if since else {}).mappings().all()
        return [dict(r) for r in rows]

    # --- drift: last-check state, events, reviews ---

    def state(self, prefix: str | None = None) -> dict[str, Any]:
        """The last check's state; with ``prefix``, only the keys starting with it (a read
        that does not change what :meth:`save_state` compares against)."""
        if prefix is not None:
            with self._tx() as c:
                rows = c.execute(sa.text("SELECT key, value FROM check_state WHERE key LIKE :p"),
                                 {"p": prefix.replace("%", "") + "%"}).fetchall()
            return {k: json.loads(v) for k, v in rows}
        with self._tx() as c:
            rows = c.execute(sa.text("SELECT key, value FROM check_state")).fetchall()
        self._saved = dict(rows)
        self._basis = hashlib.sha256(json.dumps(sorted(self._saved.items())).encode()
                                     ).hexdigest()
        parsed = {k: json.loads(v) for k, v in rows}
        self._saved_values = {k: json.loads(v) for k, v in rows}  # a copy callers cannot mutate
        return parsed

    def save_state(self, state: dict[str, Any], at: dt.datetime,
                   events: list[dict[str, Any]] | None = None) -> None:
        """Replace the state in one transaction, writing only the keys whose value changed
        since :meth:`state` read it (a no-drift check rewrites almost nothing); ``events``,
        detected against the old state, are recorded in the same transaction."""
        stamp = at.astimezone(dt.UTC).isoformat()
        saved = self._saved
        texts = {k: saved[k] if k in saved and self._saved_values.get(k) == v
                 else json.dumps(v, sort_keys=True, default=str) for k, v in state.items()}
        with self._tx() as c:
            if events:
                self._add_events(c, events)
            if not saved:
                c.execute(sa.text("DELETE FROM check_state"))
            for k in set(saved) - set(texts):
                c.execute(sa.text("DELETE FROM check_state WHERE key = :k"), {"k": k})
            changed = [{"k": k, "v": text, "at": stamp} for k, text in texts.items()
                       if k in saved and saved[k] != text]
            added = [{"k": k, "v": text, "at": stamp} for k, text in texts.items()
                     if k not in saved]
            if changed:
                c.execute(sa.text("UPDATE check_state SET value = :v, updated_at = :at "
                                  "WHERE key = :k"), changed)
            if added:
                c.execute(sa.text("INSERT INTO check_state (key, value, updated_at) "
                                  "VALUES (:k, :v, :at)"), added)
        self._saved = texts

    def add_events(self, events: list[dict[str, Any]]) -> list[int]:
        with self._tx() as c:
            return self._add_events(c, events)

    def _add_events(self, c: sa.Connection, events: list[dict[str, Any]]) -> list[int]:
        """Record ``events`` detected against the state :meth:`state` last read; one already
        recorded against that state (same kind, subject and details) is not recorded again."""
        if c.dialect.name == "postgresql":  # ids are taken in turn
            c.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _EVENTS_LOCK})
        ids = []
        for e in events:
            details = json.dumps(e["details"], sort_keys=True, default=str)
            key = hashlib.sha256(json.dumps(
                [self._basis, e["kind"], e["subject"], details]).encode()).hexdigest()
            if c.execute(sa.text("SELECT 1 FROM drift_events WHERE natural_key = :k"),
                         {"k": key}).first() is not None:
                continue
            i = int(c.execute(sa.text("SELECT COALESCE(MAX(id), 0) + 1 FROM drift_events")
                              ).scalar_one())
            c.execute(sa.text(
                "INSERT INTO drift_events (id, kind, subject, details, first_observed_at, "
                "detected_at, natural_key) VALUES (:id, :kind, :subject, :details, :first, "
                ":detected, :key)"),
                {"id": i, "kind": e["kind"], "subject": e["subject"], "details": details,
                 "first": e.get("first_observed_at"), "detected": e["detected_at"], "key": key})
            ids.append(i)
        return ids

    def events(self, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
        """Drift events, oldest first; with ``limit``, a page of them newest first."""
        sql = ("SELECT id, kind, subject, details, first_observed_at, detected_at "
               "FROM drift_events")
        params: dict[str, Any] = {}
        if limit is None:
            sql += " ORDER BY id"
        else:
            sql += " ORDER BY id DESC LIMIT :limit OFFSET :offset"
            params = {"limit": limit, "offset": offset}
        with self._tx() as c:
            rows = c.execute(sa.text(sql), params).fetchall()
        return [{"id": r[0], "kind": r[1], "subject": r[2], "details": json.loads(r[3]),
                 "first_observed_at": r[4], "detected_at": r[5]} for r in rows]

    def event_stats(self) -> dict[str, Any]:
        """How many drift events, by kind, and each one's seconds from first seen to detected
        (where the data said when it first appeared): computed by the database."""
        if self.engine.dialect.name == "postgresql":
            lag = ("EXTRACT(EPOCH FROM (detected_at::timestamptz - "
                   "first_observed_at::timestamptz))")
        else:
            lag = "(julianday(detected_at) - julianday(first_observed_at)) * 86400.0"
        # events are appended with growing ids and never change: read only the new ones
        key = (self.url, self.registry_id)
        seen = _EVENTS.setdefault(key, _EventTally())
        with self._tx() as c:
            if seen.last and c.execute(sa.text("SELECT COUNT(*) FROM drift_events WHERE id <= "
                                               ":id"), {"id": seen.last}).scalar_one() != seen.count:
                _EVENTS[key] = seen = _EventTally()  # not append-only after all: start over
            rows = c.execute(sa.text(f"SELECT id, kind, {lag} FROM drift_events WHERE id > :id "
                                     "ORDER BY id"), {"id": seen.last}).fetchall()
        for rid, kind, seconds in rows:
            seen.by_kind[str(kind)] = seen.by_kind.get(str(kind), 0) + 1
            if seconds is not None:
                seen.lags.append(float(seconds))
            seen.last, seen.count = int(rid), seen.count + 1
        return {"count": seen.count, "by_kind": dict(sorted(seen.by_kind.items())),
                "detect_seconds": list(seen.lags)}

    def call_summary(self) -> dict[str, Any]:
        """Counts from the call log: all calls, calls to deprecated versions, and per (user,
        tool, version) called while deprecated, how many calls and the last one."""
        with self._tx() as c:
            total, deprecated = c.execute(sa.text(
                "SELECT COUNT(*), COALESCE(SUM(deprecated), 0) FROM call_log")).one()
            rows = c.execute(sa.text(
                "SELECT username, tool, version, COUNT(*), MAX(at) FROM call_log "
                "WHERE deprecated = 1 GROUP BY username, tool, version "
                "ORDER BY username, tool, version")).fetchall()
        return {"calls": int(total), "deprecated_calls": int(deprecated),
                "deprecated": [{"user": r[0], "tool": r[1], "version": r[2], "calls": int(r[3]),
                                "last_call": r[4]} for r in rows]}

    def counts(self) -> dict[str, int]:
        """How many versions, publications, drift events, reviews and calls the registry holds."""
        tables = {"versions": "tool_versions", "publications": "publications",
                  "events": "drift_events", "reviews": "reviews", "calls": "call_log"}
        with self._tx() as c:
            return {k: int(c.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one())
                    for k, t in tables.items()}

    def publications(self, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
        """Publications (id, published_at, rule, tools), newest first."""
        sql = "SELECT id, published_at, rule, tools FROM publications ORDER BY id DESC"
        params: dict[str, Any] = {}
        if limit is not None:
            sql += " LIMIT :limit OFFSET :offset"
            params = {"limit": limit, "offset": offset}
        with self._tx() as c:
            rows = c.execute(sa.text(sql), params).fetchall()
        return [{"id": r[0], "published_at": r[1], "rule": r[2], "tools": json.loads(r[3])}
                for r in rows]

    def callers(self, tool: str, deprecated_only: bool = True) -> list[dict[str, Any]]:
        """Who called ``tool`` at which version: calls and the last call per (user, version),
        from the call log; by default only calls to a deprecated version."""
        sql = ("SELECT username, version, COUNT(*), MAX(at) FROM call_log WHERE tool = :t"
               + (" AND deprecated = 1" if deprecated_only else "")
               + " GROUP BY username, version ORDER BY username, version")
        with self._tx() as c:
            rows = c.execute(sa.text(sql), {"t": tool}).fetchall()
        return [{"user": r[0], "version": r[1], "calls": int(r[2]), "last_call": r[3]}
                for r in rows]

    def add_review(self, route: str, status: str, body: dict[str, Any], at: dt.datetime,
                   rule: str | None = None, author: str | None = None) -> int:
        """Open a review; ``author`` is who ran what opened it (a policy user, or ``os:LOGIN``)."""
        with self._tx() as c:
            rid = int(c.execute(sa.text("SELECT COALESCE(MAX(id), 0) + 1 FROM reviews")
                                ).scalar_one())
            c.execute(sa.text("INSERT INTO reviews (id, status, route, rule, created_at, body, "
                              "author) VALUES (:id, :status, :route, :rule, :at, :body, :author)"),
                      {"id": rid, "status": status, "route": route, "rule": rule,
                       "author": author[:200] if author else None,
                       "at": at.astimezone(dt.UTC).isoformat(),
                       "body": json.dumps(body, sort_keys=True, default=str)})
        return rid

    _REVIEW_COLUMNS = ("SELECT id, status, route, rule, decided_by, created_at, decided_at, "
                       "comment, body, author FROM reviews")

    @staticmethod
    def _review(r: Any) -> dict[str, Any]:
        return {"id": r[0], "status": r[1], "route": r[2], "rule": r[3], "decided_by": r[4],
                "created_at": r[5], "decided_at": r[6], "comment": r[7],
                "body": json.loads(r[8]), "author": r[9]}

    def reviews(self, status: str | None = None) -> list[dict[str, Any]]:
        sql = self._REVIEW_COLUMNS + (" WHERE status = :s" if status else "") + " ORDER BY id"
        with self._tx() as c:
            rows = c.execute(sa.text(sql), {"s": status} if status else {}).fetchall()
        return [self._review(r) for r in rows]

    def review(self, rid: int) -> dict[str, Any] | None:
        """One review by id, or None."""
        with self._tx() as c:
            row = c.execute(sa.text(self._REVIEW_COLUMNS + " WHERE id = :id"), {"id": rid}
                            ).fetchone()
        return self._review(row) if row is not None else None

    def decide_review(self, rid: int, status: str, by: str, at: dt.datetime,
                      publish: list[NewVersion] | None = None,
                      comment: str | None = None) -> int | None:
        """Close a review; approving publishes its versions in the same transaction."""
        stamp = at.astimezone(dt.UTC).isoformat()
        with self._tx() as c:
            c.execute(sa.text("UPDATE reviews SET status = :s, decided_by = :by, "
                              "decided_at = :at, comment = :comment WHERE id = :id"),
                      {"s": status, "by": by, "at": stamp, "comment": comment, "id": rid})
            if publish:
                return self._publish(c, publish, f"review {rid} by {by}", stamp)
        return None

    def listener(self) -> Listener | None:
        """An ear on the publications channel (PostgreSQL only; None: read it on each tick)."""
        if self.engine.dialect.name != "postgresql":
            return None
        return Listener(self.url, self.registry_id)

    def close(self) -> None:
        self.engine.dispose()
