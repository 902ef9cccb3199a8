"""The tether.yaml model: one pydantic model per section, ``extra="forbid"`` everywhere, so a
typo'd key is an error rather than a silently ignored setting. Plain models, no I/O: loading
(with file and line in every error) is ``tether.config``; the checks of references between
sections are ``tether.context.references``; the checks against the source are
``tether.profiling.policycheck``. ``docs/config.md`` is the reference, generated from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tether.context.timeformat import is_format

PII_SELECTOR = "pii"
"""A role's ``masks`` key that means every column classified pii."""


class Model(BaseModel):
    """Base for every section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --- sources -------------------------------------------------------------------------------------


class ApiAuth(Model):
    scheme: str = Field(description="The security scheme (components.securitySchemes) a "
                        "request authenticates with.")
    credential: str = Field(
        default="token_store", description="Where the credential comes from: `token_store` "
        "(each caller's own, set with `tether token credential USER --source S`; a caller "
        "without one is refused) or `env:VAR` (one shared credential for every caller, "
        "only where the project says so here).")
    sample_as: str | None = Field(
        default=None, description="With `token_store`: the user whose credential profiling's "
        "sample calls use (what the samples show is what that user may read).")

    @field_validator("credential")
    @classmethod
    def _credential(cls, v: str) -> str:
        if v != "token_store" and not re.fullmatch(r"env:[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError("`credential` is `token_store` or `env:VARIABLE`")
        return v


class SourceConfig(Model):
    kind: Literal["sql", "openapi"] = Field(
        default="sql", description="`sql` (a database, by `url`) or `openapi` (an HTTP API "
        "described by `spec`, read through its read-only operations; docs/openapi.md).")
    url: str | None = Field(
        default=None,
        description="A DuckDB file (`duckdb:///path.duckdb` or a plain path ending in .duckdb; "
        "relative to the project), a Spark Connect endpoint (`spark://host:15002`), or any "
        "SQLAlchemy URL (`postgresql://user@host/db`; docs/warehouses.md lists the engines)."
    )
    schema_: str | None = Field(
        default=None,
        alias="schema",
        description="Schema that unqualified table names resolve in (default: the engine's).",
    )
    spec: str | None = Field(
        default=None, description="openapi: the OpenAPI 3.x description, a file (JSON or YAML, "
        "relative to the project) or an http(s) URL.")
    base_url: str | None = Field(
        default=None, description="openapi: where requests go (default: the spec's first "
        "server).")
    auth: ApiAuth | None = Field(
        default=None, description="openapi: how a request carries the caller's credential.")
    sample_calls: int = Field(
        default=5, ge=0, le=1000, description="openapi: at most how many requests profiling "
        "makes per operation (0: none; the tools then say only what the spec says).")
    writer_url: str | None = Field(
        default=None, description="sql: where write tools write (`products.P.actions`): a DSN "
        "of its own, with a role that may UPDATE the tables the actions change; the serving "
        "connection (`url`) stays read-only. A DuckDB source names its file again (docs/write.md).")

    @model_validator(mode="after")
    def _kind_fields(self) -> SourceConfig:
        if self.kind == "sql":
            if self.url is None:
                raise ValueError("a `sql` source needs `url:` (or say `kind: openapi`)")
            extra = [k for k in ("spec", "base_url", "auth") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"{', '.join(extra)} belong to `kind: openapi` sources")
        else:
            if self.spec is None:
                raise ValueError("an `openapi` source needs `spec:` (a file or URL)")
            if self.url is not None or self.schema_ is not None or self.writer_url is not None:
                raise ValueError("an `openapi` source takes `spec:` and `base_url:`, not "
                                 "`url:`, `schema:` or `writer_url:`")
        return self


# --- products ------------------------------------------------------------------------------------


class Freshness(Model):
    column: str | None = Field(default=None, description="Column whose max() is the data's as_of.")
    where: str | None = Field(
        default=None, description="SQL condition on the rows whose newest `column` is as_of, "
        "e.g. `happened_at <= {{ clock }}` (the newest past event, not a future booking); "
        "`{{ clock }}` is the project clock, bound as a parameter.")
    load_time: bool = Field(
        default=False, description="Use the time the source was last loaded when no column says."
    )

    @model_validator(mode="after")
    def _one(self) -> Freshness:
        if self.where is not None and self.column is None:
            raise ValueError("`where` needs `column`: it picks the rows whose newest column "
                             "value is as_of")
        if (self.column is not None) != self.load_time:
            return self
        raise ValueError("give exactly one of `column: NAME` or `load_time: true`")


class ColumnFacts(Model):
    unit: str | None = Field(
        default=None, description="Unit of the values, e.g. USD_cents, days; `none` for a "
        "dimensionless value (a count of things is `count`).")
    unit_column: str | None = Field(
        default=None, description="A column of the same row that names the unit (a currency code "
        "column); the unit is unit_format with {value} replaced by that column's value.")
    unit_format: str = Field(
        default="{value}", description="How a unit_column value becomes a unit, e.g. "
        "'{value}_cents'.")
    description: str | None = Field(default=None, description="What the column means.")
    classification: Literal["public", "internal", "pii", "restricted"] | None = Field(
        default=None, description="`restricted` columns are never exposed by any tool."
    )
    personal: Literal["email", "phone", "address", "name", "birth_date", "national_id"] | None = (
        Field(default=None, description="Personal data the column holds (found by `tether "
              "init` from its name and values, confirmed here): classified pii unless "
              "classified otherwise, so a role's masks: {pii: ...} covers it."))
    accepted_values: list[str] | None = Field(
        default=None, description="Values the column is declared to take (a dbt "
        "accepted_values test, or typed here). The tool's enum stays the values the data "
        "holds; a declared value never seen is named in the parameter's description and "
        "accepted (it matches no row).")
    notes: list[str] = Field(
        default_factory=list, description="Sentences on how to pass this column's parameter, "
        "added to its description (what `tether learn --apply` writes, or typed here).")

    @field_validator("accepted_values", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        # dbt's accepted_values may be unquoted numbers or booleans: compared as text
        return [str(x) for x in v] if isinstance(v, list) else v

    @model_validator(mode="after")
    def _personal_is_pii(self) -> ColumnFacts:
        if self.personal is not None and self.classification is None:
            self.classification = "pii"
        return self

    @model_validator(mode="after")
    def _unit_source(self) -> ColumnFacts:
        if self.unit is not None and self.unit_column is not None:
            raise ValueError("give `unit` or `unit_column`, not both")
        if "{value}" not in self.unit_format:
            raise ValueError(f"unit_format {self.unit_format!r} must contain {{value}}, where the "
                             "unit_column's value goes")
        return self


class ToolSpec(Model):
    name: str | None = Field(default=None, description="Tool name (default: from the question).")
    question: str | None = Field(default=None, description="The business question it answers.")
    filters: list[str] | None = Field(
        default=None,
        description="Columns offered as filter parameters (default: enums, identifiers and the "
        "metric time), and paths to a column of the product a row points to (PATH.column: a "
        "parameter PATH_column); named here, no other path is a parameter.",
    )
    max_rows: int = Field(default=200, ge=1, le=10_000, description="Most rows one call returns.")

    @field_validator("name")
    @classmethod
    def _tool_name(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,63}", v):
            raise ValueError("a tool name is 1-64 letters, digits, _ or -, starting with a letter")
        return v


class ActionConfig(Model):
    """A change a write tool makes to a product's rows (docs/write.md)."""

    description: str | None = Field(
        default=None, description="What the action does, in business words (the tool's first "
        "sentence).")
    set_: list[str] = Field(alias="set", min_length=1, description="The columns it may change.")
    transitions: dict[str, dict[str, list[str]]] = Field(
        default_factory=dict, description="For a status column of `set`: from each value, the "
        "values it may move to (`{phase: {DRAFT: [SENT]}}`); a row in any other state is "
        "refused with the moves allowed from it.")
    require: list[str] = Field(
        default_factory=list, description="SQL predicates over the product's columns that must "
        "hold for every row changed, before and after the change (checked in the dry run and "
        "again inside the write's transaction).")
    consequences: list[str] = Field(
        default_factory=list, description="What reacts downstream, beside what lineage, metrics "
        "and the glossary show: words (`the nightly export picks them up`) or the name of "
        "a metric, product or lineage node.")
    roles: list[str] = Field(min_length=1, description="The roles that may do it (their row "
                             "filters bound the rows it may touch).")
    inverse: str | None = Field(
        default=None, description="The action of this product that undoes it (it must allow "
        "every move back); a write's result names the calls that restore the before values.")
    max_rows: int = Field(default=50, ge=1, le=1000, description="Most rows one call changes.")


