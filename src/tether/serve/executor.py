"""Execute one tool call as one user: validate, push the policy into the query, run, shape.

Every result carries rows, row_count, as_of and units (and truncated and next_cursor where the
tool pages). Invalid arguments raise ToolError, whose message says what was wrong and what is
allowed; the server turns it into an `isError` result and stays up.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from sqlglot import exp

from tether.config import Project
from tether.context.profile import ProductProfile
from tether.context.schema import Column
from tether.errors import TetherError
from tether.policy.model import exposable, tool_visible
from tether.policy.pushdown import (
    mask_of,
    masked,
    row_filter,
    row_filter_applies,
    user_params,
    visible_columns,
)
from tether.profiling.fingerprint import schema_fingerprint
from tether.serve import pagination, sqlguard
from tether.sources import Source, open_source
from tether.toolgen.model import META_KEY, QueryPlan
from tether.toolgen.plan import (
    ArgumentError,
    call_params,
    compile_plan,
    qualified,
    window_bounds,
)


class ToolError(Exception):
    """A call the model can fix: the message says what was wrong and what is allowed."""


@dataclass
class Call:
    user: str
    tool: str
    version: str
    definition: dict[str, Any]
    plan: QueryPlan
    args: dict[str, Any]


@dataclass
class Executor:
    """Holds the project, one read-only connection per source, the cursor key and caches."""

    project: Project
    cursor_key: bytes
    sources: dict[str, Source] = field(default_factory=dict)
    profiles: dict[str, ProductProfile] = field(default_factory=dict)
    _sql_text: dict[tuple[Any, ...], str] = field(default_factory=dict)
    _fresh: dict[str, tuple[float, dt.datetime | None]] = field(default_factory=dict)
    _exposable: dict[str, list[Column]] = field(default_factory=dict)
    _fingerprints: dict[str, tuple[float, str | None]] = field(default_factory=dict)
    freshness_ttl: float = 2.0

    @property
    def timeout(self) -> float:
        return self.project.config.serve.statement_timeout_seconds

    def source(self, name: str | None) -> Source:
        key = name or next(iter(self.project.config.sources))
        if key not in self.sources:
            self.sources[key] = open_source(key, self.project.config.sources[key], self.project.root)
        return self.sources[key]

    def close(self) -> None:
        for s in self.sources.values():
            s.close()
        self.sources.clear()

    # --- fingerprint on call ---

    def schema_drift(self, call: Call) -> str | None:
        """With serve.fingerprint_ttl_seconds > 0: when a product below the tool no longer has
        the schema the tool was generated from, say so (recomputed at most once per TTL)."""
        ttl = self.project.config.serve.fingerprint_ttl_seconds
        ctx = call.definition.get("_meta", {}).get(META_KEY, {})
        published = ctx.get("schema_fingerprint")
        if not ttl or not published:
            return None
        want = {published} if isinstance(published, str) else set(published)
        now = time.monotonic()
        moved = []
        for product in ctx.get("products", []):
            at, fp = self._fingerprints.get(product, (-ttl - 1.0, None))
            if now - at > ttl:
                p = self.project.config.products.get(product)
                if p is None:
                    continue
                src = self.source(p.source)
                try:
                    rel = src.table_expr(p.table) if p.table else src.sql_expr(p.sql or "", product)
                    fp = schema_fingerprint(src.describe(rel, label=product))
                except TetherError:
                    fp = None  # gone altogether: the query itself will say so
                self._fingerprints[product] = (now, fp)
            if fp is not None and fp not in want:
                moved.append(product)
        if not moved:
            return None
        return (f"the schema of {', '.join(moved)} changed since {call.tool} {call.version} was "
                "generated: results may no longer match this definition; run tether check")

    # --- entry point ---

    def run(self, call: Call) -> dict[str, Any]:
        config = self.project.config
        if not tool_visible(config, call.user, call.tool):
            raise ToolError(f"unknown tool {call.tool!r} for this user")
        call = without_empty_cursor(call)
        validate(call.definition, call.args)
        self._refuse_masked_filters(call)
        kind = call.plan.kind
        handlers = {"list": self._list, "metric": self._metric, "probe": self._probe,
                    "catalog": self._catalog, "describe": self._describe, "sql": self._sql}
        try:
            if kind in handlers:
                return handlers[kind](call)
        except (ArgumentError, pagination.CursorError, sqlguard.GuardError) as e:
            raise ToolError(str(e)) from None
        except TetherError as e:  # policy refusals, a timeout, a source that is down
            raise ToolError(e.paragraph()) from None
        raise ToolError(f"tool {call.tool!r} has a plan of unknown kind {kind!r}")

    def _refuse_masked_filters(self, call: Call) -> None:
        """Filtering on a column masked for the caller would reveal its values one guess at a
        time, so such a filter is refused."""
        for f in call.plan.filters:
            table, _, column = f.column.rpartition(".")
            if call.args.get(f.param) is not None and mask_of(
                    self.project.config, call.user, table, column):
                raise ToolError(f"{f.param}: {column} is masked for your role, so it cannot be "
                                "used as a filter")

    # --- listing ---

    def _shape_key(self, call: Call) -> tuple[Any, ...]:
        """What the SQL text of a call depends on: tool, version, user, filters present."""
        present = tuple(sorted(k for k, v in call.args.items() if v is not None))
        return (call.tool, call.version, call.user, present)

    def _list(self, call: Call) -> dict[str, Any]:
        config, plan = self.project.config, call.plan
        product = plan.product or ""
        src = self.source(plan.source)
        args = _coerce_times(call.args, call.definition)
        params = call_params(plan, args, config, self.project.now())
        key = self._shape_key(call)
        if key not in self._sql_text:
            query, _ = compile_plan(plan, args, config, self.project.now())
            assert isinstance(query, exp.Select)
            query = _mask_projection(query, config, call.user, product)
            pred = row_filter(config, call.user, product, product, src.dialect)
            if pred is not None:
                query = query.where(pred)
            if call.args.get("cursor"):
                keys = [qualified(k) for k in plan.order_by]
                marks = [exp.Placeholder(this=f"k{i}") for i in range(len(keys))]
                query = query.where(exp.GT(this=exp.Tuple(expressions=keys),
                                           expression=exp.Tuple(expressions=marks)))
            self._sql_text[key] = src.render(query)
        if row_filter_applies(config, call.user, product):
            params.update(user_params(config, call.user))
        if call.args.get("cursor"):
            last = pagination.decode(self.cursor_key, str(call.args["cursor"]), call.user,
                                     call.tool, call.version, call.args)
            params.update({f"k{i}": v for i, v in enumerate(last)})
        names, raw = src.run_named(self._sql_text[key], params, self.timeout)
        rows = [dict(zip(names, map(jsonable, r), strict=True)) for r in raw]
        limit = int(params["limit"]) - 1
        truncated = len(rows) > limit
        rows = rows[:limit]
        next_cursor = None
        if truncated and rows:
            pk = [k.rsplit(".", 1)[-1] for k in plan.order_by]
            next_cursor = pagination.encode(self.cursor_key, call.user, call.tool, call.version,
                                            call.args, [rows[-1][k] for k in pk])
        return self._result(call, rows, [product], truncated=truncated, next_cursor=next_cursor,
                            paged=True)

    # --- metrics ---

    def _metric(self, call: Call) -> dict[str, Any]:
        config, plan = self.project.config, call.plan
        src = self.source(plan.source)
        now = self.project.now()
        query, params = compile_plan(plan, call.args, config, now)
        assert isinstance(query, exp.Select)
        products = _products(call.definition)
        dims = {f.param: f.column.rpartition(".") for f in plan.filters}
        projections = []
        for p in query.expressions:
            table, _, column = dims.get(p.alias_or_name, ("", "", ""))
            mask = mask_of(config, call.user, table, column) if table else None
            projections.append(masked(p.this if isinstance(p, exp.Alias) else p, mask)
                               .as_(p.alias_or_name) if mask else p)
        query.set("expressions", projections)
        for product in products:
            pred = row_filter(config, call.user, product, product, src.dialect)
            if pred is not None:
                query = query.where(pred)
                params.update(user_params(config, call.user))
        names = [p.alias_or_name for p in query.expressions]
        raw = src.query(query, params, self.timeout)
        rows = [dict(zip(names, map(jsonable, r), strict=True)) for r in raw]
        if plan.window is not None and plan.window.kind == "period":
            from tether.context.calendar import quarter_of

            start, _ = window_bounds(plan, call.args, config, now)
            cal = config.calendars[plan.window.calendar or ""]
            label = quarter_of(start.date(), cal.start_month, cal.year_named_by).label
            for r in rows:
                r["fiscal_quarter"] = label
        return self._result(call, rows, products, paged=False)

    # --- progressive disclosure ---

    def _probe(self, call: Call) -> dict[str, Any]:
        from tether.profiling import profile_product

        config = self.project.config
        product = str(call.args["product"])
        p = config.products[product]
        if product not in self.profiles:
            self.profiles[product] = profile_product(self.project, product,
                                                     source=self.source(p.source))
        prof = self.profiles[product]
        names = [c.column.name for c in prof.columns]
        shown = set(visible_columns(config, product, names))
        columns = []
        for c in prof.columns:
            if c.column.name not in shown:
                continue
            facts = p.columns.get(c.column.name)
            hidden = mask_of(config, call.user, product, c.column.name) is not None
            values = [] if hidden else [v.value for v in (c.enum or c.top_values)][:12]
            columns.append({"name": c.column.name, "type": c.column.type,
                            "description": facts.description if facts else None,
                            "unit": c.unit_hint, "values": [jsonable(v) for v in values]})
        terms = sorted(t for t, g in config.glossary.items()
                       if any(f.split(".")[0] == product for f in g.fields))
        upstream = [{"from": e.from_, "to": e.to, "via": e.via} for e in config.lineage
                    if e.to == product]
        return {"product": product, "grain": p.grain, "row_count": prof.row_count,
                "columns": columns,
                "definitions": [{"term": t, "definition": config.glossary[t].definition}
                                for t in terms],
                "lineage": upstream, "as_of": jsonable(prof.as_of)}

    # --- generic mode ---

    def _tables(self) -> dict[str, str]:
        return {(p.table or name).split(".")[-1].lower(): name
                for name, p in self.project.config.products.items() if p.table}

    def _catalog(self, call: Call) -> dict[str, Any]:
        rows = [{"table": t} for t in sorted(self._tables())]
        return {"rows": rows, "row_count": len(rows)}

    def _describe(self, call: Call) -> dict[str, Any]:
        tables = self._tables()
        name = str(call.args.get("table", "")).lower()
        if name not in tables:
            raise ToolError(f"unknown table {name!r}; tables: {', '.join(sorted(tables))}")
        rows = [{"column": c.name, "type": c.type, "nullable": c.nullable}
                for c in self._exposable_columns(tables[name])]
        return {"rows": rows, "row_count": len(rows)}

    def _exposable_columns(self, product: str) -> list[Column]:
        """A product's top-level columns that may be selected (described once per server)."""
        if product not in self._exposable:
            p = self.project.config.products[product]
            src = self.source(p.source)
            cols = src.describe(src.table_expr(p.table or product), label=product)
            shown = set(exposable(self.project.config, product, cols))
            self._exposable[product] = [c for c in cols if c.name in shown]
        return self._exposable[product]

    def _sql(self, call: Call) -> dict[str, Any]:
        config = self.project.config
        src = self.source(call.plan.source)
        tables = self._tables()
        query = sqlguard.check(str(call.args.get("sql", "")), src.dialect, tables)
        columns = {product: [c.name for c in self._exposable_columns(product)]
                   for product in set(tables.values())}
        secured = sqlguard.apply_policy(query, config, call.user, tables, columns, src.dialect,
                                        call.plan.max_rows)
        used = {p.name for p in secured.find_all(exp.Placeholder)}  # only filters in the query
        params = {k: v for k, v in user_params(config, call.user).items() if k in used}
        try:
            names, raw = src.run_named(src.render(secured), params, self.timeout)
        except TetherError as e:
            raise ToolError(f"the query failed: {e.message}") from None
        rows = [dict(zip(names, map(jsonable, r), strict=False)) for r in raw]
        truncated = len(rows) > call.plan.max_rows
        rows = rows[: call.plan.max_rows]
        return {"rows": rows, "row_count": len(rows), "truncated": truncated}

    # --- shaping ---

    def _result(self, call: Call, rows: list[dict[str, Any]], products: list[str], *,
                paged: bool, truncated: bool = False, next_cursor: str | None = None
                ) -> dict[str, Any]:
        out: dict[str, Any] = {"rows": rows, "row_count": len(rows)}
        if paged:
            out["truncated"] = truncated
            out["next_cursor"] = next_cursor
        out["as_of"] = self._as_of(products)
        units = _units(call.definition)
        if units:
            out["units"] = units
        return out

    def _as_of(self, products: list[str]) -> str | None:
        """The oldest of the products' newest freshness values (the data is as old as its
        stalest input)."""
        oldest: dt.datetime | None = None
        for product in products:
            value = self._freshness(product)
            if value is not None:
                oldest = value if oldest is None or value < oldest else oldest
        return oldest.isoformat() if oldest else None


    def _freshness(self, product: str) -> dt.datetime | None:
        """Newest value of the product's freshness column, cached for freshness_ttl seconds."""
        cached = self._fresh.get(product)
        if cached and time.monotonic() < cached[0]:
            return cached[1]
        p = self.project.config.products[product]
        value = None
        if p.freshness and p.freshness.column:
            src = self.source(p.source)
            q = exp.select(exp.func("MAX", exp.column(p.freshness.column, quoted=True))).from_(
                src.table_expr(p.table) if p.table else src.sql_expr(p.sql or "", product))
            raw = src.query(q)[0][0]
            if isinstance(raw, dt.datetime):
                value = raw if raw.tzinfo else raw.replace(tzinfo=dt.UTC)
        elif p.freshness and p.freshness.load_time:
            loaded = self.source(p.source).loaded_at()
            # a fixed project clock is "now": nothing was loaded after it
            value = min(loaded, self.project.now()) if loaded is not None else None
        self._fresh[product] = (time.monotonic() + self.freshness_ttl, value)
        return value


