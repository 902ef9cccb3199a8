"""Edge cases found in review: each one crashed, leaked or misled before it was fixed."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from conftest import piped, run_cli, without_named_restrictions
from tether.config import load_project, parse_project
from tether.context.meta import enum_of
from tether.errors import ConfigError
from tether.profiling import profile_product, profile_project
from tether.serve.executor import Executor
from tether.serve.kinds import Call, ToolError
from tether.serve.pagination import load_key
from tether.toolgen import generate

BASE = """\
sources:
  main: {{url: "duckdb:///{db}"}}
products:
  people:
    table: people
    primary_key: [id]
    tool: {{name: people_by_team{extra_tool}}}
{more}
policies:
  roles:
    staff: {{tools: ["*"], masks: {{people.team: redact}}}}
  users:
    sam: {{role: staff}}
  restricted: ["*.ssn*"]
"""


def make(tmp_path: Path, more: str = "", extra_tool: str = "") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, team VARCHAR NOT NULL, "
                  "info STRUCT(city VARCHAR, ssn VARCHAR), note VARCHAR)")
        c.execute("INSERT INTO people SELECT i, ['red', 'blue'][1 + i % 2], "
                  "{'city': 'x', 'ssn': '123-45-' || i}, '[/] [bold]x' FROM range(40) r(i)")
    (tmp_path / "tether.yaml").write_text(BASE.format(db=db, more=more, extra_tool=extra_tool))
    return tmp_path


def test_a_struct_with_a_restricted_field_is_withheld_whole(tmp_path: Path) -> None:
    project = load_project(make(tmp_path))
    profiles = {p.product: p for p in profile_project(project)}
    for mode in ("grounded", "bare"):
        for t in generate(project, profiles, mode):  # type: ignore[arg-type]
            text = json.dumps(without_named_restrictions(t.wire())) + (t.plan.select or "")
            assert "ssn" not in text and '"info"' not in (t.plan.select or ""), (mode, t.name)
    run_sql = next(t for t in generate(project, profiles, "generic") if t.name == "run_sql")
    ex = Executor(project, load_key(tmp_path / "k"))
    try:
        for sql in ("SELECT info FROM people", "SELECT info.ssn FROM people",
                    "SELECT * FROM people"):
            try:
                rows = piped(ex).run(Call("sam", "run_sql", "1", run_sql.wire(), run_sql.plan,
                                   {"sql": sql}))["rows"]
            except ToolError:
                continue
            assert "ssn" not in json.dumps(rows) and "123-45" not in json.dumps(rows), sql
    finally:
        ex.close()


def test_masked_column_cannot_be_a_filter(tmp_path: Path) -> None:
    project = load_project(make(tmp_path))
    tool = next(t for t in generate(project, {p.product: p for p in profile_project(project)})
                if t.name == "people_by_team")
    ex = Executor(project, load_key(tmp_path / "k"))
    try:
        with pytest.raises(ToolError, match="masked"):
            piped(ex).run(Call("sam", tool.name, "1", tool.wire(), tool.plan, {"team": "red"}))
        rows = piped(ex).run(Call("sam", tool.name, "1", tool.wire(), tool.plan, {}))["rows"]
        assert {r["team"] for r in rows} == {"[redacted]"}
    finally:
        ex.close()


def test_default_limit_follows_a_small_max_rows(tmp_path: Path) -> None:
    project = load_project(make(tmp_path, extra_tool=", max_rows: 10"))
    tool = next(t for t in generate(project, {p.product: p for p in profile_project(project)})
                if t.name == "people_by_team")
    assert tool.input_schema["properties"]["limit"]["default"] == 10
    ex = Executor(project, load_key(tmp_path / "k"))
    try:
        out = piped(ex).run(Call("sam", tool.name, "1", tool.wire(), tool.plan, {}))
    finally:
        ex.close()
    assert out["row_count"] == 10 and out["truncated"]


@pytest.mark.parametrize(("more", "says"), [
    ("metrics:\n  n: {measure: 'count(*)', dimensions: [team]}", "must be product.column"),
    ("metrics:\n  n: {measure: 'count(people.id)', window: period, time: people.id}",
     "needs `calendar:`"),
    ("metrics:\n  n: {measure: 'count(people.id)', window: trailing}", "needs `time:`"),
])
def test_metric_mistakes_are_config_errors(tmp_path: Path, more: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("`", ".").replace("(", ".")):
        load_project(make(tmp_path, more))


def test_restricted_metric_dimension_and_duplicate_names(tmp_path: Path) -> None:
    project = load_project(make(tmp_path / "a", "metrics:\n  n: {measure: 'count(people.id)', "
                                                "window: current, dimensions: [people.ssn_hash]}"))
    with pytest.raises(ConfigError, match="restricted"):
        generate(project, {p.product: p for p in profile_project(project)})
    project = load_project(make(tmp_path / "b", "metrics:\n  n: {measure: 'count(people.id)', "
                                                "window: current, tool: {name: people_by_team}}"))
    with pytest.raises(ConfigError, match="two tools would be named 'people_by_team'"):
        generate(project, {p.product: p for p in profile_project(project)})


def test_tool_names_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tool name"):
        parse_project(BASE.format(db="w.duckdb", more="", extra_tool="").replace(
            "people_by_team", "../../pwned"), tmp_path / "tether.yaml")


def test_markup_in_data_does_not_crash_the_table(tmp_path: Path) -> None:
    make(tmp_path)
    res = run_cli("profile", "--project", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "[/] [bold]x" in res.stdout


def test_one_row_currency_table(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE TABLE t AS SELECT 'USD' AS currency, 100 AS amount_cents")
    (tmp_path / "tether.yaml").write_text(
        f'sources:\n  main: {{url: "duckdb:///{db}"}}\nproducts:\n  t: {{table: t}}\n')
    p = profile_product(load_project(tmp_path), "t")
    assert p.column("amount_cents").unit_hint == "USD_cents"


def test_lint_missing_file_is_clean(tmp_path: Path) -> None:
    res = run_cli("lint", str(tmp_path / "nope.json"))
    assert res.returncode == 2 and "does not exist" in res.stderr and "Traceback" not in res.stderr


MIXED = """\
sources:
  main: {{url: "{url}", schema: "{schema}"}}