class ProductConfig(Model):
    source: str | None = Field(default=None, description="Source name (default: the only source).")
    table: str | None = Field(default=None, description="Table or view, optionally schema.table.")
    sql: str | None = Field(default=None, description="A single SELECT defining the product.")
    description: str | None = Field(default=None, description="What one row is, in plain words.")
    grain: str | None = Field(default=None, description="One row per ..., in plain words.")
    owner: str | None = Field(default=None, description="Who answers for this product.")
    primary_key: list[str] = Field(
        default_factory=list, description="Columns identifying a row (one, or several together; "
        "`tether init` writes the smallest unique, non-null set of at most three it finds, "
        "marked `# inferred: confirm`).")
    time_columns: dict[str, str] = Field(
        default_factory=dict, description="Time columns: a timestamp or date column with its "
        "time zone; a column that holds time as a number or text with its format instead "
        "(`\"%Y\"` integer years, `\"%Y%m\"`, `\"%Y%m%d\"`, `\"%s\"` seconds since 1970, "
        "`\"%Y-%m-%d\"` or any strftime format for text).")
    metric_time: str | None = Field(
        default=None, description="The time column metrics and last-seen use (one of time_columns)."
    )
    freshness: Freshness | None = Field(default=None, description="Where as_of comes from.")
    identifiers: dict[str, str] = Field(
        default_factory=dict, description="Identifier columns and the scheme each carries."
    )
    columns: dict[str, ColumnFacts] = Field(
        default_factory=dict, description="Per-column facts a person confirms."
    )
    tool: ToolSpec | None = Field(default=None, description="Naming of the generated tool.")
    notes: list[str] = Field(
        default_factory=list, description="Sentences on how to call the product's tool, added "
        "to its description (what `tether learn --apply` writes, or typed here).")
    actions: dict[str, ActionConfig] = Field(
        default_factory=dict, description="Write tools over this product's rows, by the name "
        "of the business action (docs/write.md).")
    metric_time_via: str | None = Field(
        default=None, description="For a product with no time of its own (a star schema's "
        "fact holding an integer key into a date table): the column whose referent's "
        "metric_time is this product's time (`packed_day_key`: the packing's date, not "
        "the dispatch's); its listing's `period` bounds that date. The column must refer to the "
        "other product by a relationship or by its key's name.")
    label: str | None = Field(
        default=None, description="The column that says which row it is to a person (a name or "
        "title; `tether init` proposes a short text column whose values nearly never repeat): "
        "a filter matched exactly in any case, and the name a result grouped by a reference to "
        "this product carries beside each key.")

    @field_validator("primary_key", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _table_or_sql(self) -> ProductConfig:
        if (self.table is None) == (self.sql is None):
            raise ValueError("give exactly one of `table:` or `sql:`")
        return self

    def zone(self, column: str | None) -> str:
        """The time zone a time column is read in (UTC for one held in a format, and for a
        column that is none)."""
        value = self.time_columns.get(column or "", "UTC")
        return "UTC" if is_format(value) else value

    def time_format(self, column: str | None) -> str | None:
        """The format a time column holds time in (``%Y``, ``%Y-%m-%d``); None for a timestamp
        or date column (and for a column that is no time column)."""
        value = self.time_columns.get(column or "")
        return value if value and is_format(value) else None

    def timestamp_column(self) -> str | None:
        """The column last-seen and recency use: metric_time, else the first time column."""
        return self.metric_time or next(iter(self.time_columns), None)


class IdentifierScheme(Model):
    pattern: str | None = Field(default=None, description="Regex every value of the scheme fits.")
    crosswalk: str | None = Field(
        default=None, description="table.column mapping this scheme to the canonical id."
    )
    description: str | None = Field(default=None, description="What the identifier is.")
    canonical: bool = Field(default=False, description="True for the canonical scheme.")

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"not a valid regular expression ({e})") from e
        return v


