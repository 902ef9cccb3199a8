"""The second test warehouse (tests/warehouse2): deterministic, loadable, buildable on DuckDB and
PostgreSQL, with cases whose gold answers recompute, and no name shared with the demo."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

import tether.demo
from conftest import copy_project, run_cli, without_named_restrictions
from tether.config import load_project
from tether.eval.cases import Case, load_cases
from warehouse2 import CASES_FILE, TABLES, USERS, build_second
from warehouse2.cases import first_ids, gold_value, second_specs

RESTRICTED = ("national_id", "passport_no")


def _fingerprint(db: Path) -> tuple[dict[str, int], str]:
    """Rows per table and one checksum over every value of every table."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        digest = hashlib.sha256()
        counts = {}
        for t in TABLES:
            rows = con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall()
            counts[t] = len(rows)
            digest.update(t.encode())
            for r in rows:
                digest.update(repr(r).encode())
        return counts, digest.hexdigest()
    finally:
        con.close()


def test_builds_deterministically(tmp_path: Path) -> None:
    a = build_second(tmp_path / "a", scale=0.1, cases=False)
    b = build_second(tmp_path / "b", scale=0.1, cases=False)
    c = build_second(tmp_path / "c", scale=0.1, seed=12, cases=False)
    fa, fb, fc = (_fingerprint(d / "warehouse.duckdb") for d in (a, b, c))
    assert fa == fb
    assert fa[1] != fc[1]
    assert all(n > 0 for n in fa[0].values())
    assert (a / "tether.yaml").read_text() == (b / "tether.yaml").read_text()
    assert 'url: "duckdb:///warehouse.duckdb"' in (a / "tether.yaml").read_text()


def test_scale_sizes_the_warehouse(second_dir: Path) -> None:
    counts, _ = _fingerprint(second_dir / "warehouse.duckdb")
    assert 8_000 <= sum(counts.values()) <= 20_000  # scale 0.25 of about 45k rows


def test_project_loads_with_what_tests_rely_on(second_dir: Path) -> None:
    c = load_project(second_dir).config
    assert c.clock is not None and c.clock.isoformat().startswith("2026-03-15T12:00")
    assert c.calendars["fiscal"].start_month == 7
    assert [n for n, p in c.products.items() if p.sql] == ["daily_visit_summary"]
    assert [n for n, p in c.products.items() if not p.primary_key] == ["clinic_rota"]
    assert "service_day" in c.products["daily_visit_summary"].primary_key
    assert sum(p.freshness is not None for p in c.products.values()) >= len(c.products) - 1
    assert any(t.predicate for t in c.glossary.values())
    assert {m.window for m in c.metrics.values()} >= {"period", "current", "trailing"}
    assert any(s.crosswalk for s in c.identifier_schemes.values())
    assert len(c.policies.roles) >= 3 and set(c.policies.users) == set(USERS)
    for user, (role, district) in USERS.items():
        u = c.policies.users[user]
        assert u.role == role and u.attributes().get("district") == district
    lead = c.policies.roles["district_lead"]
    assert "SELECT" in lead.row_filters["claims"] and "{{ user.district }}" in lead.row_filters[
        "claims"]
    assert set(c.policies.roles["front_desk"].masks.values()) == {"redact", "hash", "null"}
    assert "patients.national_id" in c.policies.restricted
    assert c.products["patients"].columns["national_id"].classification == "restricted"


