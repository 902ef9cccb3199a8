"""Which SQL dialect a configured source speaks, read from its URL without connecting (a
DuckDB file, a PostgreSQL URL, ...): what the configuration needs to quote a name before any
source is opened (row filters through relationships), and what sources/ opens by."""

from __future__ import annotations

import re
from pathlib import Path

from sqlglot import exp

from tether.context.config_model import SourceConfig


def resolve_duckdb_path(url: str, root: Path) -> Path | None:
    """The file a DuckDB URL or plain path points at, or None for other engines."""
    if url.startswith("duckdb:///"):
        raw = url[len("duckdb:///"):]
    elif url.startswith("duckdb://"):
        raw = url[len("duckdb://"):]
    elif "://" not in url:
        raw = url
    else:
        return None
    p = Path(raw).expanduser()
    return p if p.is_absolute() else (root / p)


_URL_DIALECTS = {"postgresql": "postgres", "postgres": "postgres", "mysql": "mysql",
                 "mariadb": "mysql", "sqlite": "sqlite", "snowflake": "snowflake",
                 "bigquery": "bigquery", "trino": "trino", "mssql": "tsql", "spark": "spark",
                 "sc": "spark", "hive": "spark", "databricks": "databricks",
                 "clickhouse": "clickhouse", "clickhousedb": "clickhouse"}


def dialect_of(url: str) -> str:
    """The sqlglot dialect a source URL speaks, without connecting."""
    if resolve_duckdb_path(url, Path(".")) is not None:
        return "duckdb"
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
    return _URL_DIALECTS.get(scheme, scheme)


def source_dialect(cfg: SourceConfig) -> str:
    """The sqlglot dialect a configured source speaks (an API's rows are read in DuckDB)."""
    return "duckdb" if cfg.kind == "openapi" or cfg.url is None else dialect_of(cfg.url)


def sql_name(name: str, dialect: str = "postgres") -> str:
    """A name as SQL on ``dialect`` must write it: as it is where it reads right bare, else
    quoted (on PostgreSQL, the strictest, any upper-case letter, which a bare name loses)."""
    plain = r"[a-z_][a-z0-9_]*" if dialect == "postgres" else r"[A-Za-z_][A-Za-z0-9_]*"
    if re.fullmatch(plain, name):
        return name
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)