# --- meaning -------------------------------------------------------------------------------------


class GlossaryTerm(Model):
    definition: str = Field(description="The plain-language governed definition.")
    predicate: str | None = Field(default=None, description="The governed predicate, as SQL.")
    measure: str | None = Field(
        default=None, description="The governed measure, as an aggregate SQL expression over "
        "product.column fields (e.g. sum(shipments.weight_kg * tariffs.rate)); its joins are "
        "the project's identifiers and relationships.")
    fields: list[str] = Field(default_factory=list, description="table.column fields it governs.")
    synonyms: list[str] = Field(default_factory=list, description="Other words people use.")
    owner: str | None = Field(default=None, description="Who owns the definition.")


class MetricOutput(Model):
    sql: str = Field(description="SQL aggregate over the metric's rows.")
    unit: str | None = Field(default=None, description="Unit of the value.")
    description: str | None = Field(default=None, description="What the value means.")


class MetricConfig(Model):
    measure: str = Field(description="SQL aggregate over product.column fields, e.g. "
                         "count(distinct shipments.shipment_id).")
    predicate: str | None = Field(default=None, description="SQL filter the measure counts under.")
    time: str | None = Field(default=None, description="table.column the metric's window uses.")
    time_end: str | None = Field(
        default=None,
        description="table.column ending a row's validity; a row counts in a period when "
        "[time, time_end) overlaps it (NULL: still open).",
    )
    window: Literal["period", "trailing", "current"] | None = Field(
        default=None,
        description="period: a calendar quarter (default with a calendar); trailing: the last N "
        "days (default without); current: no time bound.",
    )
    outputs: dict[str, MetricOutput] = Field(
        default_factory=dict, description="More values computed beside the measure."
    )
    dimensions: list[str] = Field(default_factory=list, description="Columns it may be cut by.")
    calendar: str | None = Field(default=None, description="Calendar periods resolve in.")
    term: str | None = Field(default=None, description="Glossary term the metric implements.")
    unit: str | None = Field(default=None, description="Unit of the measure.")
    description: str | None = Field(default=None, description="Plain-language meaning.")
    tool: ToolSpec | None = Field(default=None, description="Naming of the generated tool.")


