"""The `_meta` contracts between parts, as typed models: what a tool definition says about itself
(``tether/context``, provenance) and what a tool result says it did (``tether/evidence``).

The two are never confused: provenance says where a definition's words came from; evidence says
what one call ran. Only evidence counts as proof of what a call did.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CONTEXT_KEY = "tether/context"
EVIDENCE_KEY = "tether/evidence"
REFUSAL_KEY = "tether/refusal"
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
