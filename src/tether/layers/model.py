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
            again = ("`tether learn --apply ID` again" if kind == "learn"
                     else f"`tether import {kind} ...` again")
            raise ConfigError(f"the {kind} import layer cannot be read ({first}).", where=where,
                              hint=f"Run {again} to rewrite it, or delete the file to drop "
                              "what it imported.") from None
        if kind == "learn":
            _only_notes(layer, where)
        out.append(layer)
    return out


def _only_notes(layer: ImportLayer, where: str) -> None:
    """What learn writes is notes on products and their columns, nothing else: a learn layer
    holding any other key (a policy, a metric, a unit, a description) is refused, never read."""
    for name, product in (layer.config.get("products") or {}).items():
        keys = set(product) if isinstance(product, dict) else {"?"}
        columns = product.get("columns") if isinstance(product, dict) else None
        bad = [f"products.{name}.{k}" for k in sorted(keys - {"notes", "columns"})]
        for col, facts in (columns or {}).items():
            extra = set(facts) - {"notes"} if isinstance(facts, dict) else {"?"}
            bad += [f"products.{name}.columns.{col}.{k}" for k in sorted(extra)]
        if bad:
            break
    else:
        bad = [k for k in sorted(layer.config) if k != "products"]
    if bad:
        raise ConfigError(f"the learn layer holds {bad[0]}, but learn writes only notes on "
                          "products and their columns.", where=where,
                          hint="Delete the file and apply the proposals again with `tether "
                          "learn --apply ID`.")


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
        elif isinstance(value, dict) and isinstance(below, dict):
            out[key] = merge(below, value, (*path, str(key)))
        elif key == "classification" and below == RESTRICTED:
            continue  # restricted stays restricted: no layer, tether.yaml included, lifts it
        else:
            out[key] = copy.deepcopy(value)
    return out


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
