"""The `_meta` contracts between parts, as typed models: what a tool definition says about itself
(``tether/context``, provenance) and what a tool result says it did (``tether/evidence``).

The two are never confused: provenance says where a definition's words came from; evidence says
what one call ran. Only evidence counts as proof of what a call did.

This module is the one home of every ``tether/...`` key: readers (:meth:`ToolContext.of`,
:func:`evidence_of`, :func:`pin_of`, :func:`context_in`) and writers (:func:`tool_meta_of`,
:func:`stamp_publication`, :func:`result_meta`, :func:`refusal_meta`) sit side by side, and no
module outside ``tether.context`` names a key (tests/test_layout.py).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CONTEXT_KEY = "tether/context"
EVIDENCE_KEY = "tether/evidence"
REFUSAL_KEY = "tether/refusal"
PIN_KEY = "tether/pin"
"""A tools/call request's ``_meta`` key naming the version the client pins."""
RETIRED_KEY = "retired"
"""The context field of a version that retires its tool: ``{reason}``."""
PUBLICATION_FIELDS = ("version", "supersedes", "change_level", "change_kind", "change_note",
                      "deprecation", "review", "generated_at")
"""The fields a publication stamps, first in a definition's context and in this order."""
MASK_KEY_SHOWN = "<mask_key>"
"""What evidence shows in place of the hash mask's key."""


class Evidence(BaseModel):
    """What one tool call ran, in a result's ``_meta["tether/evidence"]``: an open convention,
    so any MCP server that reports its executed statement this way is labelled the same way.

    A reader ignores keys it does not know (a server may say more)."""

    model_config = ConfigDict(extra="ignore")

    tool: str = Field(description="The tool that ran.")
    version: str | None = Field(default=None, description="Its version, when it has one.")
    sql: str | None = Field(
        default=None, description="The statement as sent to the engine, in its dialect, with "
        "the dialect's placeholders ($name, %(name)s, :name) for the bound values; null for a "
        "call that read no data.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="The bound values by placeholder name; a secret (the "
        "hash mask's key) shows as <mask_key>.")
    tables: list[str] = Field(
        default_factory=list, description="The data products (tables) the call read.")
    policy_predicates: list[str] = Field(
        default_factory=list, description="What the caller's policy added to the statement "
        "(row filters, masks): not fields the call chose.")
    as_of_sql: str | None = Field(
        default=None, description="The statement that produced the result's as_of (same "
        "parameters), or null when as_of came from elsewhere (a file's load time) or is absent.")
    dialect: str | None = Field(
        default=None, description="Extension: the SQL dialect of the statement (duckdb, "
        "postgres, ...), so a reader parses it as the engine did.")
    window: dict[str, Any] | None = Field(
        default=None, description="Extension: the window the statement bounded its time "
        "column(s) with, as the result states it: {columns: [product.column], start, end "
        "(exclusive), calendar, label}; null for a call with no window.")
    requests: list[str] = Field(
        default_factory=list, description="Extension: for a tool over an HTTP API, each request "
        "the call made (method, URL with its query, status), the credential never shown; the "
        "statement (`sql`) is then the policy's, over the rows the API returned.")
    overall_sql: str | None = Field(
        default=None, description="Extension: for a metric cut into several rows, the same "
        "statement without the cut (same parameters), whose one row is the result's overall.")


def evidence_of(meta: dict[str, Any] | None) -> Evidence | None:
    """The evidence in a result's ``_meta``, or None when there is none (or it is malformed)."""
    raw = (meta or {}).get(EVIDENCE_KEY)
    if not isinstance(raw, dict):
        return None
    try:
        return Evidence.model_validate(raw)
    except ValueError:
        return None


class ToolContext(BaseModel):
    """What a tool definition says about itself under ``_meta["tether/context"]``: where its
    words came from and which version it is. Provenance, never evidence of what a call did.
    A reader ignores keys it does not know (another server may say more, or less)."""

    model_config = ConfigDict(extra="allow")

    version: str | None = Field(default=None, description="Semver of this definition.")
    supersedes: str | None = Field(default=None, description="The version it replaced.")
    change_level: str | None = Field(default=None, description="patch | minor | major.")
    change_kind: str | None = Field(
        default=None, description="wording | additive | breaking | semantic | policy.")
    change_note: str | None = Field(default=None, description="What changed, in words.")
    deprecation: dict[str, Any] = Field(
        default_factory=dict, description="{version: {served_until, reason}}.")
    review: dict[str, Any] = Field(
        default_factory=dict, description="{mode, rule | by, at}: who or what approved it.")
    generated_at: str | None = Field(default=None, description="When it was made.")
    kind: str | None = Field(default=None, description="list | metric | probe | sql | ...")
    mode: str | None = Field(default=None, description="grounded | bare | generic.")
    products: list[str] = Field(default_factory=list, description="Products it reads.")
    schema_fingerprint: str | list[str] | None = Field(
        default=None, description="The schema it was generated from.")
    generated_from: list[str] = Field(default_factory=list, description="Sources used.")
    source_of_truth: dict[str, str] = Field(
        default_factory=dict, description="Output field -> product.column (or metric:NAME).")
    canonical_ids: dict[str, str] = Field(
        default_factory=dict, description="Argument -> identifier scheme.")
    definitions: list[str] = Field(default_factory=list, description="Glossary terms it uses.")
    fields: dict[str, Any] = Field(
        default_factory=dict, description="{arguments: {arg: field(s)}, governed: [fields]}.")
    limits: dict[str, Any] = Field(default_factory=dict, description="Rows, bytes, paging.")
    sources: dict[str, str] = Field(
        default_factory=dict, description="Description sentence -> the source it came from.")
    deprecated_values: dict[str, list[str]] = Field(
        default_factory=dict, description="Argument -> values not seen for a long time.")
    origins: dict[str, str] = Field(
        default_factory=dict, description="Sentence -> where an import layer read it "
        "(dbt:model.fleet.trips, glossary_dir:glossary/churn.md:4); only imported sentences.")
    field_origins: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="Field -> {fact (description, unit, classification, "
        "accepted_values): where an import layer read it}.")
    upstream: dict[str, str] = Field(
        default_factory=dict, description="Versioned transforms above the tool's products "
        "(a dbt model) -> their fingerprint (the model's SQL checksum).")
    write: dict[str, Any] = Field(
        default_factory=dict, description="For a write tool: {roles, transitions, require}, "
        "who may call it and what it checks; a change here is semantic (a named reviewer).")

    @classmethod
    def of(cls, definition: Any) -> ToolContext:
        """The context a wire definition carries (empty when it carries none or a malformed
        one: then nothing is claimed)."""
        raw = ((definition or {}).get("_meta") or {}).get(CONTEXT_KEY) if isinstance(
            definition, dict) else None
        if not isinstance(raw, dict):
            return cls()
        try:
            return cls.model_validate(raw)
        except ValueError:
            return cls()