class CalendarConfig(Model):
    start_month: int = Field(default=1, ge=1, le=12, description="First month of the year.")
    year_named_by: Literal["start", "end"] = Field(
        default="end",
        description="FY label: the calendar year the fiscal year ends in (`end`) or starts in.",
    )


# --- policy --------------------------------------------------------------------------------------


class TableRule(Model):
    allow: list[str] = Field(default_factory=lambda: ["*"],
                             description="Products the role may read (globs on product names).")
    deny: list[str] = Field(default_factory=list,
                            description="Products the role may never read (globs); deny wins.")

    def reads(self, product: str) -> bool:
        """Whether the rule lets the role read ``product`` at all (deny wins over allow): the
        one reading of it (the policy path, item 13, the projection, row filters via)."""
        return (not any(fnmatchcase(product, g) for g in self.deny)
                and any(fnmatchcase(product, g) for g in self.allow))


VIA_MARK = "{{ via %s }}"
"""How a row filter ``{via: P}`` is held until context/via.py compiles it into SQL when
tether.yaml is read (a template no reader accepts: one left uncompiled fails closed)."""


class RoleConfig(Model):
    tools: list[str] = Field(default_factory=lambda: ["*"], description="Visible tools (globs).")
    tables: TableRule = Field(
        default_factory=TableRule,
        description="Which products the role may read at all, through any tool, run_sql, the "
        "probe or search; a denied product is absent for the role.")
    row_filters: dict[str, str] = Field(
        default_factory=dict,
        description="product -> SQL predicate; `{{ user.attr }}` becomes a bound parameter. "
        "Or `{via: PRODUCT}`: the rows whose PRODUCT (along the relationships, one hop or "
        "more) the role may read, compiled into the same SQL (the parent's own filter inside).",
    )

    @field_validator("row_filters", mode="before")
    @classmethod
    def _via(cls, value: Any) -> Any:
        """``{via: P}`` held as its mark (policy/via.py compiles it)."""
        if not isinstance(value, dict):
            return value
        return {k: (VIA_MARK % v["via"].strip() if isinstance(v, dict) and set(v) == {"via"}
                    and isinstance(v["via"], str) else v) for k, v in value.items()}
    masks: dict[str, Literal["redact", "hash", "null"]] = Field(
        default_factory=dict, description="product.column -> mask (redact | hash | null); the "
        "selector `pii` masks every column classified pii."
    )
    description: str | None = Field(default=None, description="Who holds the role.")
    reviewer: bool = Field(
        default=False, description="Members decide reviews: they may approve or reject a change "
        "that waits for a named person (`tether review approve|reject`, the console).")


