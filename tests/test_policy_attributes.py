"""A row filter's ``{{ user.X }}`` names an attribute every user of its role has, checked before
anything is published: `tether build` and `tether check` fail naming the file, the line, the
user, the attribute and the nearest one they have (``staff_id`` against users who carry
``StaffId``), and publish nothing. Before, the policy built and published, and the mistake was
found only when the user's first call was refused."""

from __future__ import annotations

from pathlib import Path

import duckdb
import yaml

from conftest import run_cli


def _project(tmp_path: Path, attribute: str) -> Path:
    tmp_path = tmp_path / attribute
    tmp_path.mkdir()
    db = tmp_path / "desk.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE tickets (ticket_id integer PRIMARY KEY, owner_id integer, "
                    "topic text)")
        con.executemany("INSERT INTO tickets VALUES (?, ?, ?)",
                        [(i, 1 + i % 3, ["billing", "login"][i % 2]) for i in range(1, 31)])
    folder = tmp_path / "p"
    folder.mkdir(exist_ok=True)
    (folder / "tether.yaml").write_text(yaml.safe_dump({
        "sources": {"main": {"url": f"duckdb:///{db}"}},
        "products": {"tickets": {"table": "tickets", "primary_key": ["ticket_id"]}},
        "policies": {
            "roles": {"lead": {"tools": ["*"], "reviewer": True},
                      "agent": {"tools": ["*"], "row_filters": {
                          "tickets": f"owner_id = {{{{ user.{attribute} }}}}"}}},
            "users": {"ada": {"role": "lead"}, "bea": {"role": "lead"},
                      "cal": {"role": "agent", "StaffId": 2},
                      "dan": {"role": "agent", "StaffId": 3}}}}, sort_keys=False))
    return folder


def test_an_attribute_no_user_has_fails_build_and_check(tmp_path: Path) -> None:
    folder = _project(tmp_path, "staff_id")
    r = run_cli("build", "--project", str(folder))
    assert r.returncode == 2, r.stdout + r.stderr
    said = r.stderr
    line = next(i for i, text in enumerate((folder / "tether.yaml").read_text().splitlines(), 1)
                if "user.staff_id" in text)
    assert f"tether.yaml:{line}" in said, said
    assert "user cal" in said and "'staff_id'" in said and "did you mean 'StaffId'?" in said
    assert not (folder / "tools").exists() or not list((folder / "tools").glob("*.json"))
    assert "Traceback" not in said

    good = _project(tmp_path, "StaffId")
    assert run_cli("build", "--project", str(good)).returncode == 0
    text = (good / "tether.yaml").read_text().replace("user.StaffId", "user.staffid")
    (good / "tether.yaml").write_text(text)
    r = run_cli("check", "--project", str(good))
    assert r.returncode == 2 and "did you mean 'StaffId'?" in r.stderr, r.stdout + r.stderr
