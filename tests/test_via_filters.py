"""Row filters through relationships: ``{via: Client}`` on a product whose rows reach a client
one hop (a booking) or two (a booking's leg) away gives exactly the rows the hand-written
subquery gives, for every user, on DuckDB and PostgreSQL (PascalCase names, quoted for each
engine); a parent the role may not read leaves none; a via that no relationship reaches, or
that names no product, is an error naming the line. A travel desk's bookings, in no test
warehouse's domain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import call_tools, duck_tables, pg_tables
from tether.config import load_project
from tether.drift.publish import build
from tether.errors import ConfigError

TABLES = {
    "Client": ('"ClientId" integer PRIMARY KEY, "AgentId" integer, "Town" text',
               [(i, 1 + i % 3, ["Oslo", "Bergen"][i % 2]) for i in range(1, 25)]),
    "Booking": ('"BookingId" integer PRIMARY KEY, "ClientId" integer, "Fare" integer',
                [(i, 1 + (i * 5) % 24, 40 + i % 60) for i in range(1, 121)]),
    "Leg": ('"LegId" integer PRIMARY KEY, "BookingId" integer, "Hops" integer',
            [(i, 1 + (i * 7) % 120, 1 + i % 3) for i in range(1, 401)]),
}
USERS = {"a.one": {"role": "agent", "AgentId": 1}, "a.two": {"role": "agent", "AgentId": 2},
         "b.oss": {"role": "boss"}, "n.obody": {"role": "outsider"}}
HAND = {  # what an admin wrote before via, per engine the same text
    "Client": '"AgentId" = {{ user.AgentId }}',
    "Booking": '"ClientId" IN (SELECT "ClientId" FROM {Client} WHERE "AgentId" = '
               '{{ user.AgentId }})',
    "Leg": '"BookingId" IN (SELECT "BookingId" FROM {Booking} WHERE "ClientId" IN (SELECT '
           '"ClientId" FROM {Client} WHERE "AgentId" = {{ user.AgentId }}))'}


def _config(url: str, schema: str | None, filters: dict[str, Any]) -> dict[str, Any]:
    return {
        "sources": {"main": {"url": url, **({"schema": schema} if schema else {})}},
        "products": {t: {"table": t, "primary_key": [f"{t}Id"]} for t in TABLES},
        "relationships": [
            {"from": "Booking.ClientId", "to": "Client.ClientId", "kind": "many_to_one"},
            {"from": "Leg.BookingId", "to": "Booking.BookingId", "kind": "many_to_one"}],
        "policies": {
            "roles": {"agent": {"tools": ["*"], "row_filters": filters},
                      "boss": {"tools": ["*"], "reviewer": True},
                      "outsider": {"tools": ["*"], "tables": {"deny": ["Client"]},
                                   "row_filters": {"Leg": {"via": "Client"}}}},
            "users": USERS},
    }


@pytest.fixture(params=["duckdb", "postgres"])
def desk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    if request.param == "duckdb":
        yield duck_tables(tmp_path / "desk.duckdb", TABLES), None
        return
    url = request.getfixturevalue("pg_url")
    with pg_tables(url, "desk", TABLES) as schema:
        yield url, schema


def _counts(folder: Path, cfg: dict[str, Any]) -> dict[tuple[str, str], Any]:
    folder.mkdir()
    (folder / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    build(load_project(folder))
    project = load_project(folder)
    out: dict[tuple[str, str], Any] = {}
    for user in USERS:
        got = call_tools(project, user, [(f"{t}_by_attributes", {"limit": 200}) for t in TABLES])
        for t, r in zip(TABLES, got, strict=True):
            out[(user, t)] = ("refused" if r.is_error else (
                r.structured_content["total_rows"],
                sorted(row[f"{t}Id"] for row in r.structured_content["rows"])))
    return out


def _gold(user: str, table: str) -> list[int]:
    agent = USERS[user].get("AgentId")
    clients = {c for c, a, _ in TABLES["Client"][1] if agent is None or a == agent}
    bookings = {b for b, c, _ in TABLES["Booking"][1] if c in clients}
    return sorted({"Client": clients, "Booking": bookings,
                   "Leg": {leg for leg, b, _ in TABLES["Leg"][1] if b in bookings}}[table])


def test_via_gives_the_rows_the_hand_written_subquery_gives(desk: tuple[str, str | None],
                                                            tmp_path: Path) -> None:
    url, schema = desk
    table = (lambda t: f'"{schema}"."{t}"') if schema else (lambda t: f'"{t}"')
    hand = {k: v.replace("{Client}", table("Client")).replace("{Booking}", table("Booking"))
            for k, v in HAND.items()}
    via = {"Client": HAND["Client"], "Booking": {"via": "Client"}, "Leg": {"via": "Client"}}
    by_hand = _counts(tmp_path / "hand", _config(url, schema, hand))
    through = _counts(tmp_path / "via", _config(url, schema, via))
    assert through == by_hand
    for user in ("a.one", "a.two", "b.oss"):
        for t in TABLES:
            total, ids = through[(user, t)]
            assert total == len(_gold(user, t)) and ids == _gold(user, t)[:200], (user, t)
    assert 0 < through[("a.one", "Leg")][0] < through[("b.oss", "Leg")][0]
    # a role denied the client reads no leg through it
    assert through[("n.obody", "Leg")] == (0, [])
    # chained through the parent's own via: the same rows
    chained = {"Client": HAND["Client"], "Booking": {"via": "Client"}, "Leg": {"via": "Booking"}}
    assert _counts(tmp_path / "chained", _config(url, schema, chained)) == by_hand


def test_a_via_nothing_reaches_is_an_error_naming_the_line(tmp_path: Path) -> None:
    cfg = _config("duckdb:///nowhere.duckdb", None, {"Client": {"via": "Leg"}})
    (tmp_path / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(ConfigError, match="no chain of relationships leads from Client to "
                                          "Leg") as e:
        load_project(tmp_path)
    assert e.value.where and e.value.where.startswith("tether.yaml:")
    cfg = _config("duckdb:///nowhere.duckdb", None, {"Leg": {"via": "Clients"}})
    (tmp_path / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(ConfigError, match="via 'Clients', which is no product"):
        load_project(tmp_path)
