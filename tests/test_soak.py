"""The soak, bounded for CI (`make soak` runs it for 60 s): three replicas on one registry
(PostgreSQL when it runs here, else the shared SQLite file), sixteen MCP clients over HTTP as
every user in turn, 15 s of calls; every listing's rows checked by the policy oracle. Zero tool
errors, zero violations, every replica alive, memory not grown by half (bench/soak.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from soak import passed, prepare, soak


def test_a_short_soak(tmp_path: Path) -> None:
    pg_url = os.environ.get("TETHER_TEST_PG_URL")
    d, schema = prepare(tmp_path / "soak", pg_url)
    try:
        result = soak(d, 15, 3, 16)
    finally:
        if schema and pg_url:
            import psycopg

            with psycopg.connect(pg_url, autocommit=True) as c:
                c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]
    print(result)
    assert result["calls"] > 100 and result["results_checked_by_oracle"] > 20, result
    assert passed(result), result
