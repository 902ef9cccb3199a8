"""Distractor products: N generated tables added to a built project's DuckDB warehouse, each a
data product in its tether.yaml, so discovery is measured over a catalog where the right product
is one of hundreds (`python -m proof.run --distractors 200`).

They are made to compete, not to be found by accident: names from a fixed list of business
nouns and qualifiers (never one of the project's own product names), the same kinds of columns a
real product has (an id key, a status with a few values, a sales region, an amount in USD, a
segment, a created time), some of the same words (status, region, amount, customer), and rows
drawn by a seeded generator. No gold answer ever needs them; a question answered from one of them
is wrong. The tables are written through DuckDB itself; nothing is downloaded.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import yaml

NOUNS = ("invoice", "shipment", "campaign", "employee", "vendor", "asset", "lead", "refund",
         "payment", "survey", "contract", "inventory", "return", "visit", "license", "partner",
         "budget", "expense", "quota", "renewal", "forecast", "incident", "release", "territory",
         "warehouse", "carrier", "coupon", "promotion", "webinar", "trial")
QUALIFIERS = ("events", "daily", "history", "snapshot", "lines", "targets", "summary", "log",
              "status_changes", "by_region", "monthly", "reviews")
STATUSES = ("OPEN", "CLOSED", "PENDING", "ACTIVE", "EXPIRED", "APPROVED", "REJECTED", "DRAFT",
            "PAID", "VOID", "ON_HOLD", "CANCELLED")
REGIONS = ("EMEA", "AMER", "APAC")
SEGMENTS = ("ENTERPRISE", "MID_MARKET", "SMB")
ROWS = 60


def names(n: int, taken: set[str], seed: int = 0) -> list[str]:
    """``n`` product names from NOUNS x QUALIFIERS, none in ``taken``, in a seeded order."""
    every = [f"{a}_{b}" for a in NOUNS for b in QUALIFIERS if f"{a}_{b}" not in taken]
    if n > len(every):
        raise ValueError(f"at most {len(every)} distractors can be named; asked for {n}")
    random.Random(seed).shuffle(every)
    return sorted(every[:n])


def add(project: Path, n: int, seed: int = 0) -> list[str]:
    """Add ``n`` distractor tables and products to the project at ``project`` (its first DuckDB
    source); returns their names."""
    import duckdb

    config_path = project / "tether.yaml"
    text = config_path.read_text()
    config = yaml.safe_load(text)
    spec = next(iter(config["sources"].values()))
    url = str(spec["url"] if isinstance(spec, dict) else spec)
    db = project / url.removeprefix("duckdb:///")
    rng = random.Random(seed)
    made = names(n, set(config["products"]), seed)
    products: dict[str, object] = {}
    start = dt.datetime(2025, 1, 1)
    con = duckdb.connect(str(db))
    try:
        for name in made:
            noun = name.split("_")[0]
            statuses = rng.sample(STATUSES, rng.randint(3, 5))
            rows = [(i + 1, rng.choice(statuses), rng.choice(REGIONS), rng.choice(SEGMENTS),
                     round(rng.uniform(5, 50_000), 2),
                     start + dt.timedelta(minutes=rng.randint(0, 600 * 24 * 60)))
                    for i in range(ROWS)]
            con.execute(f'CREATE OR REPLACE TABLE "{name}" ("{noun}_id" INTEGER, status VARCHAR, '
                        'sales_region VARCHAR, segment VARCHAR, amount_usd DOUBLE, '
                        'created_at TIMESTAMP)')
            con.executemany(f'INSERT INTO "{name}" VALUES (?, ?, ?, ?, ?, ?)', rows)
            words = name.replace("_", " ")
            products[name] = {
                "table": name,
                "description": f"One row per {words} record, with its status, sales region, "
                               "segment and amount.",
                "grain": f"one row per {words} record",
                "primary_key": [f"{noun}_id"],
                "time_columns": {"created_at": "UTC"},
                "metric_time": "created_at",
                "columns": {"amount_usd": {"unit": "USD"}},
            }
    finally:
        con.close()
    # inserted under `products:` as text: the rest of the file, comments included, is unchanged
    lines = text.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.rstrip() == "products:") + 1
    block = yaml.safe_dump(products, sort_keys=False, width=200)
    lines[at:at] = ["  " + ln + "\n" for ln in block.splitlines()] + ["\n"]
    config_path.write_text("".join(lines))
    return made
