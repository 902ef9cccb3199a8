"""The project file ``tether.yaml``: its model and a loader whose errors name file, line and key.

Every section is a pydantic model with ``extra="forbid"``, so a typo'd key is an error, not a
silently ignored setting. ``docs/config.md`` is the
reference, and a test checks that every key here appears there.
"""

from __future__ import annotations

import difflib
import os
import re
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tether.errors import ConfigError
from tether.textfiles import check_yaml_aliases, read_text

PROJECT_FILE = "tether.yaml"
USER_TEMPLATE = re.compile(r"\{\{\s*user\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
"""`{{ user.ATTRIBUTE }}` in a row filter: the one definition every reader of templates uses (it
becomes a bound parameter, never text)."""
PII_SELECTOR = "pii"
"""A role's ``masks`` key that means every column classified pii."""

Loc = tuple[str | int, ...]


class Model(BaseModel):
    """Base for every section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --- sources -------------------------------------------------------------------------------------


class SourceConfig(Model):
    url: str = Field(
        description="A DuckDB file (`duckdb:///path.duckdb` or a plain path ending in .duckdb; "
        "relative to the project) or any SQLAlchemy URL (`postgresql://user@host/db`)."
    )
    schema_: str | None = Field(
        default=None,
        alias="schema",
        description="Schema that unqualified table names resolve in (default: the engine's).",
    )


# --- products ------------------------------------------------------------------------------------


CLOCK_TEMPLATE = re.compile(r"\{\{\s*clock\s*\}\}")
"""`{{ clock }}` in a freshness condition: the project clock, as a bound parameter."""


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

    def condition(self, dialect: str) -> Any:
        """The ``where`` condition as a sqlglot expression, ``{{ clock }}`` as the placeholder
        ``:clock`` (None without one). Raises sqlglot's ParseError on bad SQL."""
        if self.where is None:
            return None
        import sqlglot

        return sqlglot.parse_one(CLOCK_TEMPLATE.sub(":clock", self.where), read=dialect)


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
        "metric time).",
    )
    max_rows: int = Field(default=200, ge=1, le=10_000, description="Most rows one call returns.")

    @field_validator("name")
    @classmethod
    def _tool_name(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,63}", v):
            raise ValueError("a tool name is 1-64 letters, digits, _ or -, starting with a letter")
        return v


