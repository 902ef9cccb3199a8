"""tether.yaml: the model, and errors that name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.config import load_project, parse_project
from tether.demo import demo_project_text
from tether.errors import ConfigError

BASE = """\
sources:
  main: {url: "duckdb:///w.duckdb"}
products:
  orders:
    table: orders
    primary_key: [order_id]
    time_columns: {placed_at: UTC}
    metric_time: placed_at
"""


def parse(text: str) -> object:
    return parse_project(text, Path("/proj/tether.yaml"))


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        parse(text)
    return e.value


def test_demo_project_file_loads_with_every_section() -> None:
    p = parse_project(demo_project_text("duckdb:///warehouse.duckdb"), Path("/x/tether.yaml"))
    c = p.config
    assert c.clock is not None and c.clock.isoformat() == "2026-08-20T09:00:00+00:00"
    assert c.calendars["fiscal"].start_month == 2
    assert c.policies.users["mgr.emea"].attributes() == {"region": "EMEA"}
    assert c.policies.roles["support_agent"].masks == {"customers.email": "redact"}
    assert "customers.tax_id" in c.policies.restricted
    assert c.products["orders"].identifiers == {"customer_ref": "crm_account_id"}
    assert c.lineage[0].from_ == "raw.crm_accounts"
    assert c.metrics["active_customers"].calendar == "fiscal"


def test_unknown_key_names_line_and_suggests() -> None:
    e = error_of(BASE.replace("primary_key:", "primry_key:"))
    assert e.where == "tether.yaml:6"
    assert "products.orders.primry_key" in e.message
    assert "Did you mean 'primary_key'" in e.message


def test_unknown_top_level_key() -> None:
    e = error_of(BASE + "polices: {}\n")
    assert e.where == "tether.yaml:9"
    assert "Did you mean 'policies'" in e.message


def test_wrong_type_names_line() -> None:
    e = error_of(BASE.replace("time_columns: {placed_at: UTC}", "time_columns: [placed_at]"))
    assert e.where == "tether.yaml:7"
    assert "time_columns" in e.message


def test_malformed_yaml_names_line() -> None:
    e = error_of(BASE + "  bad: [unclosed\n")
    assert e.where is not None and e.where.startswith("tether.yaml:")
    assert "not valid YAML" in e.message


def test_duplicate_key_is_an_error() -> None:
    e = error_of(BASE + "    table: again\n")
    assert e.where == "tether.yaml:9"
    assert "twice" in e.message


def test_table_or_sql_exactly_one() -> None:
    e = error_of(BASE.replace("    table: orders\n", ""))
    assert "exactly one of `table:` or `sql:`" in e.message


def test_metric_time_must_be_a_time_column() -> None:
    e = error_of(BASE.replace("metric_time: placed_at", "metric_time: shipped_at"))
    assert e.where == "tether.yaml:8"
    assert "shipped_at" in e.message


def test_bad_time_zone() -> None:
    e = error_of(BASE.replace("{placed_at: UTC}", "{placed_at: Mars/Olympus}"))
    assert "Mars/Olympus" in e.message


def test_references_are_checked() -> None:
    text = BASE + "policies:\n  users:\n    ann: {role: analyst}\n"
    e = error_of(text)
    assert e.where == "tether.yaml:11"
    assert "unknown role 'analyst'" in e.message


def test_row_filter_template_must_be_a_user_attribute(tmp_path: Path) -> None:
    """One grammar reads templates (policy/templates.py); a template that is not one of its
    forms is an error naming the file and line, before anything is built or served."""
    import duckdb

    from tether.profiling.policycheck import check_against_sources

    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        con.execute("CREATE TABLE orders AS SELECT 1 AS order_id, now() AS placed_at, "
                    "'EMEA' AS region")
    (tmp_path / "tether.yaml").write_text(BASE + (
        "policies:\n  roles:\n    mgr:\n      row_filters:\n"
        "        orders: \"region = {{ region }}\"\n"))
    with pytest.raises(ConfigError) as e:
        check_against_sources(load_project(tmp_path))
    assert "{{ user.ATTRIBUTE }}" in e.value.paragraph() and "tether.yaml:13" in e.value.paragraph()


def test_env_interpolation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_T_DB", "w2.duckdb")
    p = parse(BASE.replace("w.duckdb", "${TETHER_T_DB}"))
    assert p.config.sources["main"].url == "duckdb:///w2.duckdb"  # type: ignore[attr-defined]


def test_missing_env_var_names_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_T_MISSING", raising=False)
    e = error_of(BASE.replace("w.duckdb", "${TETHER_T_MISSING}"))
    assert e.where == "tether.yaml:2"
    assert "TETHER_T_MISSING" in e.message


def test_missing_project_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    assert "tether init" in (e.value.hint or "")