class UserConfig(BaseModel):
    """A user: a role plus free attributes (region, team, ...) that row filters refer to."""

    model_config = ConfigDict(extra="allow")
    role: str = Field(description="Role name from policies.roles.")

    def attributes(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class PoliciesConfig(Model):
    roles: dict[str, RoleConfig] = Field(default_factory=dict, description="Roles by name.")
    users: dict[str, UserConfig] = Field(default_factory=dict, description="Users by name.")
    restricted: list[str] = Field(
        default_factory=list, description="product.column globs never exposed by any tool."
    )


class Acceptance(Model):
    item: int = Field(ge=1, le=14, description="The `tether ci` item whose finding is accepted.")
    product: str | None = Field(default=None, description="The product the finding names (omit: "
                                "every product).")
    role: str | None = Field(default=None, description="The role it names (omit: every role).")
    reason: str = Field(min_length=3, description="Why it is intended, in a few words (shown "
                        "with the item, in the policy's change and in the console).")

    def words(self) -> str:
        where = " ".join(x for x in (f"on {self.product}" if self.product else "",
                                     f"for role {self.role}" if self.role else "") if x)
        return f"item {self.item}{' ' + where if where else ''}: {self.reason.strip()}"


class CiConfig(Model):
    accept: list[Acceptance] = Field(
        default_factory=list, description="`tether ci` findings accepted as intended, each with "
        "its reason: itself a change of the access policy (a reviewer who is not its author "
        "approves it), and counted only once approved.")


class Relationship(Model):
    from_: str = Field(alias="from", description="product.column holding the key (e.g. a code).")
    to: str = Field(description="product.column it refers to (a lookup table's key).")
    kind: Literal["many_to_one", "one_to_many", "one_to_one"] = Field(
        default="many_to_one", description="How many rows of each side meet.")


class LineageEdge(Model):
    from_: str = Field(alias="from", description="Upstream node (source table, transform, product).")
    to: str = Field(description="Downstream node.")
    via: str | None = Field(default=None, description="Transform the edge goes through.")
    version: str | None = Field(
        default=None, description="A fingerprint of the transform (a dbt model's SQL "
        "checksum): when it moves, the transform changed, and the tools below it go to review.")


# --- operations ----------------------------------------------------------------------------------


class RegistryConfig(Model):
    url: str = Field(default="sqlite:///.tether/registry.db", description="Registry database.")


class ServeConfig(Model):
    tokens_file: str = Field(default=".tether/tokens.json", description="Hashed bearer tokens.")
    cursor_key_file: str = Field(default=".tether/cursor.key", description="Cursor signing key.")
    credentials_file: str = Field(
        default=".tether/credentials.json", description="Each caller's own API credentials, "
        "by source and user (`tether token credential`; mode 600).")
    mask_key_file: str = Field(
        default=".tether/mask.key", description="Secret key of the `hash` mask (created once, "
        "mode 600): masked values hash equal within a project and cannot be guessed outside it.")
    max_result_rows: int = Field(
        default=1000, ge=1, description="Most rows any one call returns, enforced while fetching.")
    max_result_bytes: int = Field(
        default=1_048_576, ge=1024, description="Most bytes of values any one call returns, "
        "enforced while fetching (default 1 MiB).")
    statement_timeout_seconds: float = Field(
        default=10.0, gt=0, description="A tool's query running longer is cancelled."
    )
    max_api_call_bytes: int = Field(
        default=32 << 20, ge=1024, description="Most bytes one call of an HTTP API's tool reads "
        "from the API, all its pages together (default 32 MiB): past it the call stops and "
        "returns the rows it read with a cursor that goes on from the page it could not read; "
        "a first page larger than this is refused.")
    duckdb_memory_limit: str = Field(
        default="512MB", pattern=r"(?i)^\d+(\.\d+)?\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)$",
        description="Memory a server's DuckDB engine may use for query intermediates and its "
        "buffer cache (DuckDB memory_limit, e.g. 512MB or 2GiB); beyond it a query spills to "
        "disk or fails with a message naming this key. Only serving connections: tether build "
        "and check profile with the engine's default.")
    duckdb_threads: int | None = Field(
        default=None, ge=1, description="Threads a server's DuckDB engine runs queries on "
        "(default: one per core).")
    duckdb_max_temp_size: str = Field(
        default="2GB", pattern=r"(?i)^\d+(\.\d+)?\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)$",
        description="Most disk a server's DuckDB engine may spill to, in a folder beside the "
        "database file (DuckDB max_temp_directory_size).")
    fingerprint_ttl_seconds: float = Field(
        default=0, ge=0, description="When > 0, a call checks (at most once per this many "
        "seconds per product) that its products still have the schema the tool was generated "
        "from, and adds schema_drift to the result when not. 0: off (tether check does it).")
    dedicated_tools: Literal["all", "none"] | list[str] | None = Field(
        default=None, description="Products served with their own listing tool: all, none, or "
        "a list of product names; the rest are reached through find_data_for_question, "
        "explain_data_product and rows_from_data_product. Default: all while the tool list "
        "fits tool_list_token_budget, else none. Governed metrics always keep their tool.")
    tool_list_token_budget: int = Field(
        default=8000, ge=500, description="Most tokens a tools/list may hold (name, "
        "description and schemas, counted with cl100k_base); a project whose dedicated tools "
        "alone exceed it is an error.")
    confirmation_seconds: int = Field(
        default=300, ge=10, le=86400, description="How long a write tool's dry-run "
        "confirmation stays valid.")
    calendar: str | None = Field(
        default=None, description="The calendar every tool reads quarter and year words in "
        "(this_quarter, last_year, QTD, YTD; 'last calendar quarter' and yyyy-Qn stay calendar "
        "ones): a name in `calendars`. A governed metric keeps its own `calendar`. Default: the "
        "project's one fiscal calendar (a start month other than January) when it declares "
        "exactly one, else calendar quarters.")
    max_path_hops: int = Field(
        default=2, ge=0, le=4, description="How many many-to-one relationships a listing's "
        "filters, count_by and order_by may follow to reach another product's columns "
        "(Shelf.Label from a box; Box.Shelf.Label two hops away); 0: none.")
    health_seconds: float = Field(
        default=10.0, ge=0.5, le=3600, description="Seconds between a server's checks of what "
        "it can read: a product closed (its table gone, its source down, a rule guarding it "
        "that no longer compiles) opens again once it can be read, and a product whose table "
        "its source no longer lists is checked and closed.")
    session_tools: bool = Field(
        default=True, description="A product a caller finds (find_data_for_question), "
        "explains (explain_data_product) or reads by name (rows_from_data_product) joins that "
        "session's tools/list as its own listing tool (tools/list_changed is sent), within "
        "tool_list_token_budget, least recently used products leaving first.")


class PageConfig(Model):
    command: str | None = Field(default=None, description="Shell command run to page a human.")
    webhook: str | None = Field(default=None, description="URL posted to page a human.")


class DriftConfig(Model):
    deprecation_days: int = Field(default=30, ge=0, description="Window a deprecated version lives.")
    vanish_after_checks: int = Field(
        default=3, ge=1, description="Checks a value must be absent before it is called vanished."
    )
    page: PageConfig | None = Field(default=None, description="How a blocked change pages a human.")
    audit_repo: str | None = Field(default=None, description="Git repo the audit trail goes to.")


class EvalConfig(Model):
    price_table: str | None = Field(default=None, description="YAML of per-model token prices.")
    regression_suite: str | None = Field(default=None, description="cases.jsonl run on check.")
    runs_dir: str = Field(default=".tether/runs", description="Folder of evaluation run "
                          "folders the console lists (each written by `tether eval run`).")


class ProfilingConfig(Model):
    """Caps that keep profiling one pass per table whatever the data (documented in docs/profiling.md)."""

    enum_max_values: int = Field(
        default=50, ge=1, description="A column with more distinct values is not an enum."
    )
    enum_max_columns: int = Field(
        default=30, ge=0, description="At most this many enum columns per product."
    )
    exact_distinct_below: int = Field(
        default=10_000,
        ge=0,
        description="Columns whose approximate distinct count is below this get exact counts "
        "and top values.",
    )
    top_values: int = Field(default=10, ge=0, description="Top values kept per column.")
    dormant_after_days: int = Field(
        default=365, ge=1, description="An enum value unseen this long is flagged deprecated."
    )


def api_product(config: TetherConfig, product: str) -> bool:
    """Whether ``product`` is read from an HTTP API (an `openapi` source), not with SQL."""
    p = config.products.get(product)
    if p is None or not config.sources:
        return False
    source = config.sources.get(p.source or next(iter(config.sources)))
    return source is not None and source.kind == "openapi"


def reference_of(config: TetherConfig, product: str, column: str,
                 keyed_by: Callable[[tuple[str, ...]], list[str]] | None = None
                 ) -> tuple[str, str] | None:
    """The product whose single-column key ``product.column`` holds, and that key: by name
    (legs.shipment_id -> shipments.shipment_id), else by a many-to-one relationship in
    tether.yaml (legs.port -> ports.code). A product's own key refers to no sibling keyed
    alike (one-to-one). ``keyed_by``: an index of products by primary key (else a scan)."""
    if config.products[product].primary_key == [column]:
        return None
    keyed = keyed_by((column,)) if keyed_by is not None else [
        n for n, p in config.products.items() if p.primary_key == [column]]
    by_name = next((other for other in keyed if other != product), None)
    if by_name is not None:
        return by_name, column
    for r in config.relationships:
        here, _, col = r.from_.partition(".")
        there, _, key = r.to.partition(".")
        target = config.products.get(there)
        if (r.kind in ("many_to_one", "one_to_one") and (here, col) == (product, column)
                and there != product and target is not None and target.primary_key == [key]):
            return there, key
    return None


class TetherConfig(Model):
    """The whole of tether.yaml."""

    clock: datetime | None = Field(default=None, description="Fixed 'now' (tests, demos).")
    sources: dict[str, SourceConfig] = Field(description="Data sources by name.")
    products: dict[str, ProductConfig] = Field(default_factory=dict, description="Data products.")
    identifier_schemes: dict[str, IdentifierScheme] = Field(
        default_factory=dict, description="Identifier schemes by name."
    )
    glossary: dict[str, GlossaryTerm] = Field(default_factory=dict, description="Business terms.")
    glossary_dir: str | None = Field(
        default=None, description="A folder of Markdown glossary documents, one term per file "
        "(front matter: predicate or measure, fields, synonyms, owner; the body is the "
        "definition), relative to the project; tether.yaml's glossary overrides them key by key.")
    metrics: dict[str, MetricConfig] = Field(default_factory=dict, description="Governed metrics.")
    calendars: dict[str, CalendarConfig] = Field(default_factory=dict, description="Calendars.")
    ci: CiConfig = Field(default_factory=CiConfig, description="`tether ci`: findings accepted.")
    policies: PoliciesConfig = Field(default_factory=PoliciesConfig, description="Access policy.")
    relationships: list[Relationship] = Field(
        default_factory=list, description="Join paths between products that are not identifier "
        "schemes (a lookup table keyed by a code).")
    lineage: list[LineageEdge] = Field(default_factory=list, description="Lineage edges.")
    registry: RegistryConfig = Field(default_factory=RegistryConfig, description="Registry.")
    serve: ServeConfig = Field(default_factory=ServeConfig, description="Server settings.")
    drift: DriftConfig = Field(default_factory=DriftConfig, description="Drift settings.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Evaluation settings.")
    profiling: ProfilingConfig = Field(default_factory=ProfilingConfig, description="Profiler caps.")

    @field_validator("clock")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            return v.replace(tzinfo=UTC)
        return v
