"""Property: whatever SELECT a user sends through run_sql, the answer is the same query over the
user's entitled relations, or a clean refusal.

Hypothesis writes SELECTs over random products of both warehouses: joins on shared column names
and identifier columns, CTEs and aliases with random names (sometimes a product's or a table's
name: refused with shadowed_name), predicates with real sampled values (comparisons, IN lists,
LIKE, IS NULL, AND/OR), aggregates with GROUP BY, for random users. Each answer is compared, as a
bag of rows, with the oracle's own re-run over the entitled relations (tests/attacks/oracle.py,
independent of tether's policy code); each refusal must be a clean tool error.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from attacks.corpus import CLINIC, DEMO, Warehouse
from attacks.harness import Target, call, clean, judge, open_target, prepare

logging.getLogger("sqlglot").setLevel(logging.ERROR)

ALIASES = ["a", "b", "t", "x1", "q", "src"]
CTE_NAMES = ["w", "base", "cte1", "sub"]


@dataclass(repr=False)
class Shape:
    """What the generator knows of a warehouse, read by the oracle (not by tether)."""

    products: list[str]
    table: dict[str, str]
    columns: dict[str, list[tuple[str, str]]]
    restricted: dict[str, set[str]]
    values: dict[tuple[str, str], list[Any]]
    joins: list[tuple[str, str, str, str]]
    reserved: list[str]
    users: list[str]
    dialect: str = "duckdb"
    ok: int = 0
    refused: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Shape({', '.join(self.products)})"


def kind_of(data_type: str) -> str:
    t = data_type.lower()
    if "timestamp" in t:
        return "ts"
    if t == "date":
        return "date"
    if "bool" in t:
        return "bool"
    if any(k in t for k in ("char", "text", "varchar", "string")):
        return "str"
    if any(k in t for k in ("int", "decimal", "numeric", "double", "real", "float")):
        return "num"
    return "other"


def shape_of(t: Target) -> Shape:
    pol, eng = t.oracle.policy, t.oracle.owner
    products = sorted(p for p in pol.products if pol.table_of(p))
    table = {p: str(pol.table_of(p)) for p in products}
    columns = {p: [(c, kind_of(ty)) for c, ty in t.oracle.columns(p)] for p in products}
    restricted = {p: pol.restricted(p, [c for c, _ in columns[p]]) for p in products}
    values: dict[tuple[str, str], list[Any]] = {}
    for p in products:
        for c, k in columns[p]:
            if k in ("str", "num", "bool", "date") and c not in restricted[p]:
                q = eng.quote(c)
                rows = eng.run(f"SELECT DISTINCT {q} FROM {eng.table(table[p])} WHERE {q} IS NOT "
                               f"NULL ORDER BY 1", max_rows=4000)[1]
                picked = [r[0] for r in rows]
                values[(p, c)] = picked[:: max(1, len(picked) // 12)][:12]
    schemes = {(p, c): s for p in products
               for c, s in (pol.products[p].get("identifiers") or {}).items()}
    joins = []
    for p1 in products:
        for p2 in products:
            if p1 >= p2:
                continue
            for c1, k1 in columns[p1]:
                for c2, k2 in columns[p2]:
                    same = c1 == c2 and k1 == k2 and k1 in ("str", "num")
                    scheme = schemes.get((p1, c1)) and schemes.get((p1, c1)) == schemes.get(
                        (p2, c2))
                    if (same or scheme) and c1 not in restricted[p1] | {"loaded_at"}:
                        joins.append((p1, c1, p2, c2))
    reserved = sorted({*table.values(), *pol.products})
    return Shape(products, table, columns, restricted, values, joins, reserved,
                 sorted(pol.users), eng.dialect)


def lit(v: Any, kind: str) -> str:
    if kind == "bool":
        return "TRUE" if v else "FALSE"
    if kind == "num" or isinstance(v, int | float | decimal.Decimal):
        return str(v)
    if kind == "date" or isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return "'" + str(v).replace("'", "''") + "'"


@st.composite
def predicate(draw: st.DrawFn, s: Shape, cols: list[tuple[str, str, str, str]]) -> str:
    """One predicate over (qualifier, product, column, kind) columns, with sampled values."""
    q, p, c, k = draw(st.sampled_from(cols))
    ref = f"{q}.{c}" if q else c
    vals = s.values.get((p, c)) or []
    if not vals or draw(st.integers(0, 9)) == 0:
        return f"{ref} IS {draw(st.sampled_from(['NULL', 'NOT NULL']))}"
    v = draw(st.sampled_from(vals))
    if k == "str":
        op = draw(st.sampled_from(["=", "<>", "IN", "LIKE", ">"]))
        if op == "IN":
            more = draw(st.lists(st.sampled_from(vals), min_size=1, max_size=3))
            return f"{ref} IN ({', '.join(lit(x, k) for x in [v, *more])})"
        if op == "LIKE":
            prefix = str(v)[: draw(st.integers(1, 4))].replace("%", "").replace("_", "")
            return f"{ref} LIKE {lit(prefix + '%', k)}"
        return f"{ref} {op} {lit(v, k)}"
    if k == "bool":
        return f"{ref} = {lit(v, k)}"
    op = draw(st.sampled_from(["=", "<", ">=", "<>"]))
    return f"{ref} {op} {lit(v, k)}"


@st.composite
def query(draw: st.DrawFn, s: Shape) -> tuple[str, bool]:
    """(sql, whether it gives a CTE or alias the name of a table or product)."""
    shadow = False

    def alias_for(p: str, taken: str = "") -> str:
        nonlocal shadow
        pool = ALIASES if draw(st.integers(0, 7)) else [s.table[p], *s.reserved]
        name = draw(st.sampled_from(pool))
        name = name + "2" if name == taken else name
        shadow = shadow or (name in s.reserved and name != s.table[p])
        return name

    p1 = draw(st.sampled_from(s.products))
    a1 = alias_for(p1)
    from_ = f"{s.table[p1]} AS {a1}"
    cols = [(a1, p1, c, k) for c, k in s.columns[p1]]
    options = [j for j in s.joins if p1 in (j[0], j[2])]
    if options and draw(st.booleans()):
        j = draw(st.sampled_from(options))
        (p2, c2), c1 = ((j[2], j[3]), j[1]) if j[0] == p1 else ((j[0], j[1]), j[3])
        a2 = alias_for(p2, a1)
        kind = draw(st.sampled_from(["JOIN", "LEFT JOIN"]))
        from_ += f" {kind} {s.table[p2]} AS {a2} ON {a1}.{c1} = {a2}.{c2}"
        cols += [(a2, p2, c, k) for c, k in s.columns[p2]]
    if draw(st.integers(0, 5)):  # now and then a restricted column may be drawn too
        cols = [x for x in cols if x[2] not in s.restricted[x[1]]]
    usable = [x for x in cols if x[3] != "other"]
    preds = draw(st.lists(predicate(s, usable), max_size=3))
    glue = draw(st.sampled_from([" AND ", " OR "]))
    where = f" WHERE {glue.join(f'({p})' for p in preds)}" if preds else ""
    picked = draw(st.lists(st.sampled_from(usable), min_size=1, max_size=4, unique=True))
    shape = draw(st.sampled_from(["rows", "agg", "cte"]))
    if shape == "rows":
        sel = ", ".join(f"{q}.{c} AS c{i}" for i, (q, _, c, _) in enumerate(picked))
        return f"SELECT {sel} FROM {from_}{where}", shadow
    if shape == "agg":
        groups = picked[: draw(st.integers(0, min(2, len(picked))))]
        aggs = ["count(*) AS n"]
        for q, _, c, k in picked[len(groups):]:
            fn = draw(st.sampled_from(["count(DISTINCT {})", "min({})", "max({})"]
                                      + (["sum({})"] if k == "num" else [])))
            aggs.append(fn.format(f"{q}.{c}") + f" AS m{len(aggs)}")
        keys = [f"{q}.{c}" for q, _, c, _ in groups]
        sel = ", ".join([*(f"{k} AS g{i}" for i, k in enumerate(keys)), *aggs])
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        return f"SELECT {sel} FROM {from_}{where}{group}", shadow
    name = draw(st.sampled_from(CTE_NAMES if draw(st.integers(0, 5)) else s.reserved))
    shadow = shadow or name in s.reserved
    inner = ", ".join(f"{q}.{c} AS c{i}" for i, (q, _, c, _) in enumerate(picked))
    outer_cols = [("", p, f"c{i}", k) for i, (_, p, _, k) in enumerate(picked)]
    outer_cols = [(q, p, c, k) for q, p, c, k in outer_cols if k != "other"]
    outer = draw(st.lists(predicate(_renamed(s, picked), outer_cols), max_size=1))
    owhere = f" WHERE {outer[0]}" if outer else ""
    body = draw(st.sampled_from(["*", "count(*) AS n", "c0, count(*) AS n"]))
    group = " GROUP BY c0" if body.startswith("c0,") else ""
    return (f"WITH {name} AS (SELECT {inner} FROM {from_}{where}) SELECT {body} FROM "
            f"{name}{owhere}{group}", shadow)


def _renamed(s: Shape, picked: list[tuple[str, str, str, str]]) -> Shape:
    """The shape with each picked column's sample values under its CTE name c<i>."""
    values = dict(s.values)
    for i, (_, p, c, _) in enumerate(picked):
        values[(p, f"c{i}")] = s.values.get((p, c), [])
    return Shape(s.products, s.table, s.columns, s.restricted, values, s.joins, s.reserved,
                 s.users, s.dialect)


