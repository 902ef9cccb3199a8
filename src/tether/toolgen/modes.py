"""Modes of generation: grounded (everything), bare (grounding stripped), generic (the usual
general-purpose database server: list_tables, describe_table, run_sql)."""

from __future__ import annotations

from typing import Any

from tether.context.meta import context_in, tool_meta_of
from tether.toolgen.kinds import Kind, kind, register
from tether.toolgen.model import READ_ONLY, GeneratedTool, Mode, QueryPlan
from tether.toolgen.shared import size_words

MODES: tuple[Mode, ...] = ("grounded", "bare", "generic")
GENERIC_KINDS = tuple(register(Kind(name)) for name in ("describe", "catalog", "sql"))
"""The generic mode's kinds: made here, never by a grounded build (serve/generic.py runs them)."""


def strip_grounding(tool: GeneratedTool) -> GeneratedTool:
    """The same tool and plan with minimal description, no enums, formats, patterns, units or
    output schema, and no provenance: what the schema alone is worth, measured."""
    props: dict[str, Any] = {}
    for name, schema in tool.input_schema.get("properties", {}).items():
        t = schema.get("type", "string")
        props[name] = {"type": t}
        if t == "array":  # several values at once, whatever they may be
            props[name]["items"] = {"type": (schema.get("items") or {}).get("type", "string")}
    subject = tool.plan.product or tool.name
    return GeneratedTool(
        name=tool.name,
        description=(f"Query {subject}." if kind(tool.plan.kind).bare == "query"
                     else f"Get {tool.name}."),
        input_schema={"type": "object", "properties": props,
                      # which arguments exist is the server's behaviour, not grounding
                      **({"additionalProperties": False}
                         if tool.input_schema.get("additionalProperties") is False else {}),
                      **({"required": tool.input_schema["required"]}
                         if "required" in tool.input_schema else {})},
        output_schema=None,
        annotations={"readOnlyHint": True},
        # the products it reads (the server hides a tool whose product a role may not read);
        # an evaluation reads what a call ran from its result's evidence, never from here
        meta=tool_meta_of({"mode": "bare", "kind": tool.plan.kind,
                           "products": context_in(tool.meta).get("products", [])}),
        plan=tool.plan,
    )


GENERIC_INSTRUCTIONS = ("Read-only SQL over the tables your role may read: list_tables, "
                        "describe_table, run_sql. A result's as_of is the newest time its "
                        "tables hold (as_of_basis says which column).")
"""The generic server's instructions: what it is, and no promise its results do not keep."""


def generic_tools(default_source: str, max_rows: int = 200, max_bytes: int = 1 << 20
                  ) -> list[GeneratedTool]:
    """list_tables, describe_table, run_sql: the baseline in every comparison."""
    ro = dict(READ_ONLY)
    return [
        GeneratedTool(
            name="describe_table", description="Describe the columns of a table.",
            input_schema={"type": "object", "properties": {"table": {"type": "string"}},
                          "required": ["table"]},
            annotations=ro, meta=tool_meta_of({"mode": "generic", "kind": "describe"}),
            plan=QueryPlan(kind="describe", source=default_source),
        ),
        GeneratedTool(
            name="list_tables", description="List the tables in the database.",
            input_schema={"type": "object", "properties": {}},
            annotations=ro, meta=tool_meta_of({"mode": "generic", "kind": "catalog"}),
            plan=QueryPlan(kind="catalog", source=default_source),
        ),
        GeneratedTool(
            name="run_sql", description="Run a read-only SQL query and return the rows (at "
            f"most {max_rows} rows or {size_words(max_bytes)}).",
            input_schema={"type": "object", "properties": {
                "sql": {"type": "string"},
                # a result that says more follow carries next_cursor (serve/generic.py)
                "cursor": {"type": "string", "description": "The next_cursor of the previous "
                           "page, to read the next one (with the same sql)."}},
                "required": ["sql"]},
            annotations=ro, meta=tool_meta_of({"mode": "generic", "kind": "sql"}),
            plan=QueryPlan(kind="sql", source=default_source, max_rows=max_rows),
        ),
    ]
