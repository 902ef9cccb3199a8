"""The statement timeout: one watchdog thread interrupts a DuckDB statement (and its fetching)
running past its deadline; statements that finish in time are never interrupted, and many
guards at once each fire at their own deadline."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import duckdb
import pytest

from tether.errors import SourceError
from tether.sources.duckdb import DuckDBSource
from tether.sources.watchdog import Watchdog

SLOW = "SELECT count(*) FROM range(100000000000) a WHERE a.range % 7 = 3"


@pytest.fixture()
def source(tmp_path: Path) -> DuckDBSource:
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(1000)")
    con.close()
    return DuckDBSource("main", db)


@pytest.mark.parametrize("how", ["run", "fetch"])
def test_a_statement_past_its_timeout_is_cancelled(source: DuckDBSource, how: str) -> None:
    start = time.monotonic()
    with pytest.raises(SourceError, match=r"ran longer than 0\.5s"):
        if how == "run":
            source.run(SLOW, None, 0.5)
        else:
            source.fetch(SLOW, None, 0.5, 10, 1 << 20)
    assert time.monotonic() - start < 5
    # and the source still answers the next statement, in time, whole
    assert source.run("SELECT count(*) FROM t", None, 0.5) == [(1000,)]
    assert len(source.fetch("SELECT x FROM t", None, 0.5, 2000, 1 << 20).rows) == 1000


def test_many_guards_each_fire_at_their_own_deadline() -> None:
    dog = Watchdog()
    fired: dict[int, float] = {}
    start = time.monotonic()
    released = threading.Event()

    def hold(i: int, timeout: float, work: float) -> None:
        with dog.guard(timeout, lambda: fired.setdefault(i, time.monotonic() - start)):
            released.wait(work)

    threads = [threading.Thread(target=hold, args=(i, t, w)) for i, (t, w) in enumerate(
        [(0.3, 2.0), (0.1, 2.0), (5.0, 0.05), (0.6, 2.0), (5.0, 0.0)])]
    for t in threads:
        t.start()
    time.sleep(1.0)
    released.set()
    for t in threads:
        t.join()
    assert set(fired) == {0, 1, 3}  # the ones still running at their deadline, no other
    assert fired[1] < fired[0] < fired[3]
    assert 0.1 <= fired[1] < 0.5 and 0.6 <= fired[3] < 1.0
