"""A PostgreSQL server of the test's own, which it may stop and start (the shared one on 5432
serves the other tests running beside it). Made with the machine's initdb and pg_ctl, run as
the `postgres` account when the tests run as root; skipped where neither is possible."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


class PrivatePostgres:
    def __init__(self, root: Path, port: int, as_user: list[str]):
        self.root, self.port, self.as_user = root, port, as_user
        self.data = root / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _ctl(self, *args: str) -> None:
        ctl = _bin("pg_ctl")
        assert ctl is not None
        subprocess.run([*self.as_user, ctl, "-D", str(self.data), "-l",
                        str(self.root / "log"), *args], check=True, capture_output=True,
                       timeout=60)

    def start(self) -> None:
        self._ctl("-w", "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1",
                  "start")

    def stop(self) -> None:
        self._ctl("-w", "-m", "fast", "stop")


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    initdb = _bin("initdb")
    if initdb is None or _bin("pg_ctl") is None:
        pytest.skip("initdb and pg_ctl are not on this machine (Debian: postgresql)")
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as postgres
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root with no postgres account to run a server as")
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="tether-pg-"))
    if as_user:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    pg = PrivatePostgres(root, port, as_user)
    subprocess.run([*as_user, initdb, "-D", str(pg.data), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8"], check=True, capture_output=True, timeout=120)
    pg.start()
    try:
        yield pg
    finally:
        with contextlib.suppress(Exception):
            pg.stop()
        shutil.rmtree(root, ignore_errors=True)
