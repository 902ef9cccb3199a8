"""A call grows a real server by at most serve.max_result_bytes plus a fixed overhead, on DuckDB
and PostgreSQL, even when its statement builds one value of 200 MB.

The server runs in its own process (`tether serve`, stdio, the official SDK client); its memory
is read from /proc/PID/status before the call and after it (once the allocator has handed back
what the statement dropped, which takes about a second). On PostgreSQL the value is built in
the database server, so the peak of our process is checked too: the engine measures the value
and sends none of it. On DuckDB the engine runs inside the server: a value built by a scalar
function lives in the engine while the statement runs (DuckDB's memory_limit does not cover
it), and leaves with it; an aggregate that builds one is stopped by serve.duckdb_memory_limit.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import copy_project, with_serve

TETHER = str(Path(sys.executable).parent / "tether")
MIB = 1 << 20
OVERHEAD = 16 * MIB
"""The fixed overhead a call may add beyond serve.max_result_bytes (measured: 0-4 MiB)."""
CAP = 1_048_576  # serve.max_result_bytes, the default the demo keeps
USER = "mgr.emea"

BIG = {  # statements that build one value of 200 MB, and a small one of the same shape
    "duckdb": [("SELECT format('{:>200000000}', 'x') AS v", "v"),
               ("SELECT string_agg(format('{:>100}', 'x'), '') AS v FROM range(2000000)", "v")],
    "postgres": [("SELECT format('%200000000s', 'x') AS v", "v"),
                 ("SELECT string_agg(format('%100s', 'x'), '') AS v "
                  "FROM generate_series(1, 2000000)", "v")],
}
SMALL = {"duckdb": "SELECT format('{:>10}', 'y') AS w, string_agg('z', '') AS z FROM range(3)",
         "postgres": "SELECT format('%10s', 'y') AS w, string_agg('z', '') AS z "
                     "FROM generate_series(1, 3)"}


def _child(name: str) -> int:
    """The PID of this process's child whose command line holds ``name`` (the server)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and name.encode() in cmd:
            return int(pid)
    raise AssertionError(f"no child process running {name}")


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(key)


async def _settled(pid: int, ceiling: int, seconds: float = 5.0) -> int:
    """VmRSS once it is at most ``ceiling``, or after ``seconds`` (what it is then)."""
    deadline = time.monotonic() + seconds
    rss = _status(pid, "VmRSS")
    while rss > ceiling and time.monotonic() < deadline:
        await anyio.sleep(0.1)
        rss = _status(pid, "VmRSS")
    return rss


def _measure(project: Path, engine: str) -> list[dict[str, Any]]:
    params = StdioServerParameters(
        command=TETHER, args=["serve", "--project", str(project), "--mode", "generic",
                              "--as-user", USER], env={"PATH": os.environ["PATH"]})

    async def go() -> list[dict[str, Any]]:
        out = []
        async with Client(params) as c:
            pid = _child("serve")
            for _ in range(3):  # every path of a call warm: the statement cache, the engine
                r = await c.call_tool("run_sql", {"sql": SMALL[engine]})
                assert not r.is_error, r.content
            for sql, column in BIG[engine]:
                before = _status(pid, "VmRSS")
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again here
                r = await c.call_tool("run_sql", {"sql": sql})
                peak = _status(pid, "VmHWM")
                after = await _settled(pid, before + CAP + OVERHEAD)
                out.append({"sql": sql, "column": column, "error": r.is_error,
                            "text": r.content[0].text, "growth": after - before,
                            "peak": peak - before})
        return out

    return anyio.run(go)


def _check(got: list[dict[str, Any]], engine: str) -> None:
    for g in got:
        said = f"{g['sql']}: grew {g['growth'] / MIB:.1f} MiB, peak {g['peak'] / MIB:.1f} MiB"
        assert g["error"], said  # no page can hold the value
        assert g["growth"] <= CAP + OVERHEAD, said
        if engine == "postgres":  # built in the database server: nothing of it reaches us
            assert g["peak"] <= CAP + OVERHEAD, said
        if "serve.duckdb_memory_limit" not in g["text"]:  # else the aggregate was stopped
            assert f"{g['column']!r}" in g["text"] and "serve.max_result_bytes" in g["text"]
            assert f"{CAP:,}" in g["text"], g["text"]


def test_a_huge_value_does_not_grow_a_duckdb_server(demo_dir: Path, tmp_path: Path) -> None:
    _check(_measure(copy_project(demo_dir, tmp_path / "p"), "duckdb"), "duckdb")


def test_a_huge_value_does_not_grow_a_postgres_server(pg_demo_dir: Path, tmp_path: Path
                                                      ) -> None:
    _check(_measure(copy_project(pg_demo_dir, tmp_path / "p"), "postgres"), "postgres")


def test_the_limits_hold_for_serving_connections_only(demo_dir: Path, tmp_path: Path) -> None:
    """A server's DuckDB engine has serve.duckdb_memory_limit; a profiling connection to the
    same file, open in the same process at the same time, keeps the engine's default."""
    from tether.config import load_project
    from tether.sources import open_product_source, open_source

    d = copy_project(demo_dir, tmp_path / "p")
    (d / "tether.yaml").write_text(with_serve((d / "tether.yaml").read_text(),
                                              duckdb_memory_limit="300MB", duckdb_threads=1))
    project = load_project(d)
    name, cfg = next(iter(project.config.sources.items()))
    setting = "SELECT current_setting('memory_limit'), current_setting('threads')"
    with open_source(name, cfg, project.root, project.config.serve) as served, \
            open_product_source(project, "orders") as profiling:
        assert served.run(setting) == [("286.1 MiB", 1)]
        assert profiling.run(setting) != served.run(setting)
        assert served.run("SELECT count(*) FROM orders") == profiling.run(
            "SELECT count(*) FROM orders")
        with pytest.raises(Exception, match="configuration has been locked"):
            served.run("SET memory_limit = '10GB'")
