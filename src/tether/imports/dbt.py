"""`tether import dbt`: a dbt project's meaning as one import layer (``.tether/imports/dbt.json``).

Read: model and column descriptions; ``accepted_values`` tests (declared values: the tool's
enum stays the observed values); ``relationships`` tests (join paths); ``unique`` + ``not_null``
or a primary-key constraint (the key); ``depends_on`` (lineage edges, each with its transform's
SQL checksum, so a changed model is a changed transform; only those leading to a product, see
layers/model.py); column ``meta`` (``unit``, ``pii``,
``classification``); model versions and ``deprecation_date``; contracts; semantic models and
metrics (imports/dbt_semantic.py). Every key records the dbt node it came from.

A model is matched to the tether.yaml product reading its relation, and its facts merge into that
product. A model no product reads is reported, not served: a new product would have no row
filter, mask or restriction of tether.yaml's, and the next `tether check` would publish its tool
(a model built ``select * from`` a row-filtered product would hand every caller every row). With
``new_products`` (`tether import dbt PATH --new-products`) such a model becomes a product of its
own name (its latest version, for a versioned model), and the layer records the choice so that
`tether check` reads the input again alike. Nothing typed in tether.yaml is overwritten: the
layer sits under it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tether.config import Project
from tether.context.outside import SPEAKERS, clean, quote
from tether.imports.dbt_files import (
    find_inputs,
    listing_digest,
    read_catalog,
    read_manifest,
    read_schema_files,
    sha256,
)
from tether.imports.dbt_model import DbtNode, DbtProject
from tether.imports.dbt_semantic import semantic_layer
from tether.layers.model import (
    MAX_LAYER_EDGES,
    ImportLayer,
    InputFile,
    lineage_elsewhere,
    now_stamp,
    reaching,
    too_many_edges,
)

KIND = "dbt"
SKIPPED_KEPT = 200
"""Models (and metrics) not imported that the layer's report names; beyond that it counts them
(a manifest of 20,000 models, three of them products, must not make a layer of 20,000 reasons)."""
CLASSIFICATIONS = ("public", "internal", "pii", "restricted")
Origins = list[tuple[list[str | int], str]]


def read_dbt(project: Project, path: Path, new_products: bool = False) -> ImportLayer:
    """The dbt layer for the project at ``path`` (a dbt project directory or a manifest);
    ``new_products``: a model no product of tether.yaml reads becomes one."""
    manifest, root = find_inputs(path)
    inputs: list[InputFile] = []
    if manifest is not None:
        dbt, data = read_manifest(manifest)
        inputs.append(InputFile(path=_shown(project, manifest), sha256=sha256(data)))
        catalog = manifest.parent / "catalog.json"
        if catalog.is_file():
            dbt.catalog, cdata = read_catalog(catalog)
            inputs.append(InputFile(path=_shown(project, catalog), sha256=sha256(cdata)))
    else:
        dbt, files = read_schema_files(root)
        inputs += [InputFile(path=_shown(project, root / rel), sha256=sha256(b))
                   for rel, b in sorted(files.items())]
        inputs.append(InputFile(path=_shown(project, root), sha256=listing_digest(root),
                                listing=True))
    layer = to_layer(project, dbt, new_products)
    layer.inputs = inputs
    layer.options = {"path": _shown(project, Path(path).resolve()),
                     "read": "manifest" if manifest is not None else "schema.yml",
                     "new_products": new_products}
    return layer


def _shown(project: Project, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(project.root))
    except ValueError:
        return str(path.resolve())


def to_layer(project: Project, dbt: DbtProject, new_products: bool = False) -> ImportLayer:
    products = match_products(project, dbt, new_products)
    config: dict[str, Any] = {"products": {}}
    origins: Origins = []
    skipped: list[dict[str, str]] = []
    for node in dbt.models():
        name = products.get(node.unique_id)
        if name is None:
            skipped.append({"node": node.unique_id,
                            "reason": _why_not(project, node, new_products)})
            continue
        config["products"][name] = product_facts(project, dbt, node, name)
        origins.append((["products", name], node.unique_id))
    _tests(dbt, products, config, origins)
    config["lineage"], left_out = lineage_edges(project, dbt, products)
    origins += [(["lineage", i], e["via"][len("dbt:"):]) for i, e in enumerate(config["lineage"])]
    semantic = semantic_layer(dbt, products, config["products"], dialect=dbt.adapter_type)
    for key in ("metrics", "glossary"):
        if semantic.config.get(key):
            config[key] = semantic.config[key]
    origins += semantic.origins
    for key in [k for k, v in config.items() if not v]:
        del config[key]
    typed = project.typed.get("products") or {}
    report = {"models": len(dbt.models()), "products": sorted(set(products.values())),
              "new_products": sorted({p for p in products.values() if p not in typed}),
              "skipped": skipped[:SKIPPED_KEPT], "skipped_total": len(skipped),
              "metrics": sorted(config.get("metrics", {})),
              "metrics_skipped": semantic.skipped[:SKIPPED_KEPT],
              "metrics_skipped_total": len(semantic.skipped), "lineage_left_out": left_out}
    return ImportLayer(kind=KIND, imported_at=now_stamp(project.config.clock), config=config,
                       origins=origins, report=report)


# --- models and products -------------------------------------------------------------------------


def default_schemas(project: Project) -> set[str]:
    """Schemas an unqualified product table may live in."""
    named = {s.schema_.lower() for s in project.config.sources.values() if s.schema_}
    return named or {"main", "public"}


def relation_text(project: Project, schema: str | None, alias: str) -> str:
    """How tether.yaml names a relation: bare in a default schema, else schema.table."""
    if not schema or schema.lower() in default_schemas(project):
        return alias
    return f"{schema}.{alias}"


def _key(project: Project, table: str) -> tuple[str, str]:
    parts = table.replace('"', "").split(".")
    schema = parts[-2].lower() if len(parts) > 1 else ""
    if schema in default_schemas(project):
        schema = ""
    return schema, parts[-1].lower()


def match_products(project: Project, dbt: DbtProject, new_products: bool = False
                   ) -> dict[str, str]:
    """dbt node id -> product name: the typed product reading the model's relation; with
    ``new_products``, else a new product named after the model (the latest version only; no
    time spine, no ephemeral)."""
    typed = project.typed.get("products") or {}
    by_table = {_key(project, str(p["table"])): name for name, p in typed.items()
                if isinstance(p, dict) and p.get("table")}
    out: dict[str, str] = {}
    for node in dbt.models():
        if node.config.materialized == "ephemeral":
            continue
        found = by_table.get(_key(project, relation_text(project, node.schema_, node.relation)))
        if found is not None:
            out[node.unique_id] = found
        elif (new_products and node.time_spine is None and node.name not in typed
              and node.version in (None, node.latest_version)):
            out[node.unique_id] = node.name
    return out


NOT_A_PRODUCT = ("not a product: no product of tether.yaml reads its relation ({}); declare it "
                 "in tether.yaml (with its row filters and masks), or import with "
                 "--new-products")


def _why_not(project: Project, node: DbtNode, new_products: bool) -> str:
    shown = relation_text(project, node.schema_, node.relation)
    if node.config.materialized == "ephemeral":
        return "ephemeral: no relation in the warehouse"
    if node.time_spine is not None:
        return "the semantic layer's time spine"
    if node.version not in (None, node.latest_version):
        return (f"version {node.version} of {node.name} (latest {node.latest_version}); add a "
                "product for its relation to serve it")
    if not new_products:
        return NOT_A_PRODUCT.format(shown)
    return (f"tether.yaml's product {node.name} reads another relation; name the model's "
            f"relation ({shown}) in a product to merge them")


def product_facts(project: Project, dbt: DbtProject, node: DbtNode, name: str) -> dict[str, Any]:
    typed = (project.typed.get("products") or {}).get(name)
    facts: dict[str, Any] = {}
    if typed is None:
        facts["table"] = relation_text(project, node.schema_, node.relation)
    said = quote(node.description, SPEAKERS["dbt"])  # dbt's words, quoted beside tether's own below
    sentences = [said] if said else []
    sentences += _version_sentences(dbt, node)
    if node.contract.get("enforced") or node.config.contract.get("enforced"):
        sentences.append("Its columns and types are enforced by a dbt contract.")
    if sentences:
        facts["description"] = " ".join(s if s.endswith((".", "!", "?")) else s + "."
                                        for s in sentences)
    owner = node.all_meta().get("owner")
    if isinstance(owner, str) and owner:
        facts["owner"] = owner
    key = primary_key(dbt, node)
    if key:
        facts["primary_key"] = key
    columns = column_facts(dbt, node)
    if columns:
        facts["columns"] = columns
    return facts


def _version_sentences(dbt: DbtProject, node: DbtNode) -> list[str]:
    out = []
    if node.version is not None:
        older = sorted(n.version or "" for n in dbt.models()
                       if n.name == node.name and n.unique_id != node.unique_id)
        latest = "the latest" if node.version == node.latest_version else (
            f"not the latest ({node.latest_version} is)")
        out.append(f"Version {node.version} of the dbt model {node.name}, {latest}"
                   + (f"; other versions: {', '.join(older)}" if older else ""))
    if node.deprecation_date:
        out.append(f"Deprecated: dbt retires this model on {node.deprecation_date[:10]}")
    return out


def primary_key(dbt: DbtProject, node: DbtNode) -> list[str]:
    if node.primary_key:
        return list(node.primary_key)
    for c in node.constraints:
        if c.get("type") == "primary_key" and c.get("columns"):
            return [str(x) for x in c["columns"]]
    unique: set[str] = set()
    not_null: set[str] = set()
    for t in dbt.tests_of(node.unique_id):
        if t.column_name and t.test_metadata:
            if t.test_metadata.name == "unique":
                unique.add(t.column_name)
            elif t.test_metadata.name == "not_null":
                not_null.add(t.column_name)
    both = sorted(unique & not_null)
    return both[:1] if len(both) == 1 else []


def column_facts(dbt: DbtProject, node: DbtNode) -> dict[str, Any]:
    """Description, unit, classification and declared values of each documented column that
    the relation has (by the catalog, when there is one)."""
    real = dbt.catalog.columns(node.unique_id) if dbt.catalog else None
    real_lower = {c.lower(): c for c in real} if real is not None else None
    out: dict[str, Any] = {}
    for name, col in node.columns.items():
        if real_lower is not None and name.lower() not in real_lower:
            continue
        cname = real_lower[name.lower()] if real_lower is not None else name
        facts: dict[str, Any] = {}
        if described := clean(col.description):  # a field's words: data, cleaned and cut
            facts["description"] = described
        meta = col.all_meta()
        if isinstance(meta.get("unit"), str) and meta["unit"]:
            facts["unit"] = meta["unit"]
        cls = meta.get("classification")
        if meta.get("restricted") is True or cls == "restricted":
            facts["classification"] = "restricted"
        elif meta.get("pii") is True:
            facts["classification"] = "pii"
        elif isinstance(cls, str) and cls.lower() in CLASSIFICATIONS:
            facts["classification"] = cls.lower()
        if facts:
            out[cname] = facts
    for t in dbt.tests_of(node.unique_id):
        test = t.test_metadata
        if (test and test.name == "accepted_values" and t.column_name
                and isinstance(test.args.get("values"), list)):
            if real_lower is not None and t.column_name.lower() not in real_lower:
                continue
            cname = real_lower[t.column_name.lower()] if real_lower is not None else t.column_name
            out.setdefault(cname, {})["accepted_values"] = [str(v) for v in test.args["values"]]
    return out


def _tests(dbt: DbtProject, products: dict[str, str], config: dict[str, Any],
           origins: Origins) -> None:
    """relationships tests whose both ends are products: join paths."""
    rels: list[dict[str, Any]] = []
    for t in dbt.tests():
        meta = t.test_metadata
        if not meta or meta.name != "relationships" or not t.attached_node:
            continue
        parent = next((n for n in t.depends_on.nodes if n != t.attached_node), None)
        field = meta.args.get("field")
        child = products.get(t.attached_node)
        target = products.get(parent or "")
        if not (child and target and t.column_name and isinstance(field, str)):
            continue
        rel = {"from": f"{child}.{t.column_name}", "to": f"{target}.{field}",
               "kind": "many_to_one"}
        if rel not in rels:
            origins.append((["relationships", len(rels)], t.unique_id))
            rels.append(rel)
    if rels:
        config["relationships"] = rels


def lineage_edges(project: Project, dbt: DbtProject, products: dict[str, str]
                  ) -> tuple[list[dict[str, Any]], int]:
    """An edge from each node a model depends on to the model (products by their name, other
    relations by their table), through the model's transform, with its SQL checksum; only the
    edges that lead to a product (through dbt's edges, tether.yaml's or another layer's), and
    the number left out. More than :data:`MAX_LAYER_EDGES` kept is an error."""
    names: dict[str, str | None] = {}  # a node is named once, however many models read it

    def name(uid: str) -> str | None:
        if uid in names:
            return names[uid]
        found = None
        if uid in products:
            found = products[uid]
        elif (node := dbt.nodes.get(uid)) is not None and node.resource_type in (
                "model", "seed", "snapshot"):
            found = relation_text(project, node.schema_, node.relation)
        elif (src := dbt.sources.get(uid)) is not None:
            found = relation_text(project, src.schema_, src.relation)
        names[uid] = found
        return found

    models: list[tuple[DbtNode, str, list[str]]] = []
    into: dict[str, list[list[str]]] = {}
    total = 0
    for node in dbt.models():
        to = name(node.unique_id)
        if to is None:
            continue
        deps = [f for f in (name(d) for d in sorted(set(node.depends_on.nodes)))
                if f is not None and f != to]
        total += len(deps)
        models.append((node, to, deps))
        into.setdefault(to, []).append(deps)
    wanted = reaching({*project.config.products, *products.values()}, into,
                      lineage_elsewhere(project.typed, project.layers, KIND))
    edges: list[dict[str, Any]] = []
    for node, to, deps in models:
        if to not in wanted:
            continue
        if len(edges) + len(deps) > MAX_LAYER_EDGES:
            kept = sum(len(d) for _, t, d in models if t in wanted)
            raise too_many_edges(kept, KIND, "tether import dbt",
                                 "Declare the models you serve as products in tether.yaml "
                                 "rather than importing every model with --new-products.")
        version = node.checksum.checksum[:12] if node.checksum and node.checksum.checksum else None
        for frm in deps:
            edge = {"from": frm, "to": to, "via": f"dbt:{node.unique_id}"}
            if version:
                edge["version"] = version
            edges.append(edge)
    return edges, total - len(edges)
