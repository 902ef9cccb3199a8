"""`tether init`: what it infers from the data, and what it leaves to a person."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from tether.config import SourceConfig, parse_project
from tether.profiling.starter import infer_products, render_starter, starter_url
from tether.sources import open_source


def starter(root: Path, url: str, schema: str | None = None) -> tuple[str, dict]:  # type: ignore[type-arg]
    with open_source("main", SourceConfig(url=url, schema=schema), root) as src:
        text = render_starter(url, infer_products(src))
    parse_project(text, root / "tether.yaml")
    return text, yaml.safe_load(text)


def _check(text: str, data: dict) -> None:  # type: ignore[type-arg]
    products = data["products"]
    assert set(products) >= {"customers", "orders", "order_lines", "deals", "pipeline_snapshot"}
    assert products["orders"]["primary_key"] == ["order_id"]
    assert products["order_lines"]["primary_key"] == ["order_id", "line_no"]
    assert products["orders"]["time_columns"]["placed_at"] == "UTC"
    assert products["orders"]["metric_time"] == "placed_at"
    assert products["orders"]["freshness"] == {"column": "loaded_at"}
    assert products["order_lines"]["freshness"] == {"load_time": True}
    ids = products["orders"]["identifiers"]
    assert "customer_ref" in ids
    schemes = data["identifier_schemes"]
    assert schemes[ids["customer_ref"]]["pattern"] == "^A-\\d{7}$"
    assert "uuid" not in str(products["orders"].get("identifiers"))
    # every inference is marked for a person
    for line in text.splitlines():
        if line.strip().startswith(("metric_time:", "freshness: {column")):
            assert "# inferred: confirm" in line


def test_starter_from_duckdb(demo_dir: Path, tmp_path: Path) -> None:
    text, data = starter(tmp_path, f"duckdb:///{demo_dir / 'warehouse.duckdb'}")
    _check(text, data)
    # a declared primary key is not an inference; an inferred one is marked
    assert "primary_key: [customer_id]\n" in text


def test_starter_from_postgres(pg_demo_dir: Path, pg_url: str, pg_schema: str,
                               tmp_path: Path) -> None:
    text, data = starter(tmp_path, pg_url, pg_schema)
    _check(text, data)


def test_password_becomes_env_var(tmp_path: Path) -> None:
    url, env = starter_url("postgresql://app:hunter2@db.internal:5432/wh", tmp_path)
    assert url == "postgresql://app:${TETHER_SOURCE_PASSWORD}@db.internal:5432/wh"
    assert env == "TETHER_SOURCE_PASSWORD"


def test_relative_duckdb_path(tmp_path: Path) -> None:
    assert starter_url(str(tmp_path / "w.duckdb"), tmp_path) == ("duckdb:///w.duckdb", None)


# --- the CLI, as a new user meets it -------------------------------------------------------------


def _one_paragraph(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
    return r.stderr


def test_init_writes_a_starter_that_serves(demo_dir: Path, tmp_path: Path) -> None:
    """A relative file name resolves from where init runs; the starter has a user and serves."""
    shutil.copy(demo_dir / "warehouse.duckdb", tmp_path / "wh.duckdb")
    r = run_cli("init", "proj", "--source", "wh.duckdb", cwd=tmp_path,
                env={"TETHER_USER": "pat.doe"})
    assert r.returncode == 0, r.stderr
    data = yaml.safe_load((tmp_path / "proj" / "tether.yaml").read_text())
    assert data["policies"]["users"] == {"pat.doe": {"role": "everything"}}
    assert data["policies"]["roles"]["everything"]["tools"] == ["*"]
    # a reviewer, so the first change that waits for a person can be decided (and the file
    # says the first real policy publishes at once and should name a second reviewer)
    assert data["policies"]["roles"]["everything"]["reviewer"] is True
    said = " ".join((tmp_path / "proj" / "tether.yaml").read_text().split())
    assert "your first real policy publishes at once" in said.replace("# ", "")
    assert "name a second reviewer in it" in said.replace("# ", "")
    assert data["sources"]["main"]["url"] == f"duckdb:///{(tmp_path / 'wh.duckdb').resolve()}"
    assert run_cli("build", "--project", "proj", cwd=tmp_path).returncode == 0
    # the starter's user sees every tool without anything else to edit (serving over stdio as
    # that user: test_realdata.py)
    r = run_cli("tools", "--project", "proj", "--as-user", "pat.doe", "--json", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert len(json.loads(r.stdout)) == len(data["products"]) + 1  # one listing each, the probe


def test_the_readme_own_data_path_runs_as_written(demo_dir: Path, tmp_path: Path) -> None:
    """README's commands word for word, in an environment without USER or TETHER_USER (some
    containers): init, profile, build, then `tether serve --project my-project` over stdio with
    no name given runs as the login name, the user init wrote, and serves every product."""
    import getpass
    import subprocess
    import sys

    import anyio
    from mcp import Client, StdioServerParameters

    shutil.copy(demo_dir / "warehouse.duckdb", tmp_path / "warehouse.duckdb")
    tether = str(Path(sys.executable).parent / "tether")
    env = {k: v for k, v in os.environ.items()
           if k not in ("USER", "LOGNAME", "TETHER_USER", "LNAME", "USERNAME")}
    for args in (["init", "my-project", "--source", "warehouse.duckdb"],
                 ["profile", "--project", "my-project"], ["build", "--project", "my-project"]):
        r = subprocess.run([tether, *args], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, (args, r.stderr)
    data = yaml.safe_load((tmp_path / "my-project" / "tether.yaml").read_text())
    assert list(data["policies"]["users"]) == [getpass.getuser()]

    async def listed() -> list[str]:
        params = StdioServerParameters(command=tether, args=[
            "serve", "--project", str(tmp_path / "my-project")], env=env, cwd=str(tmp_path))
        async with Client(params) as c:
            return [t.name for t in (await c.list_tools()).tools]
    names = anyio.run(listed)
    assert len(names) == len(data["products"]) + 1, names  # one listing each, the probe


def test_init_errors_leave_nothing_behind(tmp_path: Path) -> None:
    text = _one_paragraph(run_cli("init", "p1", "--source", "missing.duckdb", cwd=tmp_path))
    assert "missing.duckdb" in text and str(tmp_path) in text
    text = _one_paragraph(run_cli("init", "p2", "--source", "postgresql://u@h/${NO_SUCH_VAR}",
                                  cwd=tmp_path))
    assert "NO_SUCH_VAR" in text
    assert not (tmp_path / "p1").exists() and not (tmp_path / "p2").exists()


@pytest.mark.postgres
def test_init_postgres_schema_and_password(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    schema = f"init_{os.getpid()}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')
    try:
        # an empty schema: one paragraph naming it and --schema, and no folder
        text = _one_paragraph(run_cli("init", "empty", "--source", pg_url, "--schema", schema,
                                      cwd=tmp_path))
        assert schema in text and "--schema" in text and not (tmp_path / "empty").exists()
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'CREATE TABLE "{schema}".things (code text PRIMARY KEY, n integer)')
            c.execute(f"INSERT INTO \"{schema}\".things VALUES ('a', 1), ('b', 2)")
        # a password in the URL is used now and written as a variable
        with_pw = pg_url.replace("://postgres@", "://postgres:s3cret@", 1)
        r = run_cli("init", "proj", "--source", with_pw, "--schema", schema, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        text = (tmp_path / "proj" / "tether.yaml").read_text()
        assert "s3cret" not in text and "${TETHER_SOURCE_PASSWORD}" in text
        assert f"schema: {schema}" in text and "TETHER_SOURCE_PASSWORD" in r.stderr
        r = run_cli("build", "--project", "proj", cwd=tmp_path,
                    env={"TETHER_SOURCE_PASSWORD": "s3cret"})
        assert r.returncode == 0, r.stderr
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_the_readmes_path_for_your_own_data_works_as_written(demo_dir: Path,
                                                              tmp_path: Path) -> None:
    """Every `tether` line of the README's own-data block, run as written (the PostgreSQL
    lines aside), then its serve line started by the official SDK client over stdio."""
    import re
    import shlex
    import sys

    import anyio
    from mcp import Client, StdioServerParameters

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("## Pointing tether at your own data", 1)[1].split("```sh", 1)[1]
    lines = [re.sub(r"\s+#.*$", "", ln).strip() for ln in block.split("```", 1)[0].splitlines()]
    lines = [ln for ln in lines if ln.startswith("tether ") and "postgresql://" not in ln]
    assert [ln.split()[1] for ln in lines] == ["init", "profile", "build", "lint", "serve"]
    shutil.copy(demo_dir / "warehouse.duckdb", tmp_path / "warehouse.duckdb")
    env = {"USER": "pat.doe", "TETHER_USER": ""}
    for ln in lines[:-1]:
        r = run_cli(*shlex.split(ln)[1:], cwd=tmp_path, env=env)
        assert r.returncode == 0, (ln, r.stdout, r.stderr)
    serve = shlex.split(ln := lines[-1])
    exe = str(Path(sys.executable).parent / "tether")

    async def go() -> list[str]:  # no name given: the login name, as init took it
        params = StdioServerParameters(command=exe, args=serve[1:], cwd=str(tmp_path),
                                       env={"PATH": os.environ["PATH"], "USER": "pat.doe"})
        async with Client(params) as c:
            return [t.name for t in (await c.list_tools()).tools]

    assert "explain_data_product" in anyio.run(go), ln