_VALIDATORS: dict[str, Any] = {}


def without_empty_cursor(call: Call) -> Call:
    """A first page asked for with a placeholder cursor (null, "", "null", "none": models write
    these) is a first page, not a forged cursor."""
    cursor = call.args.get("cursor", "?")
    if cursor is None or (isinstance(cursor, str) and cursor.strip().lower() in ("", "null", "none")):
        return dataclasses.replace(call, args={k: v for k, v in call.args.items() if k != "cursor"})
    return call


def validate(definition: dict[str, Any], args: dict[str, Any]) -> None:
    """Arguments against the tool's inputSchema; unknown arguments are refused too."""
    schema = definition.get("inputSchema") or {"type": "object"}
    allowed = set(schema.get("properties", {}))
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ToolError(f"unknown argument(s) {', '.join(unknown)}; allowed: "
                        f"{', '.join(sorted(allowed)) or 'none'}")
    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:
        _VALIDATORS[key] = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(_VALIDATORS[key].iter_errors(args), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.path) or "arguments"
        described = schema.get("properties", {}).get(where, {}).get("description", "")
        if e.validator == "enum":
            msg = (f"{e.instance!r} is not allowed; allowed values: "
                   f"{', '.join(map(str, e.validator_value))}")
        elif e.validator == "pattern":
            msg = f"{e.instance!r} does not fit the format {e.validator_value}"
        else:
            msg = e.message
        raise ToolError(f"{where}: {msg}" + (f". {described}" if described else ""))


