"""`tether doctor` and the warnings `tether serve` prints at start, against real files and a real
PostgreSQL server (roles made and dropped here)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import as_reader, copy_project, drop_role, reader_role, run_cli

FIELDS = {"check", "severity", "subject", "message", "fix"}


def doctor_json(project: Path) -> tuple[int, list[dict[str, Any]], str]:
    res = run_cli("doctor", "--project", str(project), "--json")
    assert res.returncode in (0, 1), res.stderr
    found = json.loads(res.stdout)
    assert all(set(f) == FIELDS for f in found)
    return res.returncode, found, res.stdout + res.stderr


def serve_stderr(project: Path) -> str:
    """Start `tether serve` on stdio with stdin at its end: it prints, starts, and stops."""
    exe = Path(sys.executable).parent / "tether"
    res = subprocess.run([str(exe), "serve", "--project", str(project), "--as-user", "fin.ana"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""  # stdout is the MCP channel
    return res.stderr


# --- PostgreSQL -------------------------------------------------------------------------------


def test_superuser_source_is_a_finding(pg_demo_dir: Path) -> None:
    rc, found, _ = doctor_json(pg_demo_dir)
    assert rc == 1
    pg = [f for f in found if f["check"] == "postgres"]
    assert any("superuser" in f["message"] and f["severity"] == "warning" for f in pg)
    assert all("GRANT SELECT ON" in f["fix"] for f in pg)


def test_least_privilege_reader_has_no_postgres_finding(pg_reader_demo_dir: Path) -> None:
    _, found, _ = doctor_json(pg_reader_demo_dir)
    assert [f for f in found if f["check"] == "postgres"] == []


def test_a_role_that_may_insert_is_reported(pg_url: str, pg_schema: str, pg_demo_dir: Path,
                                            tmp_path: Path) -> None:
    import psycopg
    from psycopg import sql

    url = reader_role(pg_url, pg_schema)
    role = url.split("://", 1)[1].split("@", 1)[0]
    try:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(sql.SQL("GRANT INSERT ON {}.orders TO {}").format(
                sql.Identifier(pg_schema), sql.Identifier(role)))
        rc, found, _ = doctor_json(as_reader(pg_demo_dir, tmp_path / "p", pg_url, url))
    finally:
        drop_role(pg_url, url)
    assert rc == 1
    pg = [f for f in found if f["check"] == "postgres"]
    assert len(pg) == 1, pg
    assert pg[0]["subject"] == f"table {pg_schema}.orders (source main)"
    assert "INSERT" in pg[0]["message"] and "superuser" not in pg[0]["message"]
    assert pg[0]["fix"].startswith(f"REVOKE INSERT ON {pg_schema}.orders FROM {role}")


# --- DuckDB and files -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def duck_project(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A built copy of the demo with its own warehouse file, a runner token, and the keys that
    a first `tether serve` creates."""
    d = copy_project(demo_dir, tmp_path_factory.mktemp("doctor"))
    shutil.copy(demo_dir / "warehouse.duckdb", d / "warehouse.duckdb")
    yaml_file = d / "tether.yaml"
    yaml_file.write_text(yaml_file.read_text().replace(
        str(demo_dir / "warehouse.duckdb"), "warehouse.duckdb"))
    for f in (yaml_file, d / "warehouse.duckdb"):  # whatever the umask
        f.chmod(0o644)
    assert run_cli("build", "--project", str(d)).returncode == 0
    res = run_cli("token", "add", "fin.ana", "--runner", "--project", str(d))
    assert res.returncode == 0, res.stderr
    serve_stderr(d)
    assert (d / ".tether" / "mask.key").is_file() and (d / ".tether" / "cursor.key").is_file()
    return d, res.stdout.strip()


def secrets_of(d: Path, token: str) -> list[str]:
    keys = [(d / ".tether" / k).read_text().strip() for k in ("mask.key", "cursor.key")]
    hashes = [v["hash"] for v in json.loads((d / ".tether" / "tokens.json").read_text()).values()]
    return [token, *keys, *hashes]


def test_file_modes_are_findings_until_fixed(duck_project: tuple[Path, str]) -> None:
    d, token = duck_project
    (d / ".tether" / "mask.key").chmod(0o644)
    (d / "warehouse.duckdb").chmod(0o666)
    try:
        rc, found, text = doctor_json(d)
        human = run_cli("doctor", "--project", str(d))
    finally:
        (d / ".tether" / "mask.key").chmod(0o600)
        (d / "warehouse.duckdb").chmod(0o644)
    assert rc == 1 and human.returncode == 1
    warnings = {(f["check"], f["subject"]) for f in found if f["severity"] == "warning"}
    assert warnings == {("files", ".tether/mask.key"),
                        ("duckdb", "source main (warehouse.duckdb)")}
    assert "chmod 600" in human.stdout and "mask.key" in human.stdout
    for secret in secrets_of(d, token):
        assert secret not in text and secret not in human.stdout + human.stderr

    rc, found, _ = doctor_json(d)  # fixed: only the runner token's info line remains
    assert rc == 0
    assert [(f["check"], f["severity"]) for f in found] == [("tokens", "info")]


def test_serve_prints_the_findings_at_start(duck_project: tuple[Path, str]) -> None:
    d, token = duck_project
    (d / ".tether" / "cursor.key").chmod(0o640)
    try:
        stderr = serve_stderr(d)
    finally:
        (d / ".tether" / "cursor.key").chmod(0o600)
    assert "tether doctor: warning: .tether/cursor.key: the cursor signing key is mode 640" in (
        stderr)
    assert "tether doctor: info: token of fin.ana" in stderr
    assert not any(s in stderr for s in secrets_of(d, token))


def test_a_project_that_does_not_load_exits_2(tmp_path: Path) -> None:
    res = run_cli("doctor", "--project", str(tmp_path), "--json")
    assert res.returncode == 2 and res.stdout == ""
    assert "tether.yaml" in res.stderr
