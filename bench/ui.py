"""Console page times with a long history: the demo's tools with 1,000 versions in all, 10,000
drift events, reviews and a call log, in a SQLite registry and in PostgreSQL.

The history is written through the registry's own API (publications of reworded versions, drift
events, decided reviews, call records); each page is then fetched over HTTP from the console
(uvicorn, loopback) by a signed-in reviewer, ``--repeat`` times after one warm-up, and the time
to the last byte is reported (p50, p95, max). Target: every page under 300 ms.

    python bench/ui.py [--versions 1000] [--events 10000] [--repeat 15] [--pg URL] [--dir DIR]
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import http.cookiejar
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tether.config import load_project
from tether.demo import init_demo
from tether.demo.drift import apply
from tether.drift.check import check
from tether.drift.publish import build
from tether.registry import NewVersion, bump, open_registry
from tether.serve.identity import TokenStore
from tether.web import create_app

PAGES = ("/reviews", "/reviews/{review}", "/reviews/auto/{auto}", "/tools", "/tools/{tool}",
         "/drift", "/drift?page=50", "/policy", "/eval")
TARGET_MS = 300.0


def history(root: Path, versions: int, events: int) -> dict[str, Any]:
    """Fill the registry: reworded versions (one publication each, rule-approved), drift events
    over a year, decided reviews, and calls (some to deprecated versions)."""
    project = load_project(root)
    registry = open_registry(project)
    t0 = dt.datetime(2025, 8, 20, tzinfo=dt.UTC)
    try:
        current = {n: (v.version, v.definition, v.plan) for n, v in registry.current().items()}
        names = sorted(current)
        have = len(registry.versions())
        for i in range(max(versions - have, 0)):
            name = names[i % len(names)]
            prev_version, prev_definition, plan = current[name]
            d = copy.deepcopy(prev_definition)
            version = bump(prev_version, "patch")
            ctx = d["_meta"]["tether/context"]
            ctx.update(version=version, supersedes=prev_version, change_level="patch",
                       change_kind="wording", change_note=f"Reworded ({i}).",
                       review={"mode": "auto", "rule": "auto-wording"})
            d["description"] = f"{d['description'].split(' Reworded')[0]} Reworded {i}."
            at = t0 + dt.timedelta(minutes=30 * i)
            registry.publish([NewVersion(name, version, d, plan)], "auto: wording", at)
            current[name] = (version, d, plan)
        kinds = ("enum_value_added", "schema", "definition_changed", "policy_changed")
        batch = [{"kind": kinds[i % 4], "subject": f"{names[i % len(names)]}.column_{i % 7}",
                  "details": {"value": f"V{i}", "rows": i % 50}, "detected_at":
                  (t0 + dt.timedelta(minutes=50 * i)).isoformat(),
                  "first_observed_at": (t0 + dt.timedelta(minutes=50 * i - 20)).isoformat()}
                 for i in range(events)]
        for k in range(0, len(batch), 1000):
            registry.add_events(batch[k:k + 1000])
        body = {"tools": [], "diffs": {"schema": {}, "description": {}, "policy": {}},
                "events": []}
        for i in range(40):
            rid = registry.add_review("human", "pending", body, t0 + dt.timedelta(days=i))
            registry.decide_review(rid, "rejected", "fin.ana", t0 + dt.timedelta(days=i, hours=3),
                                   comment="not now")
        calls = [{"at": (t0 + dt.timedelta(minutes=i)).isoformat(), "user": f"user{i % 9}",
                  "role": "finance_analyst", "tool": names[i % len(names)], "version": "1.0.0",
                  "arguments": "{}", "latency_ms": 2.0, "rows": 3, "error": None,
                  "as_of": None, "deprecated": int(i % 3 == 0)} for i in range(20_000)]
        registry.record_calls(calls)
        counts = registry.counts()
        auto = next(p["id"] for p in registry.publications() if p["rule"].startswith("auto"))
    finally:
        registry.close()
    return {"counts": counts, "tool": names[0], "auto": auto}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(root: Path, token: str, subs: dict[str, Any], repeat: int) -> dict[str, list[float]]:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(root, None, "127.0.0.1", port),
                                           host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    try:
        html = opener.open(base + "/signin").read().decode()
        csrf = re.search(r'name="csrf" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
        opener.open(base + "/signin", urllib.parse.urlencode(
            {"csrf": csrf, "token": token, "next": "/reviews"}).encode()).read()
        out: dict[str, list[float]] = {}
        for page in PAGES:
            path = page.format(**subs)
            t = time.perf_counter()
            opener.open(base + path).read()  # the first render: caches cold
            times = [(time.perf_counter() - t) * 1000]
            for _ in range(repeat):
                t = time.perf_counter()
                with opener.open(base + path) as r:
                    r.read()
                    assert r.status == 200, (path, r.status)
                times.append((time.perf_counter() - t) * 1000)
            out[page] = times
        return out
    finally:
        server.should_exit = True


def prepare(d: Path, versions: int, events: int, registry_url: str | None) -> tuple[str, dict[str, Any]]:
    if d.exists():
        shutil.rmtree(d)
    init_demo(d, scale=0.05)
    if registry_url:
        (d / "tether.yaml").write_text((d / "tether.yaml").read_text()
                                       + f'registry: {{url: "{registry_url}"}}\n')
    build(load_project(d))
    filled = history(d, versions, events)
    apply(d, "redefine-active")  # one real pending review on top of the history
    result = check(load_project(d))
    filled["review"] = result.reviews[0]
    token = TokenStore(d / ".tether" / "tokens.json").add("fin.ana")
    return token, filled


def row(label: str, page: str, times: list[float]) -> str:
    """The first render (cold), then p50, p95 and max of the repeats."""
    first, rest = times[0], times[1:]
    q = statistics.quantiles(rest, n=20)
    worst = max(rest)
    return (f"| {label} | `{page}` | {first:.0f} | {statistics.median(rest):.0f} | {q[18]:.0f} "
            f"| {worst:.0f} | {'yes' if worst < TARGET_MS else 'no'} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--pg", default=None, help="PostgreSQL URL for the second registry")
    ap.add_argument("--dir", type=Path, default=Path("bench/out/ui"))
    args = ap.parse_args()
    lines = ["| registry | page | first ms | p50 ms | p95 ms | max ms | under 300 ms |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    targets: list[tuple[str, str | None]] = [("SQLite", None)]
    schema = None
    if args.pg:
        import psycopg

        schema = f"tether_bench_ui_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(args.pg, autocommit=True) as con:
            con.execute(f'CREATE SCHEMA "{schema}"')
        targets.append(("PostgreSQL", f"{args.pg}?options=-csearch_path%3D{schema}"))
    try:
        for label, url in targets:
            d = args.dir / label.lower()
            t = time.perf_counter()
            token, filled = prepare(d, args.versions, args.events, url)
            print(f"{label}: {filled['counts']} written in {time.perf_counter() - t:.0f} s",
                  file=sys.stderr)
            times = measure(d, token, filled, args.repeat)
            lines += [row(label, page, ts) for page, ts in times.items()]
    finally:
        if schema:
            import psycopg

            with psycopg.connect(args.pg, autocommit=True) as con:
                con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"commit {commit}; python bench/ui.py --versions {args.versions} --events "
          f"{args.events} --repeat {args.repeat}" + (" --pg URL" if args.pg else ""))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