def _build_and_list(project: Path) -> dict[str, list[dict[str, Any]]]:
    r = run_cli("build", "--project", str(project))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in (project / "tools").glob("*.json"))
    seen = {}
    for user in USERS:
        r = run_cli("tools", "--project", str(project), "--as-user", user, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        seen[user] = json.loads(r.stdout)
    r = run_cli("lint", "--project", str(project))
    assert r.returncode == 0, r.stdout + r.stderr
    return seen


def _check_tools(seen: dict[str, list[dict[str, Any]]]) -> None:
    everything = {d["name"] for d in seen["aud.ines"]}
    assert len(everything) >= 10
    assert {d["name"] for d in seen["lead.harbor"]} == everything
    desk = {d["name"] for d in seen["desk.omar"]}
    assert desk < everything and "insurance_claims_by_member_and_state" not in desk
    for defs in seen.values():  # named only in the probe's one policy sentence
        text = json.dumps([without_named_restrictions(d) for d in defs])
        assert not any(col in text for col in RESTRICTED)


def test_tether_build_publishes_tools_on_duckdb(second_dir: Path, tmp_path: Path) -> None:
    _check_tools(_build_and_list(copy_project(second_dir, tmp_path / "p")))


@pytest.mark.postgres
def test_tether_build_publishes_tools_on_postgres(pg_second_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "tether.yaml").write_text((pg_second_dir / "tether.yaml").read_text())
    assert "schema: tether_second_" in (project / "tether.yaml").read_text()
    _check_tools(_build_and_list(project))


def _cases(project: Path) -> list[Case]:
    loaded = load_cases(project / CASES_FILE)
    assert not loaded.errors, [str(e) for e in loaded.errors]
    return loaded.cases


def test_cases_validate_and_gold_answers_recompute(second_dir: Path) -> None:
    lines = (second_dir / CASES_FILE).read_text().splitlines()
    cases = [Case.model_validate_json(line) for line in lines]
    assert len(cases) >= 12 and len({c.case_id for c in cases}) == len(cases)
    assert all(c.case_id.startswith("clinic-") for c in cases)
    assert [c.case_id for c in _cases(second_dir)] == [c.case_id for c in cases]
    con = duckdb.connect(str(second_dir / "warehouse.duckdb"), read_only=True)
    try:
        def run(sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
            return con.execute(sql, params or None).fetchall()

        specs = {s.case_id: s for s in second_specs(first_ids(run))}
        for case in cases:
            assert case.gold.answer == gold_value(specs[case.case_id], run, "duckdb"), case.case_id
    finally:
        con.close()
    for case in cases:
        role, district = USERS[case.as_user]
        assert case.user_role == role
        assert case.gold.policy_scope == (district or "all_districts")
        assert case.gold.required_fields or case.gold.forbidden_fields
    refused = [c for c in cases if c.gold.answer == "refused"]
    assert refused and all(USERS[c.as_user][1] for c in refused)
    assert sum(c.gold.definition_sql is not None for c in cases) >= 5
    assert sum(c.gold.window is not None for c in cases) >= 5
    numeric = [c.gold.answer for c in cases if isinstance(c.gold.answer, int | float)]
    assert len(numeric) >= 12 and all(v > 0 for v in numeric)


def test_case_ids_differ_from_the_demo(second_dir: Path, demo_dir: Path) -> None:
    demo = {c.case_id for c in _cases(demo_dir)}
    assert demo and not demo & {c.case_id for c in _cases(second_dir)}


@pytest.mark.postgres
def test_gold_answers_agree_on_postgres(pg_second_dir: Path, second_dir: Path) -> None:
    pg = {c.case_id: c.gold.answer for c in _cases(pg_second_dir)}
    duck = {c.case_id: c.gold.answer for c in _cases(second_dir)}
    assert pg.keys() == duck.keys()
    for k, v in duck.items():
        assert pg[k] == pytest.approx(v, abs=1e-6) if isinstance(v, float) else pg[k] == v, k


# --- no name shared with the demo -----------------------------------------------------------------

_REF = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\b")


def _names(config: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(table names, column names) a tether.yaml mentions: products, tables, column keys and
    lists, and the columns of every table.column reference and SQL text."""
    products = config.get("products") or {}
    tables = set(products) | {p["table"] for p in products.values() if p.get("table")}
    columns: set[str] = set()
    texts: list[str] = []
    for p in products.values():
        columns |= set(p.get("columns") or {}) | set(p.get("primary_key") or [])
        columns |= set(p.get("time_columns") or {}) | set(p.get("identifiers") or {})
        columns |= set((p.get("tool") or {}).get("filters") or [])
        columns |= {v for v in (p.get("metric_time"), (p.get("freshness") or {}).get("column"))
                    if v}
        texts.append(p.get("sql") or "")
    for term in (config.get("glossary") or {}).values():
        texts += [term.get("predicate") or "", *term.get("fields", [])]
    for m in (config.get("metrics") or {}).values():
        texts += [m.get("measure", ""), m.get("predicate") or "", m.get("time") or "",
                  m.get("time_end") or "", *m.get("dimensions", []),
                  *[o.get("sql", "") for o in (m.get("outputs") or {}).values()]]
    for s in (config.get("identifier_schemes") or {}).values():
        texts.append(s.get("crosswalk") or "")
    policies = config.get("policies") or {}
    for role in (policies.get("roles") or {}).values():
        texts += [f if isinstance(f, str) else str(f.get("via", ""))  # {via: PRODUCT}
                  for f in (role.get("row_filters") or {}).values()]
        texts += [*(role.get("masks") or {})]
    texts += [r[k] for r in config.get("relationships") or [] for k in ("from", "to")]
    texts += [r for r in policies.get("restricted", []) if "*" not in r]
    for text in texts:
        for qualifier, column in _REF.findall(text):
            columns.add(column)
            if qualifier in tables:
                tables.add(qualifier)
    return tables, columns


def _yaml(text: str) -> dict[str, Any]:
    text = text.replace("__SOURCE_URL__", "duckdb:///x.duckdb").replace("__SOURCE_SCHEMA__", "")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_no_table_or_column_name_of_the_demo(second_dir: Path) -> None:
    demo_yaml = Path(tether.demo.__file__).with_name("tether.yaml").read_text(encoding="utf-8")
    demo_tables, demo_columns = _names(_yaml(demo_yaml))
    assert {"customers", "orders"} <= demo_tables and {"sales_region", "status"} <= demo_columns
    ours = _yaml((second_dir / "tether.yaml").read_text())
    tables, columns = _names(ours)
    assert not (tables | columns) & (demo_tables | demo_columns)
    con = duckdb.connect(str(second_dir / "warehouse.duckdb"), read_only=True)
    try:
        actual = con.execute("SELECT DISTINCT table_name, column_name FROM duckdb_columns() "
                             "WHERE NOT internal").fetchall()
    finally:
        con.close()
    assert not {t for t, _ in actual} & (demo_tables | demo_columns)
    assert not {c for _, c in actual} & (demo_tables | demo_columns)
    assert {t for t, _ in actual} == set(TABLES)


FROZEN = "d3359c62879efa34a92f4be10125e1b2ee5e8704568e8b12bbcc710fa5da1439"
"""sha256 of tests/warehouse2 (its generator, tether.yaml and cases) as frozen on 2026-12-01, then
with the auditor role given `reviewer: true` (who decides reviews: no table, row or case moved),
then with the visits tool's named filters gaining a path (`patients.home_district`, so the
attack corpus filters through a relationship on this warehouse too; 2026-12-06: no table, row or
case moved), then with the district lead's member_crosswalk filter written `{via: patients}` along
a declared relationship (the same rows as the hand-written subquery it replaces, so the attack
corpus and its oracle read through a via filter; 2026-12-06: no table, row or case moved), and
its claims filter `{via: patients}` two hops away (a claim's member number, that member's
patient; the same rows as the hand-written join it replaces; 2026-12-06: no table, row or case
moved)."""


def test_the_second_warehouse_and_its_cases_are_frozen() -> None:
    """Figures measured on this warehouse compare across changes only while it stays the same:
    a change to it needs a stated reason (in the change's note), then a new FROZEN."""
    root = Path(__file__).parent / "warehouse2"
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".yaml"):
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    assert h.hexdigest() == FROZEN, (
        "tests/warehouse2 changed: the second warehouse and its cases are frozen; state the "
        "reason for the change, then set FROZEN to " + h.hexdigest())
