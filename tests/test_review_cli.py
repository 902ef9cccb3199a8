"""`tether review approve|reject ID --as NAME [--comment TEXT]`: only a user whose role has
`reviewer: true` decides, on the demo and on the second warehouse; a refusal changes nothing."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import copy_project, run_cli
from tether.config import load_project
from tether.demo import init_demo
from tether.demo.drift import apply
from tether.drift.check import check, decide
from tether.drift.publish import build
from tether.errors import NotPermittedError
from tether.registry import Registry, open_registry


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("reviews") / "demo"
    init_demo(d, scale=0.05)
    build(load_project(d))
    apply(d, "redefine-active")
    assert check(load_project(d)).exit_code == 11  # semantic: waits for a person
    return d


@pytest.fixture
def demo(base: Path, tmp_path: Path) -> Path:
    """A copy of its own (warehouse file and registry) for each test."""
    return Path(shutil.copytree(base, tmp_path / "demo"))


def _pending(project: Path) -> dict[str, object]:
    registry = open_registry(load_project(project))
    try:
        (review,) = registry.reviews("pending")
        return review
    finally:
        registry.close()


def _state(project: Path) -> tuple[object, ...]:
    registry = open_registry(load_project(project))
    try:
        return (registry.reviews(), {n: v.version for n, v in registry.current().items()},
                registry.latest_publication())
    finally:
        registry.close()


def test_a_non_reviewer_is_refused_and_nothing_changes(demo: Path) -> None:
    review = _pending(demo)
    before = _state(demo)
    for who in ("mgr.emea", "someone"):  # a user without reviewer: true, and no user at all
        res = run_cli("review", "approve", str(review["id"]), "--as", who, "--project", str(demo))
        assert res.returncode == 2, res.stdout + res.stderr
        assert "Traceback" not in res.stderr and "Reviewers: fin.ana" in res.stderr
    assert "'someone' is not a user in policies.users" in res.stderr
    res = run_cli("review", "reject", str(review["id"]), "--as", "mgr.emea", "--project",
                  str(demo))
    assert res.returncode == 2 and "mgr.emea (role regional_manager) is not a reviewer" in res.stderr
    assert _state(demo) == before  # still pending, nothing published


def test_a_reviewer_approves_with_a_comment(demo: Path) -> None:
    review = _pending(demo)
    tool = review["body"]["tools"][0]["name"]  # type: ignore[index]
    res = run_cli("review", "approve", str(review["id"]), "--as", "fin.ana", "--comment",
                  "Finance <agreed> on 2026-08-19", "--project", str(demo))
    assert res.returncode == 0, res.stderr
    listed = json.loads(run_cli("review", "list", "--json", "--project", str(demo)).stdout)
    assert listed[0]["decided_by"] == "fin.ana"
    assert listed[0]["comment"] == "Finance <agreed> on 2026-08-19"
    registry = open_registry(load_project(demo))
    try:
        assert registry.current()[tool].version == "2.0.0"
    finally:
        registry.close()


def test_decide_asks_the_same_question(demo: Path) -> None:
    """The library function the console calls refuses exactly as the CLI does."""
    review = _pending(demo)
    with pytest.raises(NotPermittedError, match="not a reviewer"):
        decide(load_project(demo), int(review["id"]), False, "sup.sam")  # type: ignore[call-overload]
    decide(load_project(demo), int(review["id"]), False, "fin.ana", "  ")  # type: ignore[call-overload]
    (decided,) = _state(demo)[0]  # type: ignore[misc]
    assert decided["status"] == "rejected" and decided["comment"] is None  # blank: no comment


def test_the_second_warehouse_has_its_own_reviewer(second_dir: Path, tmp_path: Path) -> None:
    p = copy_project(second_dir, tmp_path / "p")
    build(load_project(p))
    text = (p / "tether.yaml").read_text()
    old = "predicate: \"claims.claim_state IN ('SUBMITTED', 'IN_REVIEW', 'APPEALED')\""
    assert text.count(old) == 2  # the glossary term and the metric
    text = text.replace(old, "predicate: \"claims.claim_state IN ('SUBMITTED', 'IN_REVIEW')\"")
    prose = "SUBMITTED, IN_REVIEW or APPEALED (an appealed claim is open again)."
    assert prose in text
    (p / "tether.yaml").write_text(text.replace(
        prose, "SUBMITTED or IN_REVIEW (an appealed claim no longer counts)."))
    assert check(load_project(p)).exit_code == 11
    review = _pending(p)
    res = run_cli("review", "approve", str(review["id"]), "--as", "lead.harbor", "--project",
                  str(p))
    assert res.returncode == 2 and "Reviewers: aud.ines" in res.stderr
    res = run_cli("review", "approve", str(review["id"]), "--as", "aud.ines", "--comment", "ok",
                  "--project", str(p))
    assert res.returncode == 0, res.stderr
    (decided,) = _state(p)[0]  # type: ignore[misc]
    assert (decided["status"], decided["decided_by"], decided["comment"]) == (
        "approved", "aud.ines", "ok")


def test_an_older_registry_gains_the_comment_column_and_keeps_its_rows(tmp_path: Path) -> None:
    """A registry written before comments existed (schema version 1) opens, keeps every review
    and takes a comment."""
    db = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE tether_meta (key VARCHAR(64) PRIMARY KEY, value TEXT "
                          "NOT NULL)"))
        c.execute(sa.text("INSERT INTO tether_meta VALUES ('schema_version', '1')"))
        c.execute(sa.text(
            "CREATE TABLE reviews (id INTEGER PRIMARY KEY, status VARCHAR(20) NOT NULL, "
            "route VARCHAR(20) NOT NULL, rule VARCHAR(200), decided_by VARCHAR(200), "
            "created_at VARCHAR(40) NOT NULL, decided_at VARCHAR(40), body TEXT NOT NULL)"))
        c.execute(sa.text("INSERT INTO reviews VALUES (1, 'approved', 'human', NULL, 'ana', "
                          "'2026-01-01T00:00:00+00:00', '2026-01-02T00:00:00+00:00', "
                          "'{\"tools\": []}')"))
    engine.dispose()
    registry = Registry(f"sqlite:///{db}", tmp_path)
    try:
        (old,) = registry.reviews()
        assert old["decided_by"] == "ana" and old["comment"] is None
        at = dt.datetime(2026, 1, 3, tzinfo=dt.UTC)
        rid = registry.add_review("human", "pending", {"tools": []}, at)
        registry.decide_review(rid, "rejected", "ana", at, comment="no")
        assert registry.review(rid)["comment"] == "no"  # type: ignore[index]
    finally:
        registry.close()
    again = Registry(f"sqlite:///{db}", tmp_path)  # opening twice upgrades once
    assert len(again.reviews()) == 2
    again.close()