class ProductConfig(Model):
    source: str | None = Field(default=None, description="Source name (default: the only source).")
    table: str | None = Field(default=None, description="Table or view, optionally schema.table.")
    sql: str | None = Field(default=None, description="A single SELECT defining the product.")
    description: str | None = Field(default=None, description="What one row is, in plain words.")
    grain: str | None = Field(default=None, description="One row per ..., in plain words.")
    owner: str | None = Field(default=None, description="Who answers for this product.")
    primary_key: list[str] = Field(default_factory=list, description="Columns identifying a row.")
    time_columns: dict[str, str] = Field(
        default_factory=dict, description="Timestamp/date columns and the time zone of each."
    )
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

    @field_validator("primary_key", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _table_or_sql(self) -> ProductConfig:
        if (self.table is None) == (self.sql is None):
            raise ValueError("give exactly one of `table:` or `sql:`")
        return self

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


class RoleConfig(Model):
    tools: list[str] = Field(default_factory=lambda: ["*"], description="Visible tools (globs).")
    tables: TableRule = Field(
        default_factory=TableRule,
        description="Which products the role may read at all, through any tool, run_sql, the "
        "probe or search; a denied product is absent for the role.")
    row_filters: dict[str, str] = Field(
        default_factory=dict,
        description="product -> SQL predicate; `{{ user.attr }}` becomes a bound parameter.",
    )
    masks: dict[str, Literal["redact", "hash", "null"]] = Field(
        default_factory=dict, description="product.column -> mask (redact | hash | null); the "
        "selector `pii` masks every column classified pii."
    )
    description: str | None = Field(default=None, description="Who holds the role.")


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


class Relationship(Model):
    from_: str = Field(alias="from", description="product.column holding the key (e.g. a code).")
    to: str = Field(description="product.column it refers to (a lookup table's key).")
    kind: Literal["many_to_one", "one_to_many", "one_to_one"] = Field(
        default="many_to_one", description="How many rows of each side meet.")


class LineageEdge(Model):
    from_: str = Field(alias="from", description="Upstream node (source table, transform, product).")
    to: str = Field(description="Downstream node.")
    via: str | None = Field(default=None, description="Transform the edge goes through.")


# --- operations ----------------------------------------------------------------------------------


class RegistryConfig(Model):
    url: str = Field(default="sqlite:///.tether/registry.db", description="Registry database.")


class ServeConfig(Model):
    tokens_file: str = Field(default=".tether/tokens.json", description="Hashed bearer tokens.")
    cursor_key_file: str = Field(default=".tether/cursor.key", description="Cursor signing key.")
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
    fingerprint_ttl_seconds: float = Field(
        default=0, ge=0, description="When > 0, a call checks (at most once per this many "
        "seconds per product) that its products still have the schema the tool was generated "
        "from, and adds schema_drift to the result when not. 0: off (tether check does it).")


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


class TetherConfig(Model):
    """The whole of tether.yaml."""

    clock: datetime | None = Field(default=None, description="Fixed 'now' (tests, demos).")
    sources: dict[str, SourceConfig] = Field(description="Data sources by name.")
    products: dict[str, ProductConfig] = Field(default_factory=dict, description="Data products.")
    identifier_schemes: dict[str, IdentifierScheme] = Field(
        default_factory=dict, description="Identifier schemes by name."
    )
    glossary: dict[str, GlossaryTerm] = Field(default_factory=dict, description="Business terms.")
    metrics: dict[str, MetricConfig] = Field(default_factory=dict, description="Governed metrics.")
    calendars: dict[str, CalendarConfig] = Field(default_factory=dict, description="Calendars.")
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


# --- the loaded project --------------------------------------------------------------------------


class Project:
    """A loaded tether.yaml with its directory and the line of every key, for error messages."""

    def __init__(self, root: Path, config: TetherConfig, lines: dict[Loc, int], path: Path):
        self.root = root
        self.config = config
        self.path = path
        self._lines = lines

    def where(self, *loc: str | int) -> str:
        """``tether.yaml:LINE`` for the deepest known prefix of ``loc``."""
        return f"{self.path.name}:{_line_for(self._lines, loc)}"

    def now(self) -> datetime:
        """The clock if fixed in tether.yaml, else the wall clock (UTC)."""
        return self.config.clock or datetime.now(UTC)

    def product(self, name: str) -> ProductConfig:
        try:
            return self.config.products[name]
        except KeyError:
            raise ConfigError(
                f"there is no product named {name!r}.",
                where=self.path.name,
                hint=_did_you_mean(name, self.config.products) + " Products: "
                + (", ".join(sorted(self.config.products)) or "(none)") + ".",
            ) from None

    def source_name(self, product: str) -> str:
        p = self.product(product)
        return p.source or next(iter(self.config.sources))


def load_project(project_dir: str | Path = ".") -> Project:
    """Read and validate ``tether.yaml`` in ``project_dir``; every error names file and line."""
    root = Path(project_dir).resolve()
    path = root / PROJECT_FILE
    if not path.exists() and not path.is_symlink():
        hint = (
            "Run `tether init --source URL` to write one from a live source, or "
            "`tether demo init` for the embedded demo; or pass --project DIR."
        )
        raise ConfigError(f"no {PROJECT_FILE} in {root}.", hint=hint)
    if path.is_dir():
        raise ConfigError(f"the project file {PROJECT_FILE} is a directory, not a file.",
                          where=str(path), hint="Move the directory away and write tether.yaml "
                          "there (`tether init --source URL`), or pass --project DIR.")
    # unreadable, binary or non-UTF-8: one paragraph naming the file (and the line, the byte)
    text = read_text(path, f"the project file {PROJECT_FILE}",
                     hint=f"{PROJECT_FILE} must be a UTF-8 YAML file (docs/config.md).")
    return parse_project(text, path)


def parse_project(text: str, path: Path) -> Project:
    """Validate the text of a project file that lives at ``path``."""
    data, lines = _read_yaml(text, path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            "the top level must be a mapping of sections (sources:, products:, ...).",
            where=f"{path.name}:1",
            hint="See docs/config.md for the skeleton.",
        )
    data = _interpolate(data, (), lines, path)
    try:
        config = TetherConfig.model_validate(data)
    except ValidationError as e:
        raise _explain(e, lines, path) from None
    project = Project(path.parent, config, lines, path)
    _cross_check(project)
    return project


# --- YAML with line numbers ----------------------------------------------------------------------


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader that refuses duplicate keys (a silent last-one-wins is a classic config bug).

    Aliases are checked before the document is built (:func:`tether.textfiles.check_yaml_aliases`):
    a recursive alias, or aliases adding more than ``ALIAS_BUDGET`` (100,000) nodes when expanded
    (an alias bomb), is a ConfigError naming the file and line."""

    file_name = PROJECT_FILE


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # `<<: *defaults`: merged keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:  # construct_mapping reports an unhashable key with its line
            continue
        if key in seen:
            raise ConfigError(
                f"key {key!r} appears twice in one mapping (first on line {seen[key]}).",
                where=f"{loader.file_name}:{key_node.start_mark.line + 1}",
                hint="Keep one of them; YAML would silently keep only the last.",
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_MERGE_TAG = "tag:yaml.org,2002:merge"
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(text: str, path: Path) -> tuple[Any, dict[Loc, int]]:
    try:
        check_yaml_aliases(text, path.name)  # before anything is built or walked
        loader = _Loader(text)  # one parse: the nodes give line numbers, then the values
        loader.file_name = path.name
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        raise ConfigError(
            f"this is not valid YAML: {e.problem or e}"
            + (f" ({e.context})" if e.context else "")
            + ".",
            where=f"{path.name}:{line}",
            hint="Check indentation and quoting on that line (a ':' inside a value needs quotes).",
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"this is not valid YAML: {e}.", where=path.name) from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _index(node, (), lines)
    return data, lines


def _index(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    """The line of every key and item, by location. Iterative (no recursion limit); an aliased
    node is walked at each place it is used, which the alias budget keeps bounded."""
    todo: list[tuple[yaml.Node, Loc]] = [(node, loc)]
    while todo:
        node, loc = todo.pop()
        out.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value
                out[(*loc, key)] = k.start_mark.line + 1
                todo.append((v, (*loc, key)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                out[(*loc, i)] = item.start_mark.line + 1
                todo.append((item, (*loc, i)))


def _line_for(lines: dict[Loc, int], loc: Loc) -> int:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return 1


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(value: Any, loc: Loc, lines: dict[Loc, int], path: Path) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string with the environment's value."""
    if isinstance(value, dict):
        return {k: _interpolate(v, (*loc, k), lines, path) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*loc, i), lines, path) for i, v in enumerate(value)]
    if isinstance(value, str) and "${" in value:

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{_dotted(loc)} uses ${{{name}}}, but the environment variable {name} is not set.",
                where=f"{path.name}:{_line_for(lines, loc)}",
                hint=f"Export {name} before running tether, or write ${{{name}:-default}}.",
            )

        return _ENV.sub(sub, value)
    return value


