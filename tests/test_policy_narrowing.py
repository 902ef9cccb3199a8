"""Narrowing is decided by structure and never wrong: a row-filter edit classified as narrowing
keeps no row the old filter did not keep, on generated data (NULLs included), for random filters
and random edits; and the edits that do narrow (a conjunct added, parts reordered) are found."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.config import TetherConfig
from tether.policy import templates
from tether.policy.versions import changes, document, effect, glob_within, narrows

ATTRS = {"region": "EMEA", "tier": 2}


@pytest.fixture(scope="module")
def con() -> Any:
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT a, b, c, d, region FROM range(5) r1(a), range(4) r2(b), "
              "(VALUES ('x'), ('y'), ('z')) r3(c), (VALUES (NULL), (1), (2)) r4(d), "
              "(VALUES ('EMEA'), ('AMER')) r5(region)")
    c.execute("ALTER TABLE t ADD COLUMN k INTEGER")
    c.execute("UPDATE t SET k = rowid")
    return c


def rows(con: Any, text: str) -> set[int]:
    parsed = templates.parse(text)
    sql = "SELECT k FROM t WHERE " + parsed.tree().sql(dialect="duckdb")
    return {r[0] for r in con.execute(sql, parsed.bind(ATTRS)).fetchall()}


ATOMS = st.sampled_from([
    "a = 1", "a <> 2", "a < 3", "b >= 2", "b IN (0, 3)", "c = 'x'", "c IN ('x', 'y')",
    "d = 1", "d IS NULL", "d IS NOT NULL", "region = {{ user.region }}", "b < {{ user.tier }}",
    "NOT (a = 0)", "a + b > 4", "1 = 1", "1 = 0",
])


@st.composite
def filters(draw: Any) -> str:
    parts = draw(st.lists(ATOMS, min_size=1, max_size=3))
    joins = [draw(st.sampled_from([" AND ", " OR "])) for _ in parts[1:]]
    text = parts[0]
    for j, p in zip(joins, parts[1:], strict=True):
        text = f"({text}){j}{p}" if draw(st.booleans()) else f"{text}{j}{p}"
    return text


@st.composite
def edits(draw: Any) -> tuple[str, str]:
    old = draw(filters())
    how = draw(st.sampled_from(["and", "or", "replace", "negate", "reorder", "drop", "paren",
                                "invert"]))
    atom = draw(ATOMS)
    if how == "and":
        new = f"{old} AND {atom}" if draw(st.booleans()) else f"{atom} AND ({old})"
    elif how == "or":
        new = f"{old} OR {atom}"
    elif how == "replace":
        new = draw(filters())
    elif how == "negate":
        new = f"NOT ({old})"
    elif how == "invert":
        new = old.replace(" = ", " <> ", 1)
    elif how == "paren":
        new = f"({old})"
    else:
        parsed = templates.parse(old)
        parts = [c.sql(dialect="duckdb") for c in parsed.conjuncts()]
        if how == "reorder":
            parts = list(reversed(parts))
        elif len(parts) > 1:
            parts = parts[1:]
        new = " AND ".join(f"({p})" for p in parts)
        new = new.replace("$u_region", "{{ user.region }}").replace("$u_tier", "{{ user.tier }}")
    return old, new


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(edits())
def test_an_edit_classified_narrowing_is_never_wider(con: Any, edit: tuple[str, str]) -> None:
    old, new = edit
    if narrows(old, new):
        assert rows(con, new) <= rows(con, old), (old, new)


@pytest.mark.parametrize("old, new", [
    ("region = {{ user.region }}", "region = {{ user.region }} AND c = 'x'"),
    ("region = {{ user.region }} AND c = 'x'", "c = 'x' AND (region = {{ user.region }})"),
    ("a = 1 OR b = 2", "(a = 1 OR b = 2) AND d IS NULL"),
])
def test_the_edits_that_narrow_are_found(con: Any, old: str, new: str) -> None:
    assert narrows(old, new)
    assert rows(con, new) <= rows(con, old)


@pytest.mark.parametrize("old, new", [
    ("region = {{ user.region }}", "region = {{ user.region }} OR c = 'x'"),
    ("region = {{ user.region }}", "region = {{ user.region }} OR 1 = 1"),
    ("region = {{ user.region }}", "region <> {{ user.region }}"),
    ("region = {{ user.region }} OR c = 'x'", "region = {{ user.region }} AND c = 'x'"),
    ("a = 1 AND b = 2", "a = 1"),
])
def test_what_is_not_proven_narrowing_waits(old: str, new: str) -> None:
    """Including a real narrowing (OR to AND) the structure does not prove: it waits."""
    assert not narrows(old, new)


def _config(role: dict[str, Any], users: dict[str, Any] | None = None) -> TetherConfig:
    return TetherConfig.model_validate({
        "sources": {"main": {"url": "duckdb:///w.duckdb"}},
        "products": {"orders": {"table": "orders"}, "lines": {"table": "lines"}},
        "policies": {"roles": {"r": role, "boss": {"reviewer": True}},
                     "users": users or {"u": {"role": "r", "region": "EMEA"}}}})


@pytest.mark.parametrize("before, after, want", [
    ({"tools": ["*"]}, {"tools": ["orders_*"]}, "narrowing"),
    ({"tools": ["orders_*"]}, {"tools": ["*"]}, "widening"),
    ({"tools": ["orders_*"]}, {"tools": ["orders_by_*"]}, "narrowing"),
    ({"tools": ["a?"]}, {"tools": ["a*"]}, "widening"),
    ({}, {"tables": {"deny": ["lines"]}}, "narrowing"),
    ({"tables": {"deny": ["lines"]}}, {}, "widening"),
    ({"tables": {"allow": ["orders"]}}, {"tables": {"allow": ["*"]}}, "widening"),
    ({}, {"masks": {"orders.email": "hash"}}, "narrowing"),
    ({"masks": {"orders.email": "hash"}}, {"masks": {"orders.email": "redact"}}, "narrowing"),
    ({"masks": {"orders.email": "redact"}}, {"masks": {"orders.email": "hash"}}, "widening"),
    ({"masks": {"orders.email": "redact"}}, {}, "widening"),
    ({}, {"reviewer": True}, "widening"),
    ({"reviewer": True}, {}, "narrowing"),
])
def test_role_edits_are_classified_by_structure(before: dict[str, Any], after: dict[str, Any],
                                                want: str) -> None:
    found = changes(document(_config(before)), document(_config(after)))
    assert found and effect(found) == want, [c.to_json() for c in found]


def test_users_and_attributes() -> None:
    one = document(_config({}, {"u": {"role": "r", "region": "EMEA"}}))
    assert effect(changes(one, document(_config({}, {"u": {"role": "r", "region": "AMER"}})))
                  ) == "widening"
    assert effect(changes(one, document(_config({}, {"u": {"role": "boss", "region": "EMEA"}})))
                  ) == "widening"
    two = document(_config({}, {"u": {"role": "r", "region": "EMEA"}, "v": {"role": "r"}}))
    assert effect(changes(one, two)) == "widening"
    assert effect(changes(two, one)) == "narrowing"
    words = [c.words for c in changes(one, document(_config(
        {}, {"u": {"role": "r", "region": "AMER"}})))]
    assert words == ["user u: region AMER (was EMEA)"]


def test_glob_containment_is_sound() -> None:
    """Only what is proven: a?'s names are not all a*'s, and the other way round either."""
    names = ["a", "ab", "abc", "b", "a*", "orders_x"]
    from fnmatch import fnmatchcase

    for inner in ["*", "a*", "a?", "ab", "orders_*", "a[bc]"]:
        for outer in ["*", "a*", "a?", "ab", "orders_*", "a[bc]"]:
            if glob_within(inner, outer):
                assert all(fnmatchcase(n, outer) for n in names if fnmatchcase(n, inner)), (
                    inner, outer)
