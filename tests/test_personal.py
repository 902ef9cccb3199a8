"""Personal data found by `tether init`, by name and (an e-mail address) by values, listed in the
starter to confirm (products.P.columns.C.personal) with the mask a role not named to see it
takes; confirmed, such a column is classified pii, so `masks: {pii: redact}` hides it and
nothing else. DuckDB and PostgreSQL. A club's members, in no test warehouse's domain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import call_tools, duck_tables, pg_tables, run_cli
from tether.config import load_project

MEMBERS = [(i, f"m{i}@club.test", f"Name{i}", f"+44 20 7946 {i:04d}",
            f"19{60 + i % 30}-0{1 + i % 9}-1{i % 9}", f"2020-0{1 + i % 9}-0{1 + i % 9}",
            ["Acme", "Initech"][i % 2], f"10.0.0.{i}") for i in range(1, 41)]
DDL = ("member_id integer PRIMARY KEY, contact text, \"FirstName\" text, \"Phone\" text, "
       "\"BirthDate\" date, \"HireDate\" date, \"Company\" text, ip_address text")
WANT = {"contact": "email", "FirstName": "name", "Phone": "phone", "BirthDate": "birth_date"}


@pytest.fixture(params=["duckdb", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    tables = {"members": (DDL, MEMBERS)}
    if request.param == "duckdb":
        yield ["--source", duck_tables(tmp_path / "club.duckdb", tables)]
        return
    url = request.getfixturevalue("pg_url")
    with pg_tables(url, "club", tables) as schema:
        yield ["--source", url, "--schema", schema]


def test_personal_data_is_found_listed_and_masked(source: list[str], tmp_path: Path) -> None:
    r = run_cli("init", "p", *source, cwd=tmp_path, env={"TETHER_USER": "ada"})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "p" / "tether.yaml").read_text()
    cfg = yaml.safe_load(text)
    cols = cfg["products"]["members"]["columns"]
    assert {c: f["personal"] for c, f in cols.items()} == WANT
    assert "every value is an e-mail address" in text  # found by its values, not its name
    assert "masks: {pii: redact}" in text  # the mask suggested, as a comment
    cfg["policies"]["roles"]["analyst"] = {"tools": ["*"], "masks": {"pii": "redact"}}
    cfg["policies"]["users"]["bo"] = {"role": "analyst"}
    (tmp_path / "p" / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert run_cli("build", "--project", str(tmp_path / "p")).returncode == 0
    project = load_project(tmp_path / "p")
    assert {c for c, f in project.config.products["members"].columns.items()
            if f.classification == "pii"} == set(WANT)
    got, = call_tools(project, "bo", [("members_by_attributes", {"limit": 3})])
    assert not got.is_error, got.content[0].text
    for row in got.structured_content["rows"]:  # redacted, and only those
        assert not str(row["FirstName"]).startswith("Name") and "+44" not in str(row["Phone"])
        assert row["Company"] in ("Acme", "Initech") and row["ip_address"].startswith("10.0.0.")
    assert "@club.test" not in got.content[0].text + str(got.structured_content)
