"""A local Spark Connect server for the tests (the Spark runtime that `pyspark` ships, Java 17),
and the test warehouses copied into it: each DuckDB table written to Parquet and registered as a
Spark table in a database of the warehouse's own. Skipped where Java or pyspark is missing."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml


class LocalSpark:
    """One Spark Connect server process on a fixed port, which a test may kill and start again
    (its tables live in memory: load them again after a start)."""

    def __init__(self, home: Path, root: Path, port: int):
        self.home, self.root, self.port = home, root, port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.root / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.home / "bin" / "spark-submit"), "--class",
                 "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]",
                 "--conf", f"spark.connect.grpc.binding.port={self.port}",
                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                 "--conf", "spark.sql.session.timeZone=UTC", "--conf", "spark.ui.enabled=false",
                 "--conf", f"spark.sql.warehouse.dir={self.root / 'warehouse'}",
                 "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.driver.memory=1g",
                 "--conf", f"spark.driver.extraJavaOptions=-Dderby.system.home={self.root}",
                 "spark-internal"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                env={**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                raise RuntimeError("the Spark Connect server exited:\n"
                                   + (self.root / "server.log").read_text()[-3000:])
            time.sleep(0.2)
        raise RuntimeError("the Spark Connect server did not start within 120 s")

    def kill(self) -> None:
        """The driver killed outright (SIGKILL), as a crash or an OOM kill would."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None


@contextlib.contextmanager
def local_spark() -> Iterator[LocalSpark]:
    try:
        import pyspark
    except ImportError:
        pytest.skip("pyspark is not installed (pip install 'pyspark[connect]')")
    if shutil.which("java") is None:
        pytest.skip("Java is not on this machine (Debian: openjdk-17-jre-headless)")
    root = Path(tempfile.mkdtemp(prefix="tether-spark-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = LocalSpark(Path(pyspark.__file__).parent, root, port)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def spark_connect_server() -> Iterator[int]:
    with local_spark() as server:
        yield server.port


def load_into_spark(port: int, project_dir: Path, database: str, dst: Path) -> Path:
    """``project_dir``'s DuckDB warehouse as Spark tables in ``database``, and a copy of its
    tether.yaml (in ``dst``) whose source is that Spark database."""
    import duckdb
    from pyspark.sql.connect.session import SparkSession

    files = dst / "parquet"
    files.mkdir(parents=True)
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").create()
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    with duckdb.connect(str(project_dir / "warehouse.duckdb"), read_only=True) as con:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()]
        for t in tables:
            (files / t).mkdir()
            con.execute(f"COPY {t} TO '{files / t / 'part.parquet'}' (FORMAT parquet)")
            spark.sql(f"CREATE TABLE {database}.{t} USING parquet LOCATION '{files / t}'")
    spark.stop()  # released now: the client's exit would otherwise wait on a stopped server
    config = yaml.safe_load((project_dir / "tether.yaml").read_text())
    for name in config["sources"]:  # the warehouse's one DuckDB file, whatever its name
        config["sources"][name] = {"url": f"spark://127.0.0.1:{port}", "schema": database}
    for product in config.get("products", {}).values():  # Spark is read here: no writer
        product.pop("actions", None)
    (dst / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return dst
