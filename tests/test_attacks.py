"""The policy boundary holds against anyone who can call a tool.

The corpus (tests/attacks/corpus.py) runs at library level on four targets: the demo and the
clinic warehouse, each on DuckDB and on PostgreSQL as a least-privilege role. Every outcome is
judged by an oracle that shares no code with tether's policy path (tests/attacks/oracle.py):
no forbidden value in any result or error, results equal to an independent re-run over the
entitled relations, clean refusals with their reasons, and a warehouse and file system left as
they were. A fixed sample of 30 goes through `tether serve` over stdio and over HTTP.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import Client, StdioServerParameters

from attacks.corpus import ATTACKS, CLINIC, DEMO, WAREHOUSES, Attack, Warehouse, fill
from attacks.harness import (
    Outcome,
    Record,
    Target,
    applicable,
    clean,
    fingerprint,
    judge,
    meets,
    open_target,
    prepare,
    run_corpus,
    summary,
    table,
)
from conftest import free_port, http_process, piped, run_cli

TETHER = str(Path(sys.executable).parent / "tether")
logging.getLogger("sqlglot").setLevel(logging.ERROR)  # "unsupported syntax" notes
TARGETS: dict[str, tuple[str, Warehouse, bool]] = {
    "demo-duckdb": ("demo_dir", DEMO, False),
    "demo-postgres": ("pg_reader_demo_dir", DEMO, True),
    "clinic-duckdb": ("second_dir", CLINIC, False),
    "clinic-postgres": ("pg_reader_second_dir", CLINIC, True),
}
TIMEOUT = 1.0
"""serve.statement_timeout_seconds of the attacked copies."""

# Defects the corpus has found and that are not fixed yet, each with its reason: (attack ids,
# targets, problem, where and what). A record is "known" when every problem it has matches;
# anything else fails the test. Empty: every defect found so far is fixed (the SQLAlchemy bind
# of ':name' inside literals, identifier examples and enums observed over every row, the probe
# refused for every product to a role denied one).
KNOWN: list[tuple[str, str, str, str]] = []


def known(r: Record) -> str | None:
    for ids, targets, problem, why in KNOWN:
        if re.fullmatch(ids, r.id) and re.search(targets, r.target) and all(
                re.search(problem, p) for p in r.problems):
            return why
    return None


@pytest.fixture(scope="module", params=list(TARGETS))
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Target]:
    fixture, warehouse, pg = TARGETS[request.param]
    src = request.getfixturevalue(fixture)
    owner = request.getfixturevalue("pg_url") if pg else None
    d = prepare(src, tmp_path_factory.mktemp(request.param), warehouse, TIMEOUT)
    files = tmp_path_factory.mktemp(f"{request.param}-files")
    t = open_target(request.param, warehouse, d, files, owner)
    yield t
    t.close()


def test_the_corpus_covers_every_category_on_both_warehouses() -> None:
    for w in WAREHOUSES.values():
        names = {**w.names, **dict.fromkeys(w.samples, "x"), "schema": "s", "tmp": "/t",
                 "tmp_table": "t"}
        mine = [a for a in ATTACKS if applicable(a, names)]
        assert len(mine) >= 150, (w.key, len(mine))
        cats = {a.category for a in mine}
        assert cats >= {"cte_shadow", "alias_shadow", "pg_functions", "duckdb_functions",
                        "stacked", "params", "quoting", "masked", "restricted", "rows",
                        "pinned", "listing", "probe_catalog", "denied", "errors", "resource",
                        "cursor", "side_channel", "paths"}, cats
    assert len({a.id for a in ATTACKS}) == len(ATTACKS)


def test_the_oracle_catches_leaks(target: Target) -> None:
    """Not vacuous: the unfiltered user's answers, judged as the filtered and masked users,
    and a restricted value, are caught."""
    w, n = target.warehouse, target.names
    opened = w.users["open"]
    for q in ("SELECT * FROM {p} WHERE {fc} = '{other}' LIMIT 5", "SELECT count(*) AS n FROM {p}"):
        sql = fill(q, n)
        o = Outcome(result=piped(target.ex).run(_call(target, opened, "run_sql", {"sql": sql})))
        assert judge(target, w.users["filtered"], "run_sql", {"sql": sql}, o), sql
    sql = fill("SELECT {mc} FROM {p} LIMIT 3", n)
    o = Outcome(result=piped(target.ex).run(_call(target, opened, "run_sql", {"sql": sql})))
    assert judge(target, w.users["masked"], "run_sql", {"sql": sql}, o)
    if w is CLINIC:  # the oracle's own hash mask is the documented digest
        assert target.oracle.verify_hash_masks() > 100
    leak = Outcome(error=f"the query failed: invalid input {n['rc_sample']}")
    assert judge(target, opened, "run_sql", {"sql": "SELECT 1"}, leak)
    assert clean(Outcome(error="Not permitted: x")) and clean(Outcome(crash="KeyError: 'x'"))


def _call(t: Target, user: str, tool: str, args: dict[str, Any]) -> Any:
    from tether.serve.kinds import Call

    g = t.tools[tool]
    return Call(user, tool, "1.0.0", g.wire(), g.plan, args)


def test_attack_corpus(target: Target, tmp_path: Path) -> None:
    before = fingerprint(target)
    records = run_corpus(target)
    after = fingerprint(target)
    slow = [r for r in records if r.category == "resource" and r.seconds > TIMEOUT * 3 + 5]
    for r in slow:
        r.problems.append(f"took {r.seconds:.1f}s under a {TIMEOUT:g}s statement timeout")
        r.verdict = "FAIL"
    (tmp_path / "records.json").write_text(json.dumps([r.__dict__ for r in records], indent=1))
    failed = [r for r in records if r.verdict != "pass"]
    unknown = [r for r in failed if known(r) is None]
    print(f"{target.name}: {len(records)} attack runs; {summary(records)}")
    if failed:
        print("known defects (reported):\n" + table([r for r in failed if known(r)]))
    assert not unknown, "attacks that succeeded or broke something:\n" + table(unknown)
    assert after == before, "the warehouse changed"
    assert not list(target.tmp.iterdir()), "an attack wrote a file"
    assert len({r.id for r in records}) >= 150


# --- through `tether serve`, stdio and HTTP ------------------------------------------------------

SAMPLE = [
    "cte-top", "cte-nested-in", "cte-filter-table", "cte-legit", "alias-fact-as-p", "pg-00",
    "pg-05", "pg-24", "duck-00", "duck-19", "duck-21", "stack-00", "stack-10", "param-03",
    "quote-05", "mask-00", "mask-03", "mask-09", "mask-select-03", "restr-00", "restr-star-00",
    "restr-describe", "rows-01", "rows-14", "rows-20", "pin-00", "pin-evade-00", "denied-00",
    "err-00", "catalog",
]


def _sample() -> list[Attack]:
    by_id = {a.id: a for a in ATTACKS}
    out = [by_id[i] for i in SAMPLE]
    assert len(out) == 30 and all(a.tool in ("run_sql", "describe_table", "list_tables")
                                  for a in out)
    return out


def _from_wire(r: Any) -> Outcome:
    if r.is_error:
        return Outcome(error=r.content[0].text, refusal=(r.meta or {}).get("tether/refusal"))
    return Outcome(result=r.structured_content)


def _judge_wire(t: Target, user: str, a: Attack, o: Outcome, wire_meta: Any) -> Record:
    tool, args = fill(a.tool, t.names), fill(a.args, t.names)
    problems = judge(t, user, tool, args, o, a.deterministic)
    role = next(r for r, u in t.warehouse.users.items() if u == user)
    if not meets(o, a.expect.get(role)):
        problems.insert(0, f"expected {a.expect.get(role)}, got {o.label}")
    if o.error and o.error.startswith("the call failed:"):
        problems.append("the server caught an exception: " + o.error[:200])
    if o.refusal is None and wire_meta and "tether/refusal" in wire_meta:
        problems.append("tether/refusal on a result that is not a refusal")
    return Record(a.id, a.category, t.name, user, o.label, "FAIL" if problems else "pass",
                  problems)


async def _drive(client: Any, t: Target, user: str, attacks: list[Attack]) -> list[Record]:
    out = []
    for a in attacks:
        role = next(r for r, u in t.warehouse.users.items() if u == user)
        if role not in a.expect:
            continue
        r = await client.call_tool(fill(a.tool, t.names), fill(a.args, t.names))
        out.append(_judge_wire(t, user, a, _from_wire(r), r.meta))
    return out


def _served_target(src: Path, warehouse: Warehouse, root: Path, name: str) -> Target:
    d = prepare(src, root / "project", warehouse, TIMEOUT)
    files = root / "files"
    files.mkdir()
    return open_target(name, warehouse, d, files)


def _check(t: Target, records: list[Record], before: dict[str, Any]) -> None:
    assert len({r.id for r in records}) == 30
    refused = [r for r in records if r.outcome.startswith("refused:")]
    assert len(refused) >= 10  # reasons travel in _meta over the wire
    failed = [r for r in records if r.verdict != "pass" and known(r) is None]
    print(f"{t.name}: {len(records)} calls; {summary(records)}")
    assert not failed, "attacks that succeeded through the server:\n" + table(failed)
    assert fingerprint(t) == before
    assert not list(t.tmp.iterdir())


@pytest.mark.parametrize("which", ["demo", "clinic"])
def test_sample_through_stdio(which: str, request: pytest.FixtureRequest, tmp_path: Path
                              ) -> None:
    warehouse = WAREHOUSES[which]
    src = request.getfixturevalue("demo_dir" if which == "demo" else "second_dir")
    t = _served_target(src, warehouse, tmp_path, f"{which}-stdio")
    before = fingerprint(t)
    attacks = _sample()

    async def go(user: str) -> list[Record]:
        params = StdioServerParameters(
            command=TETHER, args=["serve", "--project", str(t.dir), "--mode", "generic"],
            env={"TETHER_USER": user, "PATH": os.environ["PATH"]})
        async with Client(params) as c:
            return await _drive(c, t, user, attacks)

    try:
        records = [r for role in ("filtered", "masked")
                   for r in anyio.run(go, warehouse.users[role])]
        _check(t, records, before)
    finally:
        t.close()


@pytest.mark.parametrize("which", ["clinic", "demo"])
def test_sample_through_http(which: str, request: pytest.FixtureRequest, tmp_path: Path
                             ) -> None:
    from mcp.client.streamable_http import streamable_http_client

    warehouse = WAREHOUSES[which]
    src = request.getfixturevalue("demo_dir" if which == "demo" else "second_dir")
    t = _served_target(src, warehouse, tmp_path, f"{which}-http")
    before = fingerprint(t)
    tokens = {}
    for role in ("filtered", "masked"):
        user = warehouse.users[role]
        res = run_cli("token", "add", user, "--project", str(t.dir))
        assert res.returncode == 0, res.stderr
        tokens[user] = res.stdout.strip()
    port = free_port()
    argv = [TETHER, "serve", "--project", str(t.dir), "--mode", "generic", "--transport",
            "http", "--port", str(port)]
    attacks = _sample()

    async def go(user: str) -> list[Record]:
        headers = {"Authorization": f"Bearer {tokens[user]}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http, Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                       http_client=http)) as c:  # type: ignore[arg-type]
            return await _drive(c, t, user, attacks)

    try:
        with http_process(argv, port, timeout=60):
            records = [r for user in tokens for r in anyio.run(go, user)]
        _check(t, records, before)
    finally:
        t.close()