def check(t: Target, s: Shape, user: str, sql: str, shadow: bool) -> None:
    note(f"{user}: {sql}")
    restricted = any(re.search(rf"\.{c}\b", sql) for cs in s.restricted.values() for c in cs)
    o = call(t, user, "run_sql", {"sql": sql})
    problems = judge(t, user, "run_sql", {"sql": sql}, o)
    if shadow and (o.refusal or {}).get("reason") != "shadowed_name":
        problems.append(f"a shadowing name answered {o.label}, not shadowed_name")
    if restricted and o.result is not None:
        problems.append("a restricted column was answered")
    problems += clean(o)
    assert not problems, f"{user}: {sql}\n" + "\n".join(problems)
    if o.result is not None:
        s.ok += 1
    else:
        reason = o.refusal["reason"] if o.refusal else "error"
        s.refused[reason] = s.refused.get(reason, 0) + 1


TARGETS: dict[str, tuple[str, Warehouse, bool]] = {
    "demo-duckdb": ("demo_dir", DEMO, False),
    "clinic-duckdb": ("second_dir", CLINIC, False),
    "demo-postgres": ("pg_reader_demo_dir", DEMO, True),
    "clinic-postgres": ("pg_reader_second_dir", CLINIC, True),
}


def _open(request: pytest.FixtureRequest, tmp: pytest.TempPathFactory, name: str
          ) -> Iterator[tuple[Target, Shape]]:
    fixture, warehouse, pg = TARGETS[name]
    src: Path = request.getfixturevalue(fixture)
    owner = request.getfixturevalue("pg_url") if pg else None
    d = prepare(src, tmp.mktemp(f"prop-{name}"), warehouse)
    t = open_target(name, warehouse, d, tmp.mktemp(f"prop-{name}-files"), owner)
    try:
        yield t, shape_of(t)
    finally:
        t.close()


