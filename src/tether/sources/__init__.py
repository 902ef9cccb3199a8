"""Source engines: one module per engine, chosen by URL."""

from __future__ import annotations

from pathlib import Path

from tether.config import Project, ServeConfig, SourceConfig
from tether.errors import ConfigError
from tether.sources.base import Fetched, Source, kind_of

__all__ = ["Fetched", "Source", "dialect_of", "kind_of", "open_product_source", "open_source",
           "resolve_duckdb_path", "source_dialect"]


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


def open_source(name: str, cfg: SourceConfig, root: Path, serve: ServeConfig | None = None
                ) -> Source:
    """Connect to a configured source; errors name the source and say what to check. A
    server's connections pass ``serve``: the engine limits it sets hold for them (a DuckDB file
    gets an engine instance of its own, bounded in memory, threads and spilling)."""
    if cfg.kind == "openapi":
        from tether.sources.apisource import OpenAPISource

        return OpenAPISource(name, cfg, root, serve)
    assert cfg.url is not None  # a sql source has one (config_model)
    path = resolve_duckdb_path(cfg.url, root)
    if path is not None:
        from tether.sources.duckdb import DuckDBSource

        return DuckDBSource(name, path, cfg.schema_, serve)
    if cfg.url.startswith(("spark://", "sc://")):
        from tether.sources.spark import SparkSource

        return SparkSource(name, cfg.url, cfg.schema_)
    from tether.sources.sqlalchemy import SQLAlchemySource

    return SQLAlchemySource(name, cfg.url, cfg.schema_)


def open_product_source(project: Project, product: str) -> Source:
    name = project.source_name(product)
    cfg = project.config.sources.get(name)
    if cfg is None:
        raise ConfigError(f"product {product!r} names unknown source {name!r}.",
                          where=project.where("products", product, "source"))
    return open_source(name, cfg, project.root)