def _coerce_times(args: dict[str, Any], definition: dict[str, Any]) -> dict[str, Any]:
    """ISO date-time strings -> aware datetimes (UTC when no offset); a bad one is a ToolError."""
    props = (definition.get("inputSchema") or {}).get("properties", {})
    out = dict(args)
    for name, value in args.items():
        if props.get(name, {}).get("format") == "date-time" and isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ToolError(f"{name}: {value!r} is not an ISO 8601 date-time; write e.g. "
                                "2026-08-01T00:00:00Z") from None
            out[name] = parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return out


def _mask_projection(query: exp.Select, config: Any, user: str, product: str) -> exp.Select:
    projections = []
    for p in query.expressions:
        name = p.alias_or_name
        mask = mask_of(config, user, product, name)
        projections.append(masked(p, mask).as_(name, quoted=True) if mask else p)
    query.set("expressions", projections)
    return query


def _products(definition: dict[str, Any]) -> list[str]:
    return list((definition.get("_meta") or {}).get(META_KEY, {}).get("products", []))


_UNIT = re.compile(r"unit: ([^;.)]+)", re.I)


def _units(definition: dict[str, Any]) -> dict[str, str]:
    out = {}
    rows = (((definition.get("outputSchema") or {}).get("properties") or {}).get("rows") or {})
    for name, schema in ((rows.get("items") or {}).get("properties") or {}).items():
        m = _UNIT.search(str(schema.get("description", "")))
        if m and m.group(1).strip().lower() not in ("number", "key, no unit"):
            out[name] = m.group(1).strip()
    return out


def jsonable(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return (v if v.tzinfo else v.replace(tzinfo=dt.UTC)).isoformat()
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    return v

