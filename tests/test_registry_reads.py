"""The registry's lean reads (what the console and the drift metrics use) agree with its full
reads, on SQLite and PostgreSQL; what they keep between reads never outlives the registry."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tether.context.meta import ToolContext, retired_info
from tether.registry import NewVersion, Registry


def _fill(r: Registry, tag: str, n: int) -> None:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for i in range(n):
        ctx = {"version": f"1.{i}.0", "supersedes": f"1.{i - 1}.0" if i else None,
               "change_kind": "additive" if i else None, "change_note": f"{tag} {i}" if i else None,
               "review": {"mode": "auto" if i % 2 else "human", "by": "ana"},
               "deprecation": {f"1.{i - 1}.0": {"served_until": "2026-02-01"}} if i else {},
               "sources": {"A <b>sentence</b>.": "schema"}}
        if i == n - 1:
            ctx["retired"] = {"reason": "gone"}
        d = {"name": f"{tag}_t{i % 3}", "description": f"Does {tag}." + (
            " Changed in x: y." if i % 2 else ""), "inputSchema": {},
             "_meta": {"tether/context": ctx}}
        r.publish([NewVersion(d["name"], ctx["version"], d, {"kind": "list"})], "auto: additive",
                  t0 + dt.timedelta(hours=i))
    r.add_events([{"kind": ["schema", "enum_value_added"][i % 2], "subject": f"s{i}",
                   "details": {"value": "<x>"}, "detected_at": (t0 + dt.timedelta(hours=i + 2))
                   .isoformat().replace("+00:00", "Z"),
                   "first_observed_at": (t0 + dt.timedelta(hours=i)).isoformat() if i % 3
                   else None} for i in range(n)])
    r.record_calls([{"at": f"2026-01-0{1 + i % 5}T00:00:00+00:00", "user": f"u{i % 2}",
                     "role": "r", "tool": f"{tag}_t{i % 3}", "version": "1.0.0",
                     "arguments": "{}", "latency_ms": 1.0, "rows": 1, "error": None,
                     "as_of": None, "deprecated": i % 2} for i in range(n)])


def _agree(r: Registry) -> None:
    full = r.versions()
    lean = r.version_index()
    assert [(v.name, v.version, v.publication, v.published_at) for v in full] == [
        (v.name, v.version, v.publication, v.published_at) for v in lean]
    for f, x in zip(full, lean, strict=True):
        ctx = ToolContext.of(f.definition)
        assert (x.supersedes, x.change_kind, x.change_note, x.review, x.deprecation) == (
            ctx.supersedes, ctx.change_kind, ctx.change_note, ctx.review, ctx.deprecation)
        assert x.retired == (retired_info(f.definition) is not None)
        assert x.noted == ("Changed in " in f.definition["description"])
    events = r.events()
    stats = r.event_stats()
    assert stats["count"] == len(events)
    assert stats["by_kind"] == dict(sorted(Counter(e["kind"] for e in events).items()))
    expected = [(dt.datetime.fromisoformat(e["detected_at"].replace("Z", "+00:00"))
                 - dt.datetime.fromisoformat(e["first_observed_at"])).total_seconds()
                for e in events if e["first_observed_at"]]
    assert stats["detect_seconds"] == pytest.approx(expected, abs=0.01)
    calls = r.calls()
    summary = r.call_summary()
    assert summary["calls"] == len(calls)
    assert summary["deprecated_calls"] == sum(c["deprecated"] for c in calls)
    assert {(d["user"], d["tool"], d["version"]): d["calls"] for d in summary["deprecated"]} == (
        Counter((c["username"], c["tool"], c["version"]) for c in calls if c["deprecated"]))


def _check(url: str, root: Path) -> None:
    r = Registry(url, root)
    try:
        _fill(r, "a", 7)
        _agree(r)
        _fill(r, "b", 5)  # more appended: only the new rows are read, and it still agrees
        _agree(r)
    finally:
        r.close()


def test_lean_reads_agree_on_sqlite(tmp_path: Path) -> None:
    _check("sqlite:///reg.db", tmp_path)


def test_a_registry_made_again_at_the_same_path_is_read_afresh(tmp_path: Path) -> None:
    r = Registry("sqlite:///reg.db", tmp_path)
    _fill(r, "a", 6)
    assert len(r.version_index()) == 6 and r.event_stats()["count"] == 6
    r.close()
    (tmp_path / "reg.db").unlink()
    again = Registry("sqlite:///reg.db", tmp_path)
    try:
        _fill(again, "z", 6)  # the same ids and counts, other contents
        assert {v.name for v in again.version_index()} == {"z_t0", "z_t1", "z_t2"}
        _agree(again)
    finally:
        again.close()


@pytest.mark.postgres
def test_lean_reads_agree_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    schema = f"tether_reads_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
    try:
        _check(f"{pg_url}?options=-csearch_path%3D{schema}", tmp_path)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as con:
            con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _twice_against_one_state(url: str, root: Path) -> None:
    """Two checks that read the same state (run at once, or one killed after recording and run
    again) record its events once; the same event detected against a later state is new."""
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    event = {"kind": "enum_value_added", "subject": "p.c", "details": {"value": "x"},
             "detected_at": "2026-01-01T00:00:00Z"}
    first, second = Registry(url, root), Registry(url, root)
    try:
        before = len(first.events())
        first.state()
        second.state()
        first.save_state({"k": 1}, at, events=[event])
        second.save_state({"k": 1}, at, events=[event])
        assert len(first.events()) == before + 1
        first.state()
        first.save_state({"k": 2}, at, events=[event])
        assert len(first.events()) == before + 2
    finally:
        first.close()
        second.close()


def test_an_event_is_recorded_once_per_state_on_sqlite(tmp_path: Path) -> None:
    _twice_against_one_state("sqlite:///reg.db", tmp_path)


@pytest.mark.postgres
def test_an_event_is_recorded_once_per_state_and_publishers_take_turns_on_postgresql(
        pg_url: str, tmp_path: Path) -> None:
    import threading

    import psycopg

    schema = f"tether_once_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{schema}"')
    url = f"{pg_url}?options=-csearch_path%3D{schema}"
    try:
        _twice_against_one_state(url, tmp_path)
        # eight publishers at once: every publication lands, each with its own id
        registries = [Registry(url, tmp_path) for _ in range(8)]
        errors: list[BaseException] = []

        def publish(i: int, r: Registry) -> None:
            try:
                r.publish([NewVersion(f"t{i}", "1.0.0", {"name": f"t{i}"}, {"kind": "list"})],
                          "auto", dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=publish, args=(i, r))
                   for i, r in enumerate(registries)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert sorted(p["id"] for p in registries[0].publications()) == list(range(1, 9))
        for r in registries:
            r.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as con:
            con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_call_log_entry_the_registry_refuses_never_holds_back_the_others(
        tmp_path: Path, demo_dir: Path) -> None:
    """A tool name with a NUL (PostgreSQL text refuses it) is logged with the NUL replaced; an
    entry the registry refuses for its own reasons is dropped and said, the rest land."""
    import anyio
    from mcp import Client

    from conftest import copy_project
    from tether.config import load_project
    from tether.drift.publish import build
    from tether.serve.server import TetherServer

    d = copy_project(demo_dir, tmp_path / "p")
    build(load_project(d))
    server = TetherServer(load_project(d), stdio_user=next(iter(
        load_project(d).config.policies.users)))

    async def go() -> None:
        async with Client(server.server) as c:
            await c.call_tool("no\x00such_tool", {})
            await c.call_tool("explain_data_product", {"product": next(iter(
                load_project(d).config.products))})

    try:
        anyio.run(go)
        assert server.flush_calls()
        logged = server.registry.calls()
    finally:
        server.close()
    assert {c["tool"] for c in logged} >= {"no\ufffdsuch_tool", "explain_data_product"}