def enum_of(schema: Any) -> list[Any] | None:
    """The values a parameter's JSON Schema lists: its own ``enum``, or its items' for a
    parameter that takes several values at once (an array of an enum); None when it lists none."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema:
        return list(schema["enum"])
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, dict) and "enum" in items:
        return list(items["enum"])
    return None


def with_enum(schema: dict[str, Any], values: list[Any]) -> None:
    """Set the values :func:`enum_of` reads (in place), where they are listed."""
    items = schema.get("items")
    if "enum" not in schema and isinstance(items, dict) and "enum" in items:
        items["enum"] = values
    else:
        schema["enum"] = values


# --- readers and writers of the raw `_meta` sections -------------------------------------------


def context_in(meta: Any) -> dict[str, Any]:
    """The provenance section of a ``_meta`` object as a plain dict (empty when absent)."""
    found = meta.get(CONTEXT_KEY) if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def context_of(definition: Any) -> dict[str, Any]:
    """A wire definition's provenance section, the live dict (a writer may change it in place;
    empty and detached when the definition has none)."""
    return context_in(definition.get("_meta") if isinstance(definition, dict) else None)


SOURCES_AT = f'_meta["{CONTEXT_KEY}"].sources'
"""Where a definition maps each sentence to its source, as a hint names it."""


def context_slot(meta: dict[str, Any]) -> dict[str, Any]:
    """The provenance section of a definition's ``_meta`` (made empty where absent), to write."""
    found = meta.get(CONTEXT_KEY)
    if not isinstance(found, dict):
        found = meta[CONTEXT_KEY] = {}
    return found


def tool_meta_of(context: dict[str, Any]) -> dict[str, Any]:
    """A tool definition's ``_meta`` holding ``context`` as its provenance."""
    return {CONTEXT_KEY: context}


def stamp_publication(wire: dict[str, Any], fields: dict[str, Any], *,
                      drop: Collection[str] = (),
                      tail: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one place a publication is written into a definition's context: ``fields`` first,
    in :data:`PUBLICATION_FIELDS` order (others after them as given), then the context as it
    was less ``fields``, ``drop`` and ``tail``, then ``tail``. Returns the new context."""
    meta = wire.setdefault("_meta", {})
    ctx = context_in(meta)
    head = {k: fields[k] for k in PUBLICATION_FIELDS if k in fields}
    head |= {k: v for k, v in fields.items() if k not in head}
    tail = tail or {}
    rest = {k: v for k, v in ctx.items() if k not in head and k not in drop and k not in tail}
    meta[CONTEXT_KEY] = new = head | rest | tail
    return new


def result_meta(version: str | None, evidence: Evidence) -> dict[str, Any]:
    """A tool result's ``_meta``: the version that answered and the evidence of what ran."""
    return {CONTEXT_KEY: {"version": version}, EVIDENCE_KEY: evidence.model_dump(mode="json")}


def refusal_meta(refusal: dict[str, Any]) -> dict[str, Any]:
    """A refused call's ``_meta``: why it was refused (docs/serve.md, Refusals)."""
    return {REFUSAL_KEY: refusal}


def refusal_of(meta: Any) -> dict[str, Any] | None:
    """The refusal a result's ``_meta`` carries, or None."""
    found = meta.get(REFUSAL_KEY) if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else None


def pin_of(meta: Any) -> Any:
    """The version a tools/call request's ``_meta`` pins, or None."""
    return meta.get(PIN_KEY) if isinstance(meta, dict) else None


def context_sql(column: str, field: str, postgres: bool) -> str:
    """SQL reading one context field of the JSON definition stored in ``column`` (as text):
    PostgreSQL's path operator, or SQLite's json_extract."""
    if postgres:
        return f"({column}::jsonb) #>> '{{_meta,{CONTEXT_KEY},{field}}}'"
    return f"json_extract({column}, '$._meta.\"{CONTEXT_KEY}\".{field}')"


def retired_info(definition: Any) -> dict[str, Any] | None:
    """``{reason}`` when this definition retires its tool, else None."""
    found = context_of(definition).get(RETIRED_KEY)
    return found if isinstance(found, dict) else None
