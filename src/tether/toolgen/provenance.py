"""What toolgen says about imported facts: the source word and origin of a value an import layer
supplied, the declared values the data does not hold, and the transforms above a product."""

from __future__ import annotations

from tether.config import Project, TetherConfig
from tether.context.outside import SPEAKERS, quote
from tether.context.profile import ColumnProfile
from tether.layers.model import SOURCE_OF, value_at
from tether.toolgen.model import Source

FACTS = ("description", "unit", "unit_column", "classification", "accepted_values", "notes")
"""Column facts whose origin a listing's provenance records (``field_origins``)."""


def said(project: Project, default: Source, *path: str | int) -> tuple[Source, str | None]:
    """The source word of the value at ``path`` (tether.yaml: ``default``; an import layer:
    its own, ``dbt`` for the dbt layer) and, for an imported one, where it was read."""
    origin = project.origin(*path)
    if origin is None or origin.kind is None:
        return default, None
    source: Source = SOURCE_OF[origin.kind]  # type: ignore[assignment]
    return source, f"{origin.kind}:{origin.where}" if origin.where else origin.kind


QUOTED_HERE = ("glossary_dir",)
"""Layers whose words toolgen quotes where it places them (a glossary document's definition);
the dbt importer quotes dbt's words itself, where it writes them beside its own sentences, and
tether.yaml's words are the project's own."""


def words_said(project: Project, text: str, *path: str | int) -> str:
    """The words at ``path`` as a description carries them: quoted as their document's
    (``its glossary document says: “...”``) where an outside layer supplied them."""
    origin = project.origin(*path)
    if origin is not None and origin.kind in QUOTED_HERE:
        return quote(text, SPEAKERS[origin.kind]) or text
    return text


def note_said(project: Project, default: Source, text: str, *path: str | int
              ) -> tuple[Source, str | None]:
    """The source word and origin of one note at ``path`` (a notes list): the layer whose list
    holds it (learned: ``execution_logs`` and the proposal), else tether.yaml's ``default``.
    Notes add up across layers, so an index names no layer: the sentence does."""
    for layer in project.layers:
        mine = value_at(layer.config, path)
        if isinstance(mine, list) and text in mine:
            where = layer.origin((*path, mine.index(text)))
            source: Source = SOURCE_OF.get(layer.kind, default)  # type: ignore[assignment]
            return source, f"{layer.kind}:{where}" if where else layer.kind
    return default, None


def declared_unseen(config: TetherConfig, product: str, c: ColumnProfile) -> list[str]:
    """Values a column is declared to take (accepted_values) that the data does not hold."""
    facts = config.products[product].columns.get(c.column.name)
    if facts is None or not facts.accepted_values or c.enum is None:
        return []
    seen = {str(e.value) for e in c.enum}
    return [v for v in facts.accepted_values if v not in seen]


def field_origins(project: Project, product: str, cols: list[ColumnProfile]
                  ) -> dict[str, dict[str, str]]:
    """Field -> {fact: where an import layer read it}, for the facts a layer supplied."""
    out: dict[str, dict[str, str]] = {}
    if not project.layers:
        return out
    for c in cols:
        for fact in FACTS:
            path = ("products", product, "columns", c.column.name, fact)
            origin = said(project, "schema", *path)[1]
            if fact == "notes":  # typed and learned notes add up: the layer that added some
                origin = next((f"{la.kind}:{la.origin(path) or ''}".rstrip(":")
                               for la in project.layers
                               if isinstance(value_at(la.config, path), list)), None)
            if origin:
                out.setdefault(c.column.name, {})[fact] = origin
    return out


def upstream_versions(config: TetherConfig, products: list[str]) -> dict[str, str]:
    """Transform -> its fingerprint, for every versioned lineage edge above ``products``: a
    changed transform (a dbt model's SQL) changes the definition, and the gate sends it to a
    person."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    frontier = list(products)
    while frontier:
        node = frontier.pop()
        if node in seen:
            continue
        seen.add(node)
        for e in config.lineage:
            if e.to == node:
                if e.version and e.via:
                    out[e.via] = e.version
                frontier.append(e.from_)
    return dict(sorted(out.items()))
