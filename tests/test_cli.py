"""The `tether` command as a user runs it: output, JSON, and bad input without tracebacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli


def assert_clean_error(res: object, *needles: str) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)  # type: ignore[attr-defined]
    err: str = res.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in err and "Traceback" not in res.stdout  # type: ignore[attr-defined]
    assert err.startswith("error: ")
    for n in needles:
        assert n in err, err
    return err


@pytest.fixture
def project(tmp_path: Path, demo_dir: Path) -> Path:
    """A copy of the demo's tether.yaml pointing at the shared demo warehouse."""
    text = (demo_dir / "tether.yaml").read_text().replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{demo_dir / 'warehouse.duckdb'}")
    (tmp_path / "tether.yaml").write_text(text)
    return tmp_path


def test_profile_json(project: Path) -> None:
    res = run_cli("profile", "--project", str(project), "--product", "deals", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [p["product"] for p in data] == ["deals"]
    stage = next(c for c in data[0]["columns"] if c["column"]["name"] == "stage")
    assert {e["value"] for e in stage["enum"] if e["deprecated"]} == {"LEGAL_REVIEW",
                                                                      "VERBAL_COMMIT"}
    assert data[0]["fingerprint"].startswith("sha256:")


def test_profile_table_for_humans(project: Path) -> None:
    res = run_cli("profile", "--project", str(project), "--product", "orders")
    assert res.returncode == 0, res.stderr
    assert "orders" in res.stdout and "fingerprint sha256:" in res.stdout
    assert "enum CANCELLED, NEW, PAID, SHIPPED" in res.stdout


def test_profile_says_what_a_thin_definition_would_not(project: Path) -> None:
    res = run_cli("profile", "--project", str(project), "--product", "deals",
                  "--product", "pipeline_snapshot")
    assert res.returncode == 0, res.stderr
    assert "pipeline_snapshot: newest data is 14.0 h older than the clock" in res.stdout
    assert "deals.stage: 9 values, LEGAL_REVIEW, VERBAL_COMMIT not seen recently" in res.stdout
    assert "deals.closed_at: always midnight UTC" in res.stdout


def test_malformed_yaml(project: Path) -> None:
    (project / "tether.yaml").write_text("sources:\n  main: {url: x.duckdb\nproducts: [\n")
    assert_clean_error(run_cli("profile", "--project", str(project)), "tether.yaml:", "YAML")


def test_unknown_key(project: Path) -> None:
    p = project / "tether.yaml"
    p.write_text(p.read_text().replace("    primary_key: [order_id]", "    primary_keys: [order_id]"))
    err = assert_clean_error(run_cli("profile", "--project", str(project)),
                             "unknown key 'products.orders.primary_keys'", "primary_key")
    line = int(err.split("tether.yaml:")[1].split(":")[0])
    assert p.read_text().splitlines()[line - 1].strip().startswith("primary_keys:")


def test_source_down(tmp_path: Path) -> None:
    (tmp_path / "tether.yaml").write_text(
        'sources:\n  main: {url: "postgresql://postgres:s3cret@127.0.0.1:1/nowhere"}\n'
        "products:\n  t: {table: t}\n")
    err = assert_clean_error(run_cli("profile", "--project", str(tmp_path)),
                             "cannot connect", "127.0.0.1:1")
    assert "s3cret" not in err


def test_missing_duckdb_file(tmp_path: Path) -> None:
    (tmp_path / "tether.yaml").write_text(
        'sources:\n  main: {url: "duckdb:///missing.duckdb"}\nproducts:\n  t: {table: t}\n')
    assert_clean_error(run_cli("profile", "--project", str(tmp_path)), "does not exist")


def test_product_naming_missing_table(project: Path) -> None:
    p = project / "tether.yaml"
    p.write_text(p.read_text().replace("    table: orders\n", "    table: order\n", 1))
    assert_clean_error(run_cli("profile", "--project", str(project)),
                       'table "order" does not exist', "Did you mean 'orders'")
    assert "tether.yaml:" in res_err(project)


def res_err(project: Path) -> str:
    return run_cli("profile", "--project", str(project)).stderr


def test_product_declaring_missing_column(project: Path) -> None:
    p = project / "tether.yaml"
    p.write_text(p.read_text().replace("identifiers: {customer_ref: crm_account_id}",
                                       "identifiers: {customer_rf: crm_account_id}"))
    assert_clean_error(run_cli("profile", "--project", str(project)),
                       "'customer_rf'", "Did you mean 'customer_ref'")


def test_unknown_product(project: Path) -> None:
    assert_clean_error(run_cli("profile", "--project", str(project), "--product", "order"),
                       "no product named 'order'", "Did you mean 'orders'")


def test_no_project_file(tmp_path: Path) -> None:
    assert_clean_error(run_cli("profile", "--project", str(tmp_path)), "tether init")


def test_demo_init_cli_and_refusal(tmp_path: Path) -> None:
    d = tmp_path / "demo"
    res = run_cli("demo", "init", str(d), "--scale", "0.05")
    assert res.returncode == 0, res.stderr
    assert "order_lines" in res.stdout
    assert_clean_error(run_cli("demo", "init", str(d), "--scale", "0.05"), "--force")


def test_init_from_demo_warehouse(tmp_path: Path, demo_dir: Path) -> None:
    shutil.copy(demo_dir / "warehouse.duckdb", tmp_path / "wh.duckdb")
    res = run_cli("init", str(tmp_path), "--source", str(tmp_path / "wh.duckdb"))
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "tether.yaml").read_text()
    assert "url: duckdb:///wh.duckdb" in text or 'url: "duckdb:///wh.duckdb"' in text
    res = run_cli("profile", "--project", str(tmp_path), "--product", "orders", "--json")
    assert res.returncode == 0, res.stderr
    assert_clean_error(run_cli("init", str(tmp_path), "--source", str(tmp_path / "wh.duckdb")),
                       "already exists")
