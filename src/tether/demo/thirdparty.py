"""Third-party MCP servers for the demo, tests, benchmarks and the proof, each in its own
cached venv, reading copies of the demo warehouse.

mcp-server-sqlite 2025.4.25 crashes under mcp 2.x, so it gets `mcp<2`; mcp-server-motherduck
1.1.0 ships DuckDB 1.5, which cannot open DuckDB 2.0 files, so it reads a copy written in 1.5's
storage format. Venvs live under $TETHER_TEST_CACHE (default ~/.cache/tether-tests) and are built
once (about 30 s each, from PyPI); the data copies are made per use.

    python -m tether.demo.thirdparty sqlite|motherduck PROJECT_DIR
prints the stdio command of that server on a copy of the project's demo warehouse.
"""

from __future__ import annotations

import datetime as dt
import decimal
import fcntl
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb

from tether.sources.duckdb import READ_ONLY_CONFIG

SERVERS: dict[str, tuple[list[str], str]] = {
    "sqlite": (["mcp-server-sqlite==2025.4.25", "mcp<2"], "mcp-server-sqlite"),
    "motherduck": (["mcp-server-motherduck==1.1.0"], "mcp-server-motherduck"),
}
CACHE = Path(os.environ.get("TETHER_TEST_CACHE", Path.home() / ".cache" / "tether-tests"))


def server_command(name: str) -> Path:
    """The console script of a third-party server, installing its venv on first use."""
    reqs, script = SERVERS[name]
    key = hashlib.sha256(" ".join(reqs).encode()).hexdigest()[:12]
    venv = CACHE / f"{name}-{key}"
    exe = venv / "bin" / script
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".ok").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True,
                           capture_output=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                            "--disable-pip-version-check", *reqs], check=True, capture_output=True)
            (venv / ".ok").touch()
    return exe


def _plain(v: object) -> object:
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, dict | list):
        return json.dumps(v, default=str)
    return v


def sqlite_copy(warehouse: Path, dest: Path) -> Path:
    """The demo's tables in a SQLite file (values as SQLite stores them: text times, JSON)."""
    src = duckdb.connect(str(warehouse), read_only=True, config=dict(READ_ONLY_CONFIG))
    db = sqlite3.connect(dest)
    try:
        for (table,) in src.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            cur = src.execute(f'SELECT * FROM "{table}"')
            cols = [d[0] for d in cur.description]
            db.execute(f'CREATE TABLE "{table}" ({", ".join(chr(34) + c + chr(34) for c in cols)})')
            marks = ", ".join("?" for _ in cols)
            while batch := cur.fetchmany(5000):
                db.executemany(f'INSERT INTO "{table}" VALUES ({marks})',
                               [tuple(_plain(v) for v in row) for row in batch])
        db.commit()
    finally:
        db.close()
        src.close()
    return dest


def duckdb15_copy(warehouse: Path, dest: Path) -> Path:
    """The demo warehouse rewritten in DuckDB 1.5's storage format, for servers pinned to 1.5."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{warehouse}' AS w (READ_ONLY)")
        con.execute(f"ATTACH '{dest}' AS o (STORAGE_VERSION 'v1.5.0')")
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name "
                                    "= 'w' ORDER BY 1").fetchall():
            con.execute(f'CREATE TABLE o."{table}" AS SELECT * FROM w."{table}"')
        con.execute("DETACH o")
    finally:
        con.close()
    return dest


def stdio_command(name: str, project_dir: Path) -> str:
    """The command line that serves a copy of the demo warehouse in ``project_dir``."""
    warehouse = project_dir / "warehouse.duckdb"
    if not warehouse.is_file():
        raise SystemExit(f"{warehouse} does not exist: build the demo with `tether demo init`.")
    out = project_dir / "thirdparty"
    out.mkdir(exist_ok=True)
    exe = server_command(name)
    if name == "sqlite":
        db = out / "demo.sqlite"
        db.unlink(missing_ok=True)
        return f"{exe} --db-path {sqlite_copy(warehouse, db)}"
    db = out / "demo15.duckdb"
    db.unlink(missing_ok=True)
    return f"{exe} --db-path {duckdb15_copy(warehouse, db)}"  # read-only by default


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in SERVERS:
        raise SystemExit(f"usage: python -m tether.demo.thirdparty {'|'.join(SERVERS)} PROJECT_DIR")
    print(stdio_command(sys.argv[1], Path(sys.argv[2]).resolve()))
