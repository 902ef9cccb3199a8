"""An import layer checked against the source before it is written.

A model whose relation the warehouse does not hold (not built yet) and a documented column its
relation lacks are left out and reported: declared there, they would fail every build. Each
column with declared values (``accepted_values``) is compared with the values the data holds: a
declared value never seen and a seen value never declared are both reported. The tool's enum
stays the observed values (profiling); the declared-but-unseen ones are noted by toolgen.
"""

from __future__ import annotations

import json
from typing import Any

from sqlglot import exp

from tether.config import ProductConfig, Project
from tether.errors import TetherError
from tether.layers.model import ImportLayer
from tether.sources import Source, open_source


def verify_layer(project: Project, layer: ImportLayer) -> dict[str, Any]:
    """Drop from ``layer`` what the source does not have; return what was found."""
    products: dict[str, Any] = layer.config.get("products") or {}
    checked_columns = not any(i.path.endswith("catalog.json") for i in layer.inputs)
    missing: list[str] = []
    dropped_columns: list[str] = []
    for source_name, rows in _by_source(project, products).items():
        cfg = project.config.sources[source_name]
        with open_source(source_name, cfg, project.root) as src:
            tables = {t.lower() for t in src.tables()}
            for name, table in rows:
                if table.lower() not in tables and table.replace('"', "").lower() not in tables:
                    missing.append(name)
                    continue
                if checked_columns and products[name].get("columns"):
                    dropped_columns += _drop_columns(src, table, name, products[name])
    for name in missing:
        _drop_product(layer, name)
    return {"not_in_warehouse": sorted(missing), "columns_not_in_relation": dropped_columns}


def _by_source(project: Project, products: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """Products of the layer with their relation, grouped by source."""
    out: dict[str, list[tuple[str, str]]] = {}
    for name, facts in products.items():
        table = facts.get("table") or (project.typed.get("products") or {}).get(name, {}).get(
            "table")
        if not table:
            continue
        source = (project.typed.get("products") or {}).get(name, {}).get("source") or next(
            iter(project.config.sources))
        out.setdefault(source, []).append((name, str(table)))
    return out


def _drop_columns(src: Source, table: str, name: str, facts: dict[str, Any]) -> list[str]:
    have = {c.name.lower() for c in src.describe(src.table_expr(table), name)}
    gone = [c for c in facts["columns"] if c.lower() not in have]
    for c in gone:
        del facts["columns"][c]
    return [f"{name}.{c}" for c in gone]


def _drop_product(layer: ImportLayer, name: str) -> None:
    """A product the warehouse does not hold, and what reads it (relationships, metrics and
    their terms), leave the layer."""
    config = layer.config
    config.get("products", {}).pop(name, None)
    prefix = f"{name}."
    config["relationships"] = [r for r in config.get("relationships", [])
                               if not (r["from"].startswith(prefix) or r["to"].startswith(prefix))]
    for metric, m in list(config.get("metrics", {}).items()):
        if prefix in json.dumps(m):
            del config["metrics"][metric]
            config.get("glossary", {}).pop(m.get("term"), None)
    for key in [k for k, v in config.items() if not v]:
        del config[key]


def declared_values(project: Project) -> list[dict[str, Any]]:
    """For each column with declared values: declared, observed, declared but never seen, and
    seen but never declared (over every row; None when the column holds more values than an
    enum may have)."""
    out: list[dict[str, Any]] = []
    by_source: dict[str, list[tuple[str, ProductConfig]]] = {}
    for name, p in sorted(project.config.products.items()):
        if p.table and any(f.accepted_values is not None for f in p.columns.values()):
            by_source.setdefault(project.source_name(name), []).append((name, p))
    for source, products in by_source.items():  # one connection per source
        with open_source(source, project.config.sources[source], project.root) as src:
            for name, p in products:
                out += _compare(project, src, name, p)
    return out


def _compare(project: Project, src: Source, name: str, p: ProductConfig
             ) -> list[dict[str, Any]]:
    """Declared against observed values for each column of one product."""
    out: list[dict[str, Any]] = []
    cap = project.config.profiling.enum_max_values
    assert p.table is not None
    for column, facts in sorted(p.columns.items()):
        declared = facts.accepted_values
        if declared is None:
            continue
        col = exp.column(column, quoted=True)
        q = (exp.select(col).distinct().from_(src.table_expr(p.table))
             .where(col.is_(exp.null()).not_()).limit(cap + 1))
        try:
            seen = sorted({str(r[0]) for r in src.query(q)})
        except TetherError as e:
            out.append({"product": name, "column": column, "error": e.message,
                        "declared": declared})
            continue
        enum = len(seen) <= cap  # beyond the cap the column is no enum: nothing to list
        out.append({"product": name, "column": column, "declared": declared,
                    "observed": seen if enum else None,
                    "declared_not_seen": sorted(set(declared) - set(seen)) if enum else None,
                    "seen_not_declared": sorted(set(seen) - set(declared)) if enum else None,
                    "origin": str(project.origin("products", name, "columns", column,
                                                 "accepted_values"))})
    return out
