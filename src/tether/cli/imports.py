"""`tether import dbt|openlineage` and `tether explain KEY`: import layers and where a value
came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli.options import JsonOpt, ProjectOpt
from tether.cli.output import out, print_json
from tether.config import Project, load_project
from tether.errors import ConfigError
from tether.layers.model import layer_path

SHOWN = 20
"""Lines of "not imported" printed for people (the layer's report and --json hold more)."""

import_app = typer.Typer(help="Read meaning from where it already lives (a dbt project, "
                         "OpenLineage events) into an import layer under tether.yaml.",
                         no_args_is_help=True)


@import_app.command("dbt")
def import_dbt(
    path: Path = typer.Argument(..., help="The dbt project directory (or its "
                                "target/manifest.json)."),
    new_products: bool = typer.Option(
        False, "--new-products", help="Make a product of each model no product of tether.yaml "
        "reads (by default such models are reported and not served: a new product has none "
        "of tether.yaml's row filters or masks, and tether check would publish its tool)."),
    project: Path = ProjectOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Import a dbt project (target/manifest.json, catalog.json when present, else its
    schema.yml files) into .tether/imports/dbt.json; tether.yaml overrides it key by key.
    Facts merge into the products tether.yaml declares; other models are reported unless
    --new-products. Reports declared values never seen and seen values never declared. Exit 2
    on bad input (the previous layer is kept)."""
    from tether.imports.dbt import read_dbt
    from tether.profiling.layers import write_import

    proj = load_project(project)
    layer = read_dbt(proj, path, new_products=new_products)
    _, report = write_import(proj, layer)
    if as_json:
        print_json({"layer": str(layer_path(proj.root, "dbt").relative_to(proj.root)),
                    "inputs": [i.model_dump() for i in layer.inputs]} | report)
        return
    _dbt_summary(proj, report, layer.inputs[0].path if layer.inputs else str(path))


@import_app.command("openlineage")
def import_openlineage(
    source: str = typer.Argument(..., help="A file of OpenLineage run events (JSON lines), or "
                                 "- for stdin."),
    project: Path = ProjectOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Fold OpenLineage run events into .tether/imports/openlineage.json: job inputs and
    outputs become lineage edges, schema facets are fingerprinted by tether check. Exit 2 on
    an invalid event (nothing is imported; the previous layer is kept)."""
    import sys

    from tether.imports.openlineage import KIND
    from tether.layers.model import MAX_IMPORT_BYTES
    from tether.profiling.layers import fold_openlineage
    from tether.textfiles import decode_text, over_cap, read_text

    proj = load_project(project)
    what = "the OpenLineage events"
    if source == "-":
        data = sys.stdin.buffer.read(MAX_IMPORT_BYTES + 1)  # never more than the cap in memory
        if len(data) > MAX_IMPORT_BYTES:
            raise over_cap(len(data), MAX_IMPORT_BYTES, what + " on stdin", "-",
                           hint="Split them into several imports.")
        text, shown = decode_text(data, Path("-"), what, name="-"), "-"
    else:
        path = Path(source).resolve()
        text = read_text(path, what, name=source, max_bytes=MAX_IMPORT_BYTES)
        try:
            shown = str(path.relative_to(proj.root))
        except ValueError:
            shown = str(path)
    layer, _ = fold_openlineage(proj.root, text, shown)  # under the layer's lock, as a POST
    summary = {"layer": str(layer_path(proj.root, KIND).relative_to(proj.root)),
               "jobs": len(layer.jobs), "datasets": sorted(layer.datasets),
               "edges": layer.config.get("lineage", [])}
    if as_json:
        print_json(summary)
        return
    out.print(f"folded OpenLineage events from {escape(shown)} into {summary['layer']}: "
              f"{summary['jobs']} jobs, {len(summary['edges'])} lineage edges, "
              f"{len(summary['datasets'])} dataset schemas")
    for e in summary["edges"][:SHOWN]:
        out.print(f"  {escape(e['from'])} -> {escape(e['to'])} ({escape(e['via'])})")
    if len(summary["edges"]) > SHOWN:
        out.print(f"  ... and {len(summary['edges']) - SHOWN:,} more (--json lists them all)")
    left_out = layer.report.get("lineage_left_out") or 0
    if left_out:
        out.print(f"  {left_out:,} edges lead to no product and were left out (they are kept "
                  "in the jobs and come back when a product is built from them)")


def _dbt_summary(proj: Project, report: dict[str, Any], source: str) -> None:
    out.print(f"imported {report['models']} dbt models from {escape(source)} into "
              f"{layer_path(proj.root, 'dbt').relative_to(proj.root)}: products "
              f"{escape(', '.join(report['products']) or '(none)')}; metrics "
              f"{escape(', '.join(report['metrics']) or '(none)')}")
    for name in report.get("new_products", []):
        out.print(f"  new product (--new-products): {escape(name)}: none of tether.yaml's row "
                  "filters or masks name it; declare them before tether check publishes its "
                  "tool")
    skipped = report.get("skipped", []) + report.get("metrics_skipped", [])
    total = (report.get("skipped_total", len(report.get("skipped", [])))
             + report.get("metrics_skipped_total", len(report.get("metrics_skipped", []))))
    for s in skipped[:SHOWN]:
        out.print(f"  not imported: {escape(s['node'])}: {escape(s['reason'])}")
    if total > min(len(skipped), SHOWN):
        out.print(f"  ... and {total - min(len(skipped), SHOWN):,} more not imported (--json "
                  f"lists the first {len(skipped):,})")
    if report.get("lineage_left_out"):
        out.print(f"  {report['lineage_left_out']:,} lineage edges lead to no product and were "
                  "left out")
    for name in report.get("not_in_warehouse", []):
        out.print(f"  not in the warehouse (build it with dbt, then import again): {escape(name)}")
    for c in report.get("columns_not_in_relation", []):
        out.print(f"  documented but not in its relation: {escape(c)}")
    rows = report.get("declared_values", [])
    if not rows:
        return
    t = Table(show_edge=False, header_style="bold", title="declared values (accepted_values) "
              "against the data")
    for h in ("column", "declared, never seen", "seen, never declared"):
        t.add_column(h, overflow="fold")
    for r in rows:
        seen = r.get("seen_not_declared")
        t.add_row(f"{r['product']}.{r['column']}", ", ".join(r.get("declared_not_seen") or [])
                  or "-", "(more values than an enum)" if seen is None else ", ".join(seen) or "-")
    out.print(t)


def explain(
    key: str = typer.Argument(..., help="A tether.yaml key, dotted: products.trips.description."),
    project: Path = ProjectOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which layer a configuration value came from: tether.yaml (with its line), the
    glossary_dir documents (file and line), or an import layer (and the dbt node or job)."""
    proj = load_project(project)
    path = resolve_key(proj.data, key)
    if path is None:
        raise ConfigError(f"no value at {key!r} in tether.yaml or any import layer.",
                          hint="Keys are dotted as in docs/config.md, e.g. "
                          "products.trips.columns.state.description.")
    rows = [_row(proj, p, v) for p, v in _leaves(path, _at(proj.data, path))]
    if as_json:
        print_json(rows)
        return
    t = Table(show_edge=False, header_style="bold")
    for h in ("key", "value", "from"):
        t.add_column(h, overflow="fold")
    for r in rows:
        t.add_row(escape(r["key"]), escape(json.dumps(r["value"], default=str)[:120]),
                  escape(r["from"]))
    out.print(t)


def _row(proj: Project, path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    origin = proj.origin(*path)
    return {"key": ".".join(map(str, path)), "value": value,
            "layer": "default" if origin is None else (origin.kind or "tether.yaml"),
            "from": "default" if origin is None else str(origin)}


def resolve_key(data: Any, key: str) -> tuple[str | int, ...] | None:
    """A dotted key as a path; a part may hold dots itself (a STRUCT field, a term name)."""
    parts = key.split(".")
    path: list[str | int] = []
    node = data
    i = 0
    while i < len(parts):
        for j in range(len(parts), i, -1):  # the longest part that names a key
            name = ".".join(parts[i:j])
            if isinstance(node, dict) and name in node:
                path.append(name)
                node = node[name]
                i = j
                break
            if isinstance(node, list) and name.isdigit() and int(name) < len(node):
                path.append(int(name))
                node = node[int(name)]
                i = j
                break
        else:
            return None
    return tuple(path)


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


def _leaves(path: tuple[str | int, ...], value: Any) -> list[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves((*path, k), v)]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [leaf for i, v in enumerate(value) for leaf in _leaves((*path, i), v)]
    return [(path, value)]
