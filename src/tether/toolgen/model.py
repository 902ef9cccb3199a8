"""A generated tool: its MCP definition, each sentence's source, and how to execute it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.context.meta import context_slot

Source = Literal["schema", "samples", "lineage", "glossary", "dbt", "openapi", "execution_logs",
                 "policy"]
SOURCES: tuple[str, ...] = ("schema", "samples", "lineage", "glossary", "dbt", "openapi",
                            "execution_logs", "policy")
Mode = Literal["grounded", "bare", "generic"]
RANGE = "range"
"""A listing's argument bounding numeric columns: {COLUMN or PATH.column: "LOW..HIGH"}."""

AGGREGATE = "sum_and_average_of"
"""The listing argument that asks for the total and mean of a numeric column (the plan's
``aggregates`` lists the columns it takes)."""
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
             "openWorldHint": False}
"""The annotations of every generated reading tool."""
WRITES = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
          "openWorldHint": False}
"""A write tool's: it overwrites values (destructive); the same call again changes nothing more
(its confirmation applies once, and a replayed idempotency key returns the first result)."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sentence(_M):
    text: str = Field(description="One sentence of a description, ending with a period.")
    source: Source = Field(description="Where the sentence came from.")
    origin: str | None = Field(default=None, description="For a sentence an import layer "
                               "supplied: the layer and the node, or file and line, it was read "
                               "from (dbt:model.fleet.trips, glossary_dir:glossary/churn.md:4).")


class Route(_M):
    """One identifier scheme an identifier argument accepts, and how a value of it reaches the
    filtered column: directly (the column's own scheme) or through a crosswalk product."""

    scheme: str
    pattern: str | None = Field(default=None, description="How a value of it is recognised.")
    via: str | None = Field(default=None, description="Crosswalk product (None: the column's "
                            "own scheme).")
    match: str | None = Field(default=None, description="The crosswalk column holding this "
                              "scheme.")
    take: str | None = Field(default=None, description="The crosswalk column holding the "
                             "filtered column's scheme.")


class Filter(_M):
    param: str = Field(description="Tool argument.")
    column: str = Field(description="Column (qualified for metrics) the argument filters.")
    op: Literal["eq", "gte", "lt", "ieq"] = Field(
        description="Comparison; values are bound parameters (ieq: a name, equal in any case, "
        "or holding the text between *s).")
    several: bool = Field(default=False, description="The argument is a list of values (an "
                          "enum's): eq with several is IN, one bound value each.")
    routes: list[Route] = Field(default_factory=list, description="For an identifier: every "
                                "scheme it accepts, its own first (empty: any value, as is).")
    resolver: str | None = Field(default=None, description="The tool that maps the schemes "
                                 "(named when a value fits none).")
    declared: list[str] = Field(default_factory=list, description="Values the governed "
                                "definition names for the column that the data does not hold: "
                                "accepted beside the enum (they match no row), not refused.")
    examples: list[Any] = Field(default_factory=list, description="The most frequent values over "
                                "every row, kept server-side where some role sees only part of "
                                "the rows or a mask of the column: each caller's list shows "
                                "those their own rows hold (serve/peruser.py), never these.")
    alias: str | None = Field(default=None, description="For a column another product holds, "
                              "reached through relationships (plan/paths.py): the alias that "
                              "product is joined under (its path); ``column`` is then "
                              "product.column of that product.")


class PathHop(_M):
    """A relationship a listing may follow (plan/paths.Hop): ``product`` joined as ``alias``
    where its ``key`` equals ``column`` of the row reached before (``parent``, an alias)."""

    alias: str
    product: str
    parent: str
    column: str
    key: str
    label_only: bool = Field(default=False, description="Joined only for the label of the row a "
                             "key at the end of the reach points to (one hop past "
                             "serve.max_path_hops): no filter, group or order reaches it.")


class Window(_M):
    kind: Literal["period", "trailing", "current", "listing"] = Field(
        description="How time is bounded: by a `period` defaulting to this quarter (period) or "
        "to the last default_days days (trailing), not at all (current), or only when a "
        "`period` is given (listing).")
    column: str | None = Field(default=None, description="Time column (table.column).")
    end_column: str | None = Field(default=None, description="Where a row's validity ends; a "
                                   "row counts in a window it overlaps.")
    calendar: str | None = Field(default=None, description="Calendar periods resolve in.")
    default_days: int = Field(default=90, description="Trailing window length by default.")
    timezone: str = Field(default="UTC", description="The zone period days are counted in.")
    format: str | None = Field(default=None, description="How the time column holds time when "
                               "it is a number or text (context/timeformat.py): %Y, %Y-%m-%d, ...")
    held_as: Literal["integer", "text"] | None = Field(
        default=None, description="With format: whether the column is an integer or text.")
    via: str | None = Field(default=None, description="The alias of a path (plan/paths.py) "
                            "whose product holds the time column: joined when a period is "
                            "given (a fact's date through its key into a date table).")


class Consequence(_M):
    """Something downstream of a write: what reacts when the action changes its columns."""

    kind: Literal["metric", "term", "product", "lineage", "words"] = Field(
        description="What it is: a governed metric (its change is computed in the dry run), a "
        "glossary term, a product or lineage node built from this one, or words a person wrote.")
    name: str | None = Field(default=None, description="The metric, term, product or node.")
    text: str = Field(description="The words the description and the dry run say.")
    measure: str | None = Field(default=None, description="For a metric over this product "
                                "alone: its aggregate, computed over the rows before and after.")
    predicate: str | None = Field(default=None, description="The metric's filter, if any.")
    unit: str | None = Field(default=None, description="The metric's unit.")
    columns: list[str] = Field(default_factory=list, description="The product's columns it "
                               "reads (not computed for a caller who may not read them all).")


class ActionPlan(_M):
    """How a write tool changes rows (docs/write.md): kept with the version, so a changed
    transition, precondition or consequence reaches callers only through the gate."""

    name: str = Field(description="The action (tether.yaml products.P.actions.NAME).")
    table: str = Field(description="The table it updates.")
    keys: dict[str, str] = Field(description="Argument -> primary-key column picking the rows.")
    sets: dict[str, str] = Field(description="Argument -> column it sets.")
    kinds: dict[str, str] = Field(default_factory=dict, description="Column -> type kind, for "
                                  "reading arguments as the column holds them.")
    transitions: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    require: list[str] = Field(default_factory=list)
    consequences: list[Consequence] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    inverse: str | None = Field(default=None, description="The tool that undoes it.")
    max_rows: int = 50
    reads: list[str] = Field(default_factory=list, description="Every column the write reads "
                             "(keys, set, required, consequences): the rows' version a "
                             "confirmation is bound to is taken over these.")


class QueryPlan(_M):
    """How the server executes a tool. SQL is held as text of a sqlglot AST with placeholders
    (``:name``) and compiled per engine; argument values only ever travel as bound parameters."""

    kind: str = Field(description="A registered tool kind (toolgen/kinds.py): list, metric, "
                      "probe, search, rows, catalog, describe, sql, or one a plugin adds.")
    product: str | None = None
    source: str | None = None
    dialect: str = Field(default="duckdb", description="sqlglot dialect of the source.")
    select: str | None = Field(default=None, description="The SELECT, in that dialect.")
    filters: list[Filter] = Field(default_factory=list)
    order_by: list[str] = Field(default_factory=list, description="The listing's order: the "
                                "primary key (keyset paging) or every plain column (offset).")
    paging: Literal["keyset", "offset"] = Field(
        default="offset", description="keyset: the cursor holds the last row's key (order_by is "
        "a key); offset: the cursor holds how many rows came before, over an order by every "
        "column, which is total up to identical rows (no key, NULLs and duplicates allowed).")
    max_rows: int = 200
    default_rows: int = 50
    window: Window | None = None
    group_by: list[str] = Field(default_factory=list)
    output_fields: list[str] = Field(default_factory=list)
    masks_apply_to: str | None = Field(default=None, description="Product whose masks apply.")
    units: dict[str, str] = Field(default_factory=dict, description="Output field -> unit, as "
                                  "every result states it (a `{column}` template takes each "
                                  "row's value of that column).")
    definition: str | None = Field(default=None, description="The governed definition the "
                                   "plan applies, as each answer states it.")
    aggregates: list[str] = Field(default_factory=list, description="Numeric columns a listing "
                                  "may total and average (sum_and_average_of).")
    orderable: list[str] | None = Field(default=None, description="Columns a listing's rows "
                                        "may be sorted by (order_by); None in a plan from "
                                        "before: none.")
    request: dict[str, Any] | None = Field(
        default=None, description="For a tool over an HTTP API: the request it makes (method, "
        "path, parameters, where the rows are, how it pages, which statuses it retries) and "
        "the columns of a row; kept with the version, so a changed spec reaches callers only "
        "through the gate.")
    action: ActionPlan | None = Field(default=None, description="For a write tool: the change "
                                      "it makes and what it checks.")
    counts: list[str] | None = Field(default=None, description="Parameters a listing may count "
                                     "by (count_by), checked by the server whatever the schema "
                                     "says; None in a plan from before: any plain filter.")
    ranges: list[str] = Field(default_factory=list, description="Numeric columns a listing's "
                              "`range` argument may bound (its own, or PATH.column).")
    hops: list[PathHop] = Field(default_factory=list, description="Relationships a listing may "
                                "follow to filter, count and sort by what its rows point to "
                                "(joined only when a call names a path through them).")


class GeneratedTool(_M):
    name: str
    title: str | None = None
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    plan: QueryPlan

    def wire(self) -> dict[str, Any]:
        """Exactly the MCP wire form of tools/list (camelCase, `_meta` included)."""
        out: dict[str, Any] = {"name": self.name}
        if self.title:
            out["title"] = self.title
        out["description"] = self.description
        out["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        if self.meta:
            out["_meta"] = self.meta
        return out

    @property
    def context(self) -> dict[str, Any]:
        return context_slot(self.meta)


def join_sentences(sentences: list[Sentence]) -> tuple[str, dict[str, str]]:
    """The description text and its sentence -> source map."""
    return " ".join(s.text for s in sentences), {s.text: s.source for s in sentences}


def sentence_origins(sentences: list[Sentence]) -> dict[str, str]:
    """Sentence -> where an import layer read it (only the imported ones)."""
    return {s.text: s.origin for s in sentences if s.origin}