# --- turning pydantic errors into one paragraph --------------------------------------------------


def _dotted(loc: Loc) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class that owns the mapping at ``loc`` (for 'did you mean' hints)."""
    model: Any = TetherConfig
    for part in loc:
        if isinstance(model, _MapOf):  # a map key (a product name, a user name)
            model = _unwrap(model.value)
            continue
        if isinstance(part, int):  # a list index: _unwrap already stepped into the item
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = _field_by_key(model, str(part))
        if field is None:
            return None
        model = _unwrap(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _field_by_key(model: type[BaseModel], key: str) -> Any:
    for name, f in model.model_fields.items():
        if key in (name, f.alias):
            return f
    return None


def _unwrap(annotation: Any) -> Any:
    """dict[str, M] -> marker for map of M; M | None -> M; list[M] -> M."""
    args: tuple[Any, ...] = getattr(annotation, "__args__", ())
    origin = getattr(annotation, "__origin__", None)
    if origin is dict:
        return _MapOf(args[1])
    if origin is list:
        return _unwrap(args[0])
    if args:  # Optional / Union
        for a in args:
            if a is not type(None):
                return _unwrap(a)
    return annotation


class _MapOf:
    def __init__(self, value: Any):
        self.value = value


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"Did you mean {close[0]!r}?" if close else ""


def _explain(err: ValidationError, lines: dict[Loc, int], path: Path) -> ConfigError:
    parts: list[str] = []
    first_line: int | None = None
    errors = list(_dedupe(err.errors()))[:5]
    for e in errors:
        loc = tuple(e["loc"])
        line = _line_for(lines, loc)
        first_line = first_line or line
        if e["type"] == "extra_forbidden":
            owner = _model_at(loc[:-1])
            allowed = _keys_of(owner) if owner else []
            hint = _did_you_mean(str(loc[-1]), allowed)
            msg = f"line {line}: unknown key {_dotted(loc)!r}."
            if hint:
                msg += f" {hint}"
            if allowed:
                msg += f" Allowed here: {', '.join(allowed)}."
            if " " in str(loc[-1]):
                msg += (" (A comma inside a {flow: mapping} value splits it into keys: quote the "
                        "value.)")
        elif e["type"] == "missing":
            msg = f"line {line}: {_dotted(loc)!r} is required but missing."
        else:
            msg = f"line {line}: {_dotted(loc)}: {e['msg']} (got {e.get('input')!r})."
        parts.append(msg)
    if len(parts) == 1:
        parts[0] = parts[0].split(": ", 1)[1]
    return ConfigError(
        " ".join(parts),
        where=f"{path.name}:{first_line or 1}",
        hint="Fix the key or value named; docs/config.md lists every key and its type.",
    )


def _dedupe(errors: list[Any]) -> Iterator[Any]:
    """Union members repeat one mistake several times; keep the first per location."""
    seen: set[Loc] = set()
    for e in errors:
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and "[" in p))
        if loc in seen:
            continue
        seen.add(loc)
        yield {**e, "loc": loc}


# --- references between sections -----------------------------------------------------------------

_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def _cross_check(project: Project) -> None:
    c = project.config
    problems: list[tuple[Loc, str]] = []
    if not c.sources:
        problems.append((("sources",), "at least one source is required"))
    for name, p in c.products.items():
        base: Loc = ("products", name)
        if p.source is not None and p.source not in c.sources:
            problems.append(
                ((*base, "source"), f"product {name!r} names unknown source {p.source!r}. "
                 + _did_you_mean(p.source, c.sources))
            )
        if p.source is None and len(c.sources) > 1:
            problems.append((base, f"product {name!r} must say `source:` (there are several)"))
        if p.metric_time and p.metric_time not in p.time_columns:
            problems.append(
                ((*base, "metric_time"),
                 f"metric_time {p.metric_time!r} is not one of time_columns "
                 f"({', '.join(p.time_columns) or 'none declared'})")
            )
        for col, tz in p.time_columns.items():
            if not _valid_tz(tz):
                problems.append(
                    ((*base, "time_columns", col),
                     f"{tz!r} is not a time zone name (use e.g. UTC or Europe/Berlin)")
                )
        for col, scheme in p.identifiers.items():
            if scheme not in c.identifier_schemes:
                problems.append(
                    ((*base, "identifiers", col),
                     f"identifier scheme {scheme!r} is not declared under identifier_schemes. "
                     + _did_you_mean(scheme, c.identifier_schemes))
                )
    for name, m in c.metrics.items():
        problems += _metric_problems(c, name, m)
        if m.calendar and m.calendar not in c.calendars:
            problems.append(
                (("metrics", name, "calendar"), f"metric {name!r} uses unknown calendar "
                 f"{m.calendar!r}. " + _did_you_mean(m.calendar, c.calendars))
            )
        if m.term and m.term not in c.glossary:
            problems.append(
                (("metrics", name, "term"), f"metric {name!r} names unknown glossary term "
                 f"{m.term!r}. " + _did_you_mean(m.term, c.glossary))
            )
    for i, rel in enumerate(c.relationships):
        for key, ref in (("from", rel.from_), ("to", rel.to)):
            table, dot, column = ref.partition(".")
            if not dot or not column:
                problems.append((("relationships", i, key),
                                 f"relationship {key} {ref!r} must be product.column"))
            elif table not in c.products:
                problems.append((("relationships", i, key),
                                 f"relationship {key} {ref!r} names unknown product {table!r}. "
                                 + _did_you_mean(table, c.products)))
    for term, g in c.glossary.items():
        if g.measure is not None:
            problems += [(("glossary", term, "measure"), msg)
                         for msg in _aggregate_problems(term, g.measure)]
    roles = c.policies.roles
    for uname, u in c.policies.users.items():
        if u.role not in roles:
            problems.append(
                (("policies", "users", uname, "role"),
                 f"user {uname!r} has unknown role {u.role!r}. " + _did_you_mean(u.role, roles))
            )
    for rname, r in roles.items():
        for product, pred in r.row_filters.items():
            loc: Loc = ("policies", "roles", rname, "row_filters", product)
            if product not in c.products:
                problems.append(
                    (loc, f"row filter for unknown product {product!r}. "
                     + _did_you_mean(product, c.products))
                )
            for ref in _TEMPLATE.findall(pred):
                if not re.fullmatch(r"user\.[A-Za-z_][A-Za-z0-9_]*", ref):
                    problems.append(
                        (loc, f"template {{{{ {ref} }}}} must be `{{{{ user.ATTRIBUTE }}}}`")
                    )
        for target in r.masks:
            mloc: Loc = ("policies", "roles", rname, "masks", target)
            table, dot, column = target.partition(".")
            if target == PII_SELECTOR:
                continue
            if not dot or not column:
                problems.append((mloc, f"mask target {target!r} must be product.column (or "
                                 f"the selector {PII_SELECTOR!r})"))
            elif table not in c.products:
                problems.append((mloc, f"mask target {target!r} names unknown product "
                                 f"{table!r}. " + _did_you_mean(table, c.products)))
        for key in ("allow", "deny"):
            for i, pattern in enumerate(getattr(r.tables, key)):
                if not _is_glob(pattern) and pattern not in c.products:
                    problems.append(
                        (("policies", "roles", rname, "tables", key, i),
                         f"tables.{key} names unknown product {pattern!r}. "
                         + _did_you_mean(pattern, c.products)))
    for i, entry in enumerate(c.policies.restricted):
        table, dot, column = entry.partition(".")
        if not dot or not column:
            problems.append((("policies", "restricted", i),
                             f"restricted entry {entry!r} must be product.column (globs allowed)"))
        elif not _is_glob(table) and table not in c.products:
            problems.append((("policies", "restricted", i),
                             f"restricted entry {entry!r} names unknown product {table!r}. "
                             + _did_you_mean(table, c.products)))
    if problems:
        loc, first = problems[0]
        rest = [f"line {_line_for(project._lines, lo)}: {msg.strip()}." for lo, msg in problems[1:5]]
        raise ConfigError(
            " ".join([first.strip().rstrip(".") + ".", *rest]),
            where=f"{project.path.name}:{_line_for(project._lines, loc)}",
            hint="Fix the reference so it names something declared in tether.yaml.",
        )


def _metric_problems(c: TetherConfig, name: str, m: MetricConfig) -> list[tuple[Loc, str]]:
    """Columns a metric names must be product.column; windows need what they are built on."""
    out: list[tuple[Loc, str]] = []
    refs: list[tuple[str, int | None, str]] = [
        ("dimensions", i, d) for i, d in enumerate(m.dimensions)]
    refs += [(k, None, v) for k, v in (("time", m.time), ("time_end", m.time_end)) if v]
    for key, index, ref in refs:
        loc: Loc = ("metrics", name, key) if index is None else ("metrics", name, key, index)
        table, dot, column = ref.partition(".")
        if not dot or not column or "." in column:
            out.append((loc, f"metric {name!r}: {ref!r} must be product.column"))
        elif table not in c.products:
            out.append((loc, f"metric {name!r}: {ref!r} names unknown product {table!r}. "
                        + _did_you_mean(table, c.products)))
    window = m.window or ("period" if m.calendar else "trailing")
    if window == "period" and not m.calendar:
        out.append((("metrics", name, "window"), f"metric {name!r}: window: period needs "
                    "`calendar:` (e.g. fiscal)"))
    if window in ("period", "trailing") and not m.time:
        out.append((("metrics", name), f"metric {name!r}: a {window} window needs `time:` "
                    "(product.column), or set window: current"))
    return out


def _aggregate_problems(term: str, sql: str) -> list[str]:
    """A measure must parse and aggregate (sum, count, avg, ...)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql)
    except sqlglot.errors.SqlglotError as e:
        return [f"the measure of {term!r} does not parse: {str(e).splitlines()[0]}"]
    if tree.find(exp.AggFunc) is None:
        return [f"the measure of {term!r} is not an aggregate (sum, count, avg, ...): {sql!r}"]
    return []


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _valid_tz(name: str) -> bool:
    if name.upper() == "UTC":
        return True
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
