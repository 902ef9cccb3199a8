"""The first admin: the README's path for one's own data (init, build, then write the policy),
walked by one person. Their first real policy publishes at once (rule `first-admin`, recorded
with their login, and said); a later widening by the same person waits for another reviewer
once a published policy names two; no step asks for another person's name. While no
published policy has named two reviewers, the same person goes on alone (nobody else could
review), and removing a reviewer again never brings that back. DuckDB and PostgreSQL, and the
demo's warehouse read through `tether init` as anyone's data."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import duck_tables, pg_tables, run_cli
from tether.config import load_project
from tether.registry import open_registry

DOCKS = [(i, ["north", "south"][i % 2], f"dock{i}@harbour.test") for i in range(1, 31)]


DOCK_TABLES = {"docks": ("dock_id integer PRIMARY KEY, region text, keeper_email text", DOCKS)}


@pytest.fixture(params=["duckdb", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    if request.param == "duckdb":
        yield ["--source", duck_tables(tmp_path / "harbour.duckdb", DOCK_TABLES)]
        return
    url = request.getfixturevalue("pg_url")
    with pg_tables(url, "harbour", DOCK_TABLES) as schema:
        yield ["--source", url, "--schema", schema]


def _policy(folder: Path, roles: dict[str, Any], users: dict[str, Any]) -> None:
    cfg = yaml.safe_load((folder / "tether.yaml").read_text())
    cfg["policies"] = {"roles": roles, "users": users}
    (folder / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def _check(folder: Path) -> tuple[int, dict[str, Any]]:
    r = run_cli("check", "--project", str(folder), "--json")
    assert r.returncode in (0, 10, 11), r.stderr
    return r.returncode, json.loads(r.stdout)


def _published(folder: Path) -> dict[str, Any]:
    registry = open_registry(load_project(folder))
    try:
        cur = registry.current_policy()
        assert cur is not None
        return {"version": cur.version, "policy": cur.definition["policy"],
                "review": cur.definition["_meta"]["tether/context"]["review"]}
    finally:
        registry.close()


TEAM = {"manager": {"tools": ["*"], "reviewer": True},
        "clerk": {"tools": ["*"], "row_filters": {"docks": "region = {{ user.region }}"},
                  "masks": {"docks.keeper_email": "redact"}}}


def _walk(folder_parent: Path, source: list[str]) -> Path:
    """init and build as the README says, then the team's policy written and checked."""
    r = run_cli("init", "p", *source, cwd=folder_parent, env={"TETHER_USER": "ada"})
    assert r.returncode == 0, r.stderr
    folder = folder_parent / "p"
    r = run_cli("build", "--project", str(folder))
    assert r.returncode == 0, r.stderr
    assert _published(folder)["review"]["rule"] == "initial"  # the starter's example
    return folder


def test_the_first_real_policy_publishes_then_widening_waits(source: list[str],
                                                             tmp_path: Path) -> None:
    folder = _walk(tmp_path, source)
    _policy(folder, TEAM, {"ada": {"role": "manager"}, "bea": {"role": "manager"},
                           "cal": {"role": "clerk", "region": "north"}})
    code, got = _check(folder)
    assert code == 10, got
    first = _published(folder)
    assert first["review"] == {"mode": "auto", "rule": "first-admin", "at": first["review"]["at"],
                               "by": f"os:{getpass.getuser()}"}
    assert set(first["policy"]["users"]) == {"ada", "bea", "cal"}
    said = " ".join(got["warnings"])
    assert "published at once (rule first-admin" in said and "bea" in said

    # the same person widens (the clerk's row filter dropped): it waits for bea
    widened = json.loads(json.dumps(TEAM))
    widened["clerk"]["row_filters"] = {}
    _policy(folder, widened, {"ada": {"role": "manager"}, "bea": {"role": "manager"},
                              "cal": {"role": "clerk", "region": "north"}})
    code, got = _check(folder)
    assert code == 11, got
    assert _published(folder)["version"] == first["version"]
    rid = got["reviews"][0]
    for name in ("ada", "bea"):  # one person, one login: no name they give approves it
        r = run_cli("review", "approve", str(rid), "--as", name, "--project", str(folder))
        assert r.returncode != 0 and "same login" in r.stderr, r.stderr


def test_alone_until_two_reviewers_then_never_again(tmp_path: Path) -> None:
    folder = _walk(tmp_path, ["--source", duck_tables(tmp_path / "harbour.duckdb", DOCK_TABLES)])
    alone = {"ada": {"role": "manager"}, "cal": {"role": "clerk", "region": "north"}}
    _policy(folder, TEAM, alone)
    code, got = _check(folder)
    assert code == 10 and "fewer than two reviewers" in " ".join(got["warnings"]), got
    # still alone: a second clerk (a widening) is published the same way
    _policy(folder, TEAM, alone | {"dan": {"role": "clerk", "region": "south"}})
    code, got = _check(folder)
    assert code == 10 and _published(folder)["review"]["rule"] == "first-admin"
    # the second reviewer arrives: published, and from now on widening waits
    both = alone | {"dan": {"role": "clerk", "region": "south"}, "bea": {"role": "manager"}}
    _policy(folder, TEAM, both)
    assert _check(folder)[0] == 10
    # removing bea again narrows (published at once) but never brings back the first admin
    _policy(folder, TEAM, alone)
    assert _check(folder)[0] == 10
    widened = json.loads(json.dumps(TEAM))
    widened["clerk"]["masks"] = {}
    _policy(folder, widened, alone)
    code, got = _check(folder)
    assert code == 11, got


@pytest.mark.parametrize("warehouse", ["demo_dir", "second_dir", "pg_demo_dir",
                                       "pg_second_dir", "zoo:tpch"])
def test_the_test_warehouses_read_as_anyones_data(warehouse: str, request: pytest.FixtureRequest,
                                                  tmp_path: Path) -> None:
    """Both test warehouses, on DuckDB and PostgreSQL, and a zoo dataset, through `tether init`
    as a new user's own data: the first real policy publishes at once, the next widening
    waits."""
    from tether.sources import resolve_duckdb_path

    if warehouse.startswith("zoo:"):  # a zoo dataset (tests/zoo.py), loaded as its files are
        import zoo

        db = tmp_path / "zoo.duckdb"
        zoo.load_duckdb(warehouse[4:], db, tmp_path / "files")
        init = ["--source", f"duckdb:///{db}"]
    else:
        if warehouse.startswith("pg_"):
            request.getfixturevalue("pg_url")  # skipped without PostgreSQL
        found = request.getfixturevalue(warehouse)
        src = next(iter(load_project(found).config.sources.values()))
        assert src.url is not None
        path = resolve_duckdb_path(src.url, found)
        init = (["--source", f"duckdb:///{path}"] if path else
                ["--source", src.url, *(["--schema", src.schema_] if src.schema_ else [])])
    folder = _walk(tmp_path, init)
    products = sorted(yaml.safe_load((folder / "tether.yaml").read_text())["products"])
    roles: dict[str, Any] = {"lead": {"tools": ["*"], "reviewer": True},
                             "support": {"tools": ["*"], "tables": {"allow": products[:3]}}}
    users = {"ada": {"role": "lead"}, "bea": {"role": "lead"}, "sam": {"role": "support"}}
    _policy(folder, roles, users)
    code, got = _check(folder)
    assert code == 10 and _published(folder)["review"]["rule"] == "first-admin", got
    roles["support"]["tables"] = {"allow": products[:4]}
    _policy(folder, roles, users)
    assert _check(folder)[0] == 11