@pytest.fixture(scope="module", params=["demo-duckdb", "clinic-duckdb"])
def duck(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[Target, Shape]]:
    yield from _open(request, tmp_path_factory, request.param)


@pytest.fixture(scope="module", params=["demo-postgres", "clinic-postgres"])
def pg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[tuple[Target, Shape]]:
    yield from _open(request, tmp_path_factory, request.param)


@settings(derandomize=True, max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_run_sql_answers_the_entitled_query_on_duckdb(duck: tuple[Target, Shape],
                                                     data: st.DataObject) -> None:
    t, s = duck
    user = data.draw(st.sampled_from(s.users))
    sql, shadow = data.draw(query(s))
    check(t, s, user, sql, shadow)


@settings(derandomize=True, max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_run_sql_answers_the_entitled_query_on_postgres(pg: tuple[Target, Shape],
                                                       data: st.DataObject) -> None:
    t, s = pg
    user = data.draw(st.sampled_from(s.users))
    sql, shadow = data.draw(query(s))
    check(t, s, user, sql, shadow)


def test_the_generator_reaches_answers_and_every_refusal_it_aims_at(
        duck: tuple[Target, Shape]) -> None:
    """Not vacuous: the property above saw answers and shadowed-name refusals."""
    _, s = duck
    if not s.ok:
        pytest.skip("runs after the property test of the same target")
    assert s.ok >= 40 and s.refused.get("shadowed_name", 0) >= 5, (s.ok, s.refused)