products:
  Orders:
    table: Orders
    primary_key: [OrderId]
    tool: {{name: orders_by_status}}
policies:
  roles:
    manager:
      tools: ["*"]
      row_filters: {{Orders: '"Region" = {{{{ user.region }}}}'}}
  users:
    mia: {{role: manager, region: EMEA}}
"""


def test_mixed_case_postgres_names_are_quoted(tmp_path: Path, pg_url: str) -> None:
    # PostgreSQL folds an unquoted Orders to orders, another (here missing) table: tether must
    # quote the names exactly as the catalog spells them, in profiles, plans and policy filters
    import psycopg

    schema = f"tether_mixed_{tmp_path.name[-8:].lower().replace('-', '_')}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE; CREATE SCHEMA "{schema}"')
        c.execute(f'CREATE TYPE "{schema}".channel AS ENUM (\'web\', \'store\', \'phone\')')
        c.execute(f'CREATE TABLE "{schema}"."Orders" ("OrderId" int PRIMARY KEY, '
                  f'"Status" text NOT NULL, "Region" text NOT NULL, '
                  f'"Channel" "{schema}".channel NOT NULL)')
        c.execute(f'INSERT INTO "{schema}"."Orders" SELECT g, '
                  "CASE WHEN g % 3 = 0 THEN 'NEW' ELSE 'PAID' END, "
                  "CASE WHEN g % 2 = 0 THEN 'EMEA' ELSE 'AMER' END, "
                  "CASE WHEN g % 5 = 0 THEN 'store' ELSE 'web' END::"
                  f'"{schema}".channel FROM generate_series(1, 60) g')
    try:
        (tmp_path / "tether.yaml").write_text(MIXED.format(url=pg_url, schema=schema))
        project = load_project(tmp_path)
        profiles = {p.product: p for p in profile_project(project)}
        status = next(c for c in profiles["Orders"].columns if c.column.name == "Status")
        assert sorted(e.value for e in status.enum or []) == ["NEW", "PAID"]
        # a native ENUM column is a string column: its observed values become the tool's enum
        channel = next(c for c in profiles["Orders"].columns if c.column.name == "Channel")
        assert channel.column.kind == "string"
        assert sorted(e.value for e in channel.enum or []) == ["store", "web"]
        tool = next(t for t in generate(project, profiles) if t.name == "orders_by_status")
        run_sql = next(t for t in generate(project, profiles, "generic") if t.name == "run_sql")
        ex = Executor(project, load_key(tmp_path / "k"))
        try:
            out = piped(ex).run(Call("mia", tool.name, "1", tool.wire(), tool.plan,
                              {"Status": "NEW", "limit": 200}))
            counted = piped(ex).run(Call("mia", "run_sql", "1", run_sql.wire(), run_sql.plan,
                                  {"sql": 'SELECT count(*) AS n FROM "Orders"'}))
        finally:
            ex.close()
        assert counted["rows"] == [{"n": 30}]  # the guarded SQL path, row filter applied
        assert enum_of(tool.input_schema["properties"]["Channel"]) == ["store", "web"]
        rows = out["rows"]
        # g % 3 = 0 and g % 2 = 0 for g in 1..60: the ten multiples of 6, all EMEA
        assert sorted(r["OrderId"] for r in rows) == list(range(6, 61, 6))
        assert {(r["Status"], r["Region"]) for r in rows} == {("NEW", "EMEA")}
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
