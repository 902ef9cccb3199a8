"""A governed metric's default period is the latest quarter that holds rows the caller may read,
said so in the answer, when this quarter holds none: a zero for "this quarter" on data that
stopped earlier answers nothing. A period given is kept as given; a spell still open keeps this
quarter; a filtered caller's latest quarter is found among their own rows only. A ferry line's
tickets, in no test warehouse's domain; DuckDB and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import call_tools, duck_tables, pg_tables
from tether.config import load_project
from tether.drift.publish import build

# tickets stop on 2025-11-20 (the south pier's on 2025-05-30); the clock reads 2026-12-06
TICKETS = [(i, ["north", "south"][i % 2], 2 + i % 9,
            f"2025-{1 + (i % 11) if i % 2 == 0 else 1 + (i % 5):02d}-{1 + i % 20:02d}")
           for i in range(1, 301)]
# berths leased over spells; one lease is still open
LEASES = [(1, "2024-03-01", "2025-02-01"), (2, "2024-06-01", None)]


def _config(url: str, schema: str | None) -> dict[str, Any]:
    return {
        "clock": "2026-12-06T00:00:00Z",
        "sources": {"main": {"url": url, **({"schema": schema} if schema else {})}},
        "products": {
            "tickets": {"table": "tickets", "primary_key": ["ticket_id"],
                        "time_columns": {"sold_on": "UTC"}, "metric_time": "sold_on"},
            "leases": {"table": "leases", "primary_key": ["lease_id"],
                       "time_columns": {"starts_on": "UTC", "ends_on": "UTC"},
                       "metric_time": "starts_on"}},
        "metrics": {
            "fares": {"description": "Fares sold, by pier.", "measure": "sum(tickets.fare)",
                      "time": "tickets.sold_on", "window": "period", "calendar": "calendar", "unit": "EUR",
                      "dimensions": ["tickets.pier"],
                      "tool": {"name": "fares_by_pier_and_quarter"}},
            "leased": {"description": "Berths leased at any time in the period.",
                       "measure": "count(distinct leases.lease_id)", "time": "leases.starts_on",
                       "time_end": "leases.ends_on", "window": "period", "calendar": "calendar",
                       "unit": "berths",
                       "tool": {"name": "berths_leased_by_quarter"}}},
        "calendars": {"calendar": {"start_month": 1}},
        "policies": {
            "roles": {"office": {"tools": ["*"]},
                      "pier": {"tools": ["*"], "row_filters": {
                          "tickets": "pier = {{ user.pier }}"}}},
            "users": {"o.ffice": {"role": "office"},
                      "s.outh": {"role": "pier", "pier": "south"}}},
    }


TABLES = {"tickets": ("ticket_id integer, pier text, fare integer, sold_on date", TICKETS),
          "leases": ("lease_id integer, starts_on date, ends_on date", LEASES)}


@pytest.fixture(params=["duckdb", "postgres"])
def ferry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "ferry"
    folder.mkdir()
    if request.param == "duckdb":
        url = duck_tables(tmp_path / "ferry.duckdb", TABLES)
        (folder / "tether.yaml").write_text(yaml.safe_dump(_config(url, None)))
        build(load_project(folder))
        yield folder
        return
    url = request.getfixturevalue("pg_url")
    with pg_tables(url, "ferry", TABLES) as schema:
        (folder / "tether.yaml").write_text(yaml.safe_dump(_config(url, schema)))
        build(load_project(folder))
        yield folder


def _gold(where: str) -> int:
    return sum(fare for _, pier, fare, day in TICKETS if eval(where, {}, {"pier": pier,
                                                                           "day": day}))


def test_the_default_period_is_the_latest_quarter_with_rows(ferry: Path) -> None:
    project = load_project(ferry)
    listed = {t.name: t for t in _tools(project)}
    assert "latest quarter with rows" in str(
        listed["fares_by_pier_and_quarter"].input_schema["properties"]["period"]["description"])
    office, given, south, leased = (
        call_tools(project, "o.ffice", [("fares_by_pier_and_quarter", {}),
                                        ("fares_by_pier_and_quarter", {"period": "this_quarter"})])
        + call_tools(project, "s.outh", [("fares_by_pier_and_quarter", {})])
        + call_tools(project, "o.ffice", [("berths_leased_by_quarter", {})]))
    for got in (office, given, south, leased):
        assert not got.is_error, got.content[0].text
    window = office.structured_content["window"]
    assert window["label"].endswith("2025-Q4") and window["start"] == "2025-10-01"
    assert window["resolved_from"].startswith("default: the latest quarter with rows")
    assert "2026-Q4, has none" in window["resolved_from"]  # the quarter it stands in for
    assert "latest quarter with rows you may see" in office.content[0].text
    fares = {r["pier"]: r["fares"] for r in office.structured_content["rows"]}
    assert fares == {"north": _gold("pier == 'north' and day >= '2025-10-01'")}
    # asked for this quarter by name: this quarter, empty, as asked
    assert given.structured_content["window"]["label"].endswith("2026-Q4")
    assert not given.structured_content["rows"]
    # the south pier's own latest quarter (their rows stop in May), never another pier's
    south_window = south.structured_content["window"]
    assert south_window["label"].endswith("2025-Q2")
    assert {r["pier"]: r["fares"] for r in south.structured_content["rows"]} == {
        "south": _gold("pier == 'south' and '2025-04-01' <= day < '2025-07-01'")}
    # a lease still open holds this quarter: nothing moves
    assert leased.structured_content["window"]["label"].endswith("2026-Q4")
    assert leased.structured_content["rows"][0]["leased"] == 1


def _tools(project: Any) -> list[Any]:
    import anyio
    from mcp import Client

    from tether.serve.server import TetherServer

    server = TetherServer(project, stdio_user="o.ffice")

    async def go() -> list[Any]:
        async with Client(server.server) as c:
            return list((await c.list_tools()).tools)

    try:
        return anyio.run(go)
    finally:
        server.close()


def test_one_calendar_for_the_project_words(tmp_path: Path) -> None:
    """A project with a fiscal calendar: `last_quarter` is the same fiscal quarter in a listing
    and in a fiscal metric, said once in the server's instructions; "last calendar quarter" is
    the calendar one in either; a serve.calendar naming no calendar fails closed."""
    import anyio
    from mcp import Client

    from tether.errors import ConfigError
    from tether.serve.server import TetherServer

    cfg = _config(duck_tables(tmp_path / "ferry.duckdb", TABLES), None)
    cfg["clock"] = "2025-12-06T00:00:00Z"
    cfg["calendars"] = {"fiscal": {"start_month": 4, "year_named_by": "end"}}
    cfg["metrics"]["fares"]["calendar"] = "fiscal"
    cfg["metrics"]["leased"]["calendar"] = "fiscal"
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "tether.yaml").write_text(yaml.safe_dump(cfg))
    build(load_project(folder))
    project = load_project(folder)
    server = TetherServer(project, stdio_user="o.ffice")

    async def go() -> tuple[str, list[Any], list[Any]]:
        async with Client(server.server) as c:
            said = c.instructions or ""
            period = {}
            for tool in ("tickets_by_attributes", "fares_by_pier_and_quarter"):
                period[tool] = [await c.call_tool(tool, {"period": p}) for p in (
                    "last_quarter", "last calendar quarter")]
            return said, period["tickets_by_attributes"], period["fares_by_pier_and_quarter"]
    try:
        said, listing, metric = anyio.run(go)
    finally:
        server.close()
    for got in listing + metric:
        assert not got.is_error, got.content[0].text
    # the fiscal year starts in April: on 2025-12-06 the last fiscal quarter is July..September
    for got in (listing[0], metric[0]):
        assert got.structured_content["window"]["start"] == "2025-07-01"
        assert got.structured_content["window"]["calendar"] == "fiscal"
    for got in (listing[1], metric[1]):
        assert got.structured_content["window"]["start"] == "2025-07-01"
        assert got.structured_content["window"]["calendar"] == "calendar"
    assert listing[0].structured_content["total_rows"] == sum(
        1 for *_, day in TICKETS if "2025-07-01" <= day < "2025-10-01")
    assert "mean fiscal quarters and years in every tool" in said and "FY2026 = 2025-04-01" in said

    cfg["serve"] = {"calendar": "fiscall"}
    (folder / "tether.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"serve\.calendar names unknown calendar 'fiscall'"):
        load_project(folder)
