"""Source engines: one module per engine, chosen by URL."""

from __future__ import annotations

from pathlib import Path

from tether.config import Project, ServeConfig, SourceConfig
from tether.context.dialects import dialect_of, resolve_duckdb_path, source_dialect
from tether.errors import ConfigError
from tether.sources.base import Fetched, Source, kind_of

__all__ = ["Fetched", "Source", "dialect_of", "kind_of", "open_product_source", "open_source",
           "resolve_duckdb_path", "source_dialect"]


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
