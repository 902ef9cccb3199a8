"""Starter metrics along relationships: where the data says what a sale is (a quantity and a
unit price on a line that points to a dated header), `tether init` proposes a governed metric
as commented lines, never as fact; confirmed (the '# ' removed), it builds and answers what
the same SQL answers, on DuckDB and PostgreSQL (names in PascalCase, quoted as each engine
needs). A line whose price is already the line's total (an extended price) gets none. A market
stall's baskets, in no test warehouse's domain."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import call_tools, duck_tables, pg_tables, run_cli
from tether.config import load_project
from tether.drift.publish import build

BASKETS = [(i, f"2026-{1 + i % 6:02d}-{1 + i % 27:02d} 10:00:00") for i in range(1, 121)]
LINES = [(i, 1 + i % 120, 1 + i % 4, round(0.5 + (i % 9) * 1.25, 2), f"line {i}")
         for i in range(1, 601)]
# a crate's lines: the price is already the line's total, so no product is proposed
CRATES = [(i, 1 + i % 7, round(3.0 + i % 11, 2)) for i in range(1, 41)]
DDL = {"Basket": '"BasketId" integer PRIMARY KEY, "BoughtAt" timestamp',
       "BasketLine": '"BasketLineId" integer PRIMARY KEY, "BasketId" integer, '
                     '"Quantity" integer, "UnitPrice" decimal(8,2), "Note" text',
       "CrateLine": '"CrateLineId" integer PRIMARY KEY, "Quantity" integer, '
                    '"ExtendedPrice" decimal(8,2)'}
ROWS = {"Basket": BASKETS, "BasketLine": LINES, "CrateLine": CRATES}


@pytest.fixture(params=["duckdb", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    tables = {t: (ddl, ROWS[t]) for t, ddl in DDL.items()}
    if request.param == "duckdb":
        yield ["--source", duck_tables(tmp_path / "stall.duckdb", tables)]
        return
    url = request.getfixturevalue("pg_url")
    with pg_tables(url, "stall", tables) as schema:
        yield ["--source", url, "--schema", schema]


def _confirmed(text: str) -> str:
    """The starter with its proposed metrics confirmed as a person would: the '# ' of the
    metrics block removed, nothing else edited."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# metrics:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("#   "))
    return "\n".join([*lines[:start], "metrics:", *[line[2:] for line in lines[start + 1:end]],
                      *lines[end:]]) + "\n"


def test_a_sale_is_proposed_and_confirmed_it_answers(source: list[str], tmp_path: Path
                                                     ) -> None:
    r = run_cli("init", "p", *source, cwd=tmp_path, env={"TETHER_USER": "x"})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "p" / "tether.yaml").read_text()
    assert "metrics" not in yaml.safe_load(text)  # proposed, never written as fact
    block = text[text.index("# metrics:"):]
    assert "BasketLine_sold:" in block and "CrateLine" not in block
    assert re.search(r'measure: "sum\(\\"BasketLine\\".\\"Quantity\\" \* '
                     r'\\"BasketLine\\".\\"UnitPrice\\"\)"', block), block
    assert "time: Basket.BoughtAt" in block
    assert "dated by the BoughtAt of the Basket its BasketId points to" in block
    confirmed = _confirmed(text) + 'clock: "2026-07-01T00:00:00Z"\n'
    (tmp_path / "p" / "tether.yaml").write_text(confirmed)
    build(load_project(tmp_path / "p"))
    got, = _call(tmp_path / "p")
    assert not got.is_error, got.content[0].text
    value = got.structured_content["rows"][0]["BasketLine_sold"]
    assert abs(float(value) - _gold("2026-03")) < 0.01


def _call(folder: Path) -> list[Any]:
    project = load_project(folder)
    name = project.config.metrics["BasketLine_sold"].tool
    tool = name.name if name and name.name else None
    tools = [p.stem for p in (folder / "tools").glob("*.json")]
    chosen = tool or next(t for t in tools if "sold" in t.lower())
    return call_tools(project, "x", [(chosen, {"period": "2026-03-01..2026-03-31"})])


def _gold(month: str) -> float:
    bought = {b: at[:7] for b, at in BASKETS}
    return sum(q * p for _, b, q, p, _ in LINES if bought[b] == month)
