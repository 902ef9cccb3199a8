"""`tether learn` over a call log of 100,000 calls, in a SQLite registry and in PostgreSQL.

The log is made of real calls: ``--real`` calls (default 2,000) through the server on the demo
warehouse, as four users, a mix that every call-log rule reads (listings with and without
filters, another scheme's identifier, a parameter by another name, a value given to the wrong
parameter, an empty window, a refused argument); those entries are then copied, each copy
shifted in time, until the log holds ``--calls`` entries (the copies keep every field the server
wrote, ``details`` included). ``tether learn`` (the function the CLI calls) then runs
``--repeat`` times on a fresh copy of the proposals table; the time and the proposals it made
are reported. Target: under 10 s at 100,000 calls.

    python bench/learn.py [--calls 100000] [--real 2000] [--repeat 3] [--pg URL] [--dir DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tether.config import load_project
from tether.demo import init_demo
from tether.drift.publish import build
from tether.learn.observe import listings
from tether.learn.propose import learn
from tether.registry import open_registry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import call_tools  # noqa: E402  (the tests' real MCP client over the server)


def _mix(project: Any) -> list[tuple[str, dict[str, Any]]]:
    """One round of calls across the demo's listing tools, chosen from what they declare."""
    from tether.context.meta import enum_of

    registry = open_registry(project)
    try:
        found = listings(registry.current())
    finally:
        registry.close()
    calls: list[tuple[str, dict[str, Any]]] = []
    for la in found.values():
        calls.append((la.tool, {"limit": 5}))
        enums = [(p, enum_of(la.props.get(p) or {})) for p in la.params]
        enums = [(p, v) for p, v in enums if v]
        for p, values in enums[:2]:
            calls.append((la.tool, {p: [values[0]], "limit": 5}))
            others = [q for q in la.params if q != p]
            if others:
                calls.append((la.tool, {others[0]: values[-1], "limit": 1}))
            if la.period:
                calls.append((la.tool, {p: [values[-1]], "period": "1990-01"}))
        for p in la.schemes:
            calls.append((la.tool, {p: "not-an-id"}))
    return calls


def _fill(project: Any, rounds: int) -> int:
    users = list(project.config.policies.users)[:4]
    mix = _mix(project)
    made = 0
    for i in range(rounds):
        call_tools(project, users[i % len(users)], mix)
        made += len(mix)
    return made


def _copy_to(registry_url: str, total: int) -> int:
    engine = sa.create_engine(registry_url)
    with engine.begin() as c:
        rows = [dict(r) for r in c.execute(sa.text(
            "SELECT at, username, role, tool, version, arguments, latency_ms, row_count, error, "
            "as_of, deprecated, details FROM call_log")).mappings()]
        have = len(rows)
        batch = []
        shift = 0
        while have + len(batch) < total:
            shift += 1
            for r in rows:
                if have + len(batch) >= total:
                    break
                at = dt.datetime.fromisoformat(r["at"]) - dt.timedelta(minutes=shift)
                batch.append(r | {"at": at.isoformat()})
        if batch:
            c.execute(sa.text(
                "INSERT INTO call_log (at, username, role, tool, version, arguments, latency_ms, "
                "row_count, error, as_of, deprecated, details) VALUES (:at, :username, :role, "
                ":tool, :version, :arguments, :latency_ms, :row_count, :error, :as_of, "
                ":deprecated, :details)"), batch)
        n = int(c.execute(sa.text("SELECT COUNT(*) FROM call_log")).scalar_one())
    engine.dispose()
    return n


def _time(d: Path, repeat: int) -> tuple[list[float], int]:
    times, made = [], 0
    for _ in range(repeat):
        registry = open_registry(load_project(d))
        with registry.engine.begin() as c:
            c.execute(sa.text("DELETE FROM learn_proposals"))
        registry.close()
        t0 = time.perf_counter()
        result = learn(load_project(d))
        times.append(time.perf_counter() - t0)
        made = len(result.proposals)
    return times, made


def run(d: Path, calls: int, real: int, repeat: int, pg: str | None) -> dict[str, Any]:
    init_demo(d, scale=0.2)
    if pg:
        schema = f"bench_learn_{uuid.uuid4().hex[:8]}"
        with open(d / "tether.yaml", "a") as f:
            f.write(f"\nregistry:\n  url: {pg}?options=-csearch_path%3D{schema}\n")
        engine = sa.create_engine(pg)
        with engine.begin() as c:
            c.execute(sa.text(f"CREATE SCHEMA {schema}"))
        engine.dispose()
    project = load_project(d)
    build(project)
    per_round = len(_mix(project))
    made = _fill(load_project(d), max(1, real // per_round))
    registry = open_registry(load_project(d))
    url = registry.url
    registry.close()
    total = _copy_to(url, calls)
    times, proposals = _time(d, repeat)
    if pg:  # the registry's schema goes with the run
        engine = sa.create_engine(pg)
        with engine.begin() as c:
            c.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()
    return {"registry": "PostgreSQL" if pg else "SQLite", "real_calls": made, "calls": total,
            "proposals": proposals, "median_s": round(statistics.median(times), 2),
            "max_s": round(max(times), 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--real", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--pg", default=None, help="a PostgreSQL URL for the second registry")
    p.add_argument("--dir", type=Path, default=None)
    a = p.parse_args(argv)
    base = a.dir or Path(tempfile.mkdtemp(prefix="bench-learn-"))
    rows = []
    try:
        for pg in [None] + ([a.pg] if a.pg else []):
            d = base / ("pg" if pg else "sqlite")
            shutil.rmtree(d, ignore_errors=True)
            rows.append(run(d, a.calls, a.real, a.repeat, pg))
            print(rows[-1], flush=True)
    finally:
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    print("| registry | calls in the log (real) | proposals | median | max |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['registry']} | {r['calls']:,} ({r['real_calls']:,}) | {r['proposals']} | "
              f"{r['median_s']} s | {r['max_s']} s |")
    return 0 if all(r["max_s"] < 10 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
