"""Import layers: facts read from where meaning already lives, kept beside tether.yaml.

Each importer writes one file, ``.tether/imports/<kind>.json``: the part of tether.yaml it
contributes (``config``), where each part came from (``origins``: a key path and the node, file
or job it was read from), the input it read (path and sha256, so ``tether check`` notices when
it moved) and what it reported. At load, the layers are merged *under* tether.yaml key by key:
a key typed in tether.yaml always wins, a layer only fills what tether.yaml leaves out, and
importing again replaces the whole layer, never a hand-typed key.

A layer keeps the lineage the project uses: an edge is kept when it leads to a product
(directly, or through further edges of any layer or of tether.yaml); an edge among datasets no
product is built from is counted in the layer's report (``lineage_left_out``) and left out, so
a manifest of 20,000 models of which three are products, or one event naming 300 inputs and 300
outputs, makes a layer of the edges above those products only. Caps (docs/imports.md):
:data:`MAX_IMPORT_BYTES` on each file read and :data:`MAX_LAYER_EDGES` on the edges kept.

Layer 0: plain data, the standard library, pydantic and :mod:`tether.errors` only.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tether.errors import ConfigError

IMPORTS_DIR = Path(".tether") / "imports"
KINDS: tuple[str, ...] = ("dbt", "openlineage", "learn")
"""Layers written by `tether import` (and `tether learn --apply`), lowest precedence last
(tether.yaml and glossary_dir documents sit above them)."""
SOURCE_OF: dict[str, str] = {"dbt": "dbt", "openlineage": "lineage", "glossary_dir": "glossary",
                             "learn": "execution_logs"}
"""The sentence-source word of each layer (the vocabulary of a tool's provenance)."""
FORMAT = 1
MAX_IMPORT_BYTES = 256 * 1024 * 1024
"""Largest file an import reads (a dbt manifest or catalog, an OpenLineage events file):
256 MiB. Large real dbt manifests are 50 to 100 MB."""
MAX_LAYER_EDGES = 100_000
"""Most lineage edges one layer keeps (after leaving out those that lead to no product): a
project loads every layer on every command and console page, and 100,000 edges take about 2 s."""

Path_ = tuple[str | int, ...]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputFile(_M):
    path: str = Field(description="The file read, as given (relative to the project when under "
                      "it).")
    sha256: str = Field(description="Its sha256 when it was read.")
    listing: bool = Field(default=False, description="The path is a dbt project whose model "
                          "folders' listing (names and sizes) was hashed: a file added there "
                          "moves it.")


class ImportLayer(_M):
    """One layer file."""

    kind: str = Field(description="dbt | openlineage.")
    format: int = Field(default=FORMAT, description="Version of this file's shape.")
    imported_at: str = Field(description="When the layer was written (UTC, ISO 8601).")
    inputs: list[InputFile] = Field(default_factory=list, description="What was read; `tether "
                                    "check` re-reads the layer's input when a hash moved.")
    options: dict[str, Any] = Field(default_factory=dict, description="How the input was read "
                                    "(the dbt project directory, ...), to read it again alike.")
    config: dict[str, Any] = Field(default_factory=dict, description="The part of tether.yaml "
                                   "this layer contributes, merged under it key by key.")
    origins: list[tuple[list[str | int], str]] = Field(
        default_factory=list, description="(key path, where it came from): a dbt node id, a "
        "file and line, a job; the deepest path that prefixes a key names its origin.")
    datasets: dict[str, Any] = Field(default_factory=dict, description="Observations that are "
                                     "not configuration: an OpenLineage dataset's newest schema.")
    jobs: dict[str, Any] = Field(default_factory=dict, description="An OpenLineage job's newest "
                                 "inputs and outputs.")
    report: dict[str, Any] = Field(default_factory=dict, description="What the import noticed.")

    def origin(self, path: Path_) -> str | None:
        """Where the value at ``path`` came from: the deepest recorded prefix."""
        best: tuple[int, str] | None = None
        for prefix, where in self.origins:
            n = len(prefix)
            if tuple(path[:n]) == tuple(prefix) and (best is None or n > best[0]):
                best = (n, where)
        return best[1] if best else None


# --- the lineage a layer keeps ------------------------------------------------------------------

Into = Mapping[str, Iterable[Iterable[str]]]
"""node -> groups of the nodes with an edge into it (one group per job or model)."""


def reaching(products: Iterable[str], *into: Into) -> set[str]:
    """Every node with a path (over the edges of every ``into``) to one of ``products``, the
    products included: the nodes whose edges a layer keeps."""
    seen = set(products)
    frontier = list(seen)
    while frontier:
        node = frontier.pop()
        for graph in into:
            for group in graph.get(node, ()):
                for frm in group:
                    if frm not in seen:
                        seen.add(frm)
                        frontier.append(frm)
    return seen


def edges_into(edges: Iterable[Any]) -> dict[str, list[list[str]]]:
    """Lineage edges (dicts with ``from`` and ``to``) as an :data:`Into`."""
    out: dict[str, list[list[str]]] = {}
    for e in edges:
        if isinstance(e, dict) and isinstance(e.get("to"), str) and isinstance(e.get("from"), str):
            out.setdefault(e["to"], []).append([e["from"]])
    return out


def lineage_elsewhere(typed: Mapping[str, Any], layers: Iterable[ImportLayer], kind: str
                      ) -> dict[str, list[list[str]]]:
    """The lineage edges of tether.yaml (``typed``) and of every layer but ``kind``'s."""
    edges = list(typed.get("lineage") or [])
    for layer in layers:
        if layer.kind != kind:
            edges += layer.config.get("lineage") or []
    return edges_into(edges)


def too_many_edges(count: int, kind: str, where: str, hint: str,
                   error: type[ConfigError] = ConfigError) -> ConfigError:
    """The error for an import that would keep ``count`` edges, over :data:`MAX_LAYER_EDGES`."""
    return error(f"this import would keep {count:,} lineage edges leading to products, "
                       f"over tether's cap of {MAX_LAYER_EDGES:,} a layer (every command and "
                       "console page loads them).", where=where,
                       hint=f"{hint} Nothing was imported; the previous {kind} layer was kept.")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def layer_path(root: Path, kind: str) -> Path:
    return root / IMPORTS_DIR / f"{kind}.json"


def read_layers(root: Path) -> list[ImportLayer]:
    """The project's import layers, highest precedence first; a damaged file is an error
    naming it (never silently ignored: it may hold the only record of an import)."""
    out = []
    for kind in KINDS:
        path = layer_path(root, kind)
        if not path.is_file():
            continue
        where = str(IMPORTS_DIR / path.name)
        try:
            layer = ImportLayer.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as e:
            first = str(e).splitlines()[0]
            hint = (f"Run `tether import {kind} ...` again to rewrite it, or delete the file "
                    "to drop what it imported." if kind != "learn" else "Delete the file (the "
                    "proposals stay in the registry; `tether learn --apply ID` writes one "
                    "again).")
            raise ConfigError(f"the {kind} import layer cannot be read ({first}).", where=where,
                              hint=hint) from None
        if kind == "learn":
            only_notes(layer, where)
        out.append(layer)
    return out


def only_notes(layer: ImportLayer, where: str) -> None:
    """What learn writes is notes on products and their columns, nothing else: a learn layer
    holding any other key (a policy, a metric, a unit, a description) is refused, never read."""
    bad = [k for k in sorted(layer.config) if k != "products"]
    products = layer.config.get("products") or {}
    if not isinstance(products, dict):
        bad.append("products (not a mapping)")
        products = {}
    for name, product in products.items():
        if not isinstance(product, dict):
            bad.append(f"products.{name} (not a mapping)")
            continue
        bad += [f"products.{name}.{k}" for k in sorted(set(product) - {"notes", "columns"})]
        columns = product.get("columns") or {}
        if not isinstance(columns, dict):
            bad.append(f"products.{name}.columns (not a mapping)")
            continue
        for col, facts in columns.items():
            extra = sorted(set(facts) - {"notes"}) if isinstance(facts, dict) else ["?"]
            bad += [f"products.{name}.columns.{col}.{k}" for k in extra]
        for notes in [product.get("notes")] + [f.get("notes") for f in columns.values()
                                               if isinstance(f, dict)]:
            if notes is not None and not (isinstance(notes, list)
                                          and all(isinstance(n, str) for n in notes)):
                bad.append(f"products.{name} notes (not a list of sentences)")
    if bad:
        raise ConfigError(f"the learn layer holds {bad[0]}, but learn writes only notes on "
                          "products and their columns.", where=where,
                          hint="Delete the file (what it held goes; the proposals stay in the "
                          "registry, and `tether learn --apply ID` writes one again).")


def write_layer(root: Path, layer: ImportLayer) -> Path:
    """Write the layer atomically (a temporary file, flushed to disk, then a rename): a reader
    sees the old layer or the new one, never half of one, also after a crash; a failed write
    leaves no temporary behind."""
    path = layer_path(root, layer.kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    data = json.dumps(layer.model_dump(mode="json"), indent=1, sort_keys=True) + "\n"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"the {layer.kind} import layer could not be written "
                          f"({e.strerror or e}).", where=str(IMPORTS_DIR / path.name),
                          hint="Check the disk's space and the folder's permissions; the "
                          "previous layer was kept.") from None
    except BaseException:  # interrupted: no temporary left behind, the old layer in place
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # and the rename itself survives a crash
    return path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # a platform that cannot open a folder: the rename is as durable as it gets
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def now_stamp(clock: dt.datetime | None = None) -> str:
    return (clock or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).isoformat(timespec="seconds")


# --- merging -------------------------------------------------------------------------------------

# Keys of which a mapping holds at most one: when a higher layer sets one of a group, a lower
# layer's keys of that group are dropped (tether.yaml's `sql:` replaces an imported `table:`).
# Each group belongs to one kind of mapping, found by its path: elsewhere the same words are
# names (a column called `table` under `columns:` must not drop an imported column `sql`).
EXCLUSIVE: dict[tuple[str, ...], frozenset[str]] = {
    ("products", "*"): frozenset({"table", "sql"}),
    ("products", "*", "columns", "*"): frozenset({"unit", "unit_column"}),
    ("products", "*", "freshness"): frozenset({"column", "load_time"}),
}
UNION_LISTS = ("lineage", "relationships")
"""Top-level lists whose items add up across layers (an edge is a fact, whoever read it)."""
RESTRICTED = "restricted"
NOTES = "notes"
"""Sentences on how to call a product's tool or pass a column's parameter: typed ones and
learned ones (the learn layer) add up."""


def _exclusive(path: tuple[str, ...]) -> frozenset[str]:
    for pattern, group in EXCLUSIVE.items():
        if len(pattern) == len(path) and all(p in ("*", q) for p, q in zip(pattern, path,
                                                                          strict=True)):
            return group
    return frozenset()


def merge(lower: dict[str, Any], higher: dict[str, Any], path: tuple[str, ...] = ()
          ) -> dict[str, Any]:
    """``higher`` over ``lower``, key by key (a new dict; neither is changed); ``path``: where
    the two mappings sit in tether.yaml (``()`` for the whole file)."""
    out = copy.deepcopy(lower)
    group = _exclusive(path)
    if group & set(higher):
        for k in group - set(higher):
            out.pop(k, None)
    for key, value in higher.items():
        below = out.get(key)
        if not path and key in UNION_LISTS and isinstance(value, list) and isinstance(below, list):
            seen = {_edge_key(v) for v in value}
            out[key] = copy.deepcopy(value) + [v for v in below if _edge_key(v) not in seen]
        elif key == NOTES and isinstance(value, list) and isinstance(below, list):
            # notes add up: typed ones first, then what a layer learned (each sentence once)
            out[key] = copy.deepcopy(value) + [v for v in below if v not in value]
        elif isinstance(value, dict) and isinstance(below, dict):
            out[key] = merge(below, value, (*path, str(key)))
        elif key == "classification" and below == RESTRICTED:
            continue  # restricted stays restricted: no layer, tether.yaml included, lifts it
        else:
            out[key] = copy.deepcopy(value)
    return out


def kept_products(typed: dict[str, Any], layers: list[ImportLayer]) -> list[ImportLayer]:
    """The layers with the learn layer's notes kept only for products tether.yaml or another
    layer still has: a product removed leaves its learned sentences behind, not a product
    with no table."""
    learn = [la for la in layers if la.kind == "learn"]
    products = (learn[0].config.get("products") if learn else None) or {}
    if not isinstance(products, dict) or not products:
        return layers
    others = merged(typed, [(la.kind, la.config) for la in layers if la.kind != "learn"])
    have = set(others.get("products") or {})
    if set(products) <= have:
        return layers
    kept = learn[0].model_copy(deep=True)
    kept.config["products"] = {k: v for k, v in products.items() if k in have}
    kept.report = {**kept.report, "left_out": sorted(set(products) - have)}
    return [kept if la is learn[0] else la for la in layers]


def _edge_key(item: Any) -> Any:
    if isinstance(item, dict):
        return (item.get("from"), item.get("to"), item.get("via"))
    return json.dumps(item, sort_keys=True, default=str)


def merged(typed: dict[str, Any], layers: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """tether.yaml's mapping over every layer's (``layers`` highest first)."""
    out: dict[str, Any] = {}
    for _, data in reversed(layers):
        out = merge(out, data)
    return merge(out, typed)


_MISSING = object()


def value_at(data: Any, path: Path_) -> Any:
    """The value at ``path`` in nested dicts and lists, or a sentinel when there is none."""
    node = data
    for part in path:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_dict or in_list):
            return _MISSING
        node = node[part]
    return node


def present(value: Any) -> bool:
    return value is not _MISSING
