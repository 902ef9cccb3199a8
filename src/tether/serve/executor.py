"""Execute one tool call as one user: validate, read through the policy path, run, shape.

Every read of a product goes through the caller's entitled relation (policy/entitle.py): the
product's table in a query is replaced by it, so row filters, masks, restricted columns and
denied tables hold for listings, metrics, run_sql, the probe and freshness alike. Every result
carries rows, row_count, as_of and units (and truncated and next_cursor where the tool pages),
read under the per-call caps on rows and bytes. Invalid arguments raise ToolError, whose message
says what was wrong and what is allowed; a refusal carries its reason.
"""

from __future__ import annotations

import copy
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

from tether.config import Project, TetherConfig
from tether.context import timeformat
from tether.context.meta import MASK_KEY_SHOWN, Evidence, ToolContext, enum_of, with_enum
from tether.context.names import ref_column
from tether.context.profile import ProductProfile
from tether.context.schema import Column
from tether.context.timeformat import to_time
from tether.errors import QueryError, TetherError
from tether.keyfile import load_secret
from tether.policy import inherit, templates
from tether.policy.entitle import (
    MASK_KEY_PARAMS,
    NOT_YOURS,
    Entitled,
    MaskKey,
    Refusal,
    column_masks,
    entitle,
    equality_scope,
    require_table,
    table_allowed,
)
from tether.policy.model import restricted_columns, role_of, tool_visible
from tether.profiling.fingerprint import schema_fingerprint
from tether.serve import pagination, sqlguard
from tether.serve.interpret import interpret
from tether.serve.kinds import Answered, Call, ToolError, runner
from tether.sources import Fetched, Source, open_source
from tether.toolgen.model import AGGREGATE, QueryPlan
from tether.toolgen.plan import (
    ArgumentError,
    chosen_route,
)


@dataclass
class Executor:
    """Holds the project, one read-only connection per source, the keys and caches."""

    project: Project
    cursor_key: bytes
    mask_key: MaskKey | None = None
    sources: dict[str, Source] = field(default_factory=dict)
    profiles: dict[str, ProductProfile] = field(default_factory=dict)
    sql_texts: dict[tuple[Any, ...], tuple[str, str, dict[str, Any]]] = field(
        default_factory=dict)
    """(text the driver runs, text evidence shows, the policy's bound values) per tool, version,
    user, filters present and the schemes identifiers were read as"""
    _fresh: dict[tuple[Any, ...], tuple[float, dt.datetime | None]] = field(default_factory=dict)
    _columns: dict[str, list[Column]] = field(default_factory=dict)
    _relations: dict[tuple[str, str, bool], Entitled] = field(default_factory=dict)
    _catalog: dict[str, set[str]] = field(default_factory=dict)
    _fingerprints: dict[str, tuple[float, str | None]] = field(default_factory=dict)
    probes: dict[tuple[Any, ...], tuple[float, dict[str, Any]]] = field(default_factory=dict)
    statements: dict[tuple[Any, ...], tuple[str, dict[str, Any], list[str], str]] = field(
        default_factory=dict)
    memo: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    freshness_ttl: float = 2.0

    @property
    def timeout(self) -> float:
        return self.project.config.serve.statement_timeout_seconds

    def source(self, name: str | None) -> Source:
        key = name or next(iter(self.project.config.sources))
        if key not in self.sources:
            self.sources[key] = open_source(key, self.project.config.sources[key], self.project.root,
                                            self.project.config.serve)
        return self.sources[key]

    def close(self) -> None:
        for s in self.sources.values():
            s.close()
        self.sources.clear()

    # --- the policy path ---

    def keys(self) -> MaskKey:
        if self.mask_key is None:
            path = self.project.root / self.project.config.serve.mask_key_file
            self.mask_key = MaskKey.from_secret(load_secret(path))
        return self.mask_key

    def columns(self, product: str) -> list[Column]:
        """The product's top-level columns as its source describes them (read once); a SQL
        product's as it reads other products (their restricted columns absent)."""
        if product not in self._columns:
            p = self.project.config.products[product]
            src = self.source(p.source)
            self._columns[product] = src.describe(self.base(product), label=product)
        return self._columns[product]

    def base(self, product: str, user: str | None = None, seen: tuple[str, ...] = ()
             ) -> exp.Expr:
        """The product as it is: its table, or its SQL as a subquery, whose tables that hold
        other products read those products through the policy (policy/inherit.py): as
        ``user`` may read them, or (no user) less their restricted columns."""
        p = self.project.config.products[product]
        src = self.source(p.source)
        if p.table:
            return src.table_expr(p.table)
        query = src.sql_expr(p.sql or "", product)
        chain = inherit.chain(product, seen)

        def read(other: str, alias: str) -> exp.Expr:
            if user is not None:
                return self.relation(user, other, seen=chain).subquery(alias)
            return inherit.visible(self.project.config, other, self.base(other, None, chain),
                                   self.columns(other), alias)

        inherit.through(self.project.config, product, query.this, read)
        return query

    def relation(self, user: str, product: str, fence: bool = False,
                 seen: tuple[str, ...] = ()) -> Entitled:
        """What ``user`` may read of ``product`` (Refusal for a denied product); ``fence`` for
        SQL the caller wrote (policy/entitle.py). A SQL product's relation reads the products
        its SQL names as ``user`` may read them: it inherits their filters and masks."""
        key = (user, product, fence)
        if key not in self._relations:
            config = self.project.config
            src = self.source(config.products[product].source)
            masks = column_masks(config, user, product)
            require_table(config, user, product)
            inner = [self.relation(user, q, seen=inherit.chain(product, seen))
                     for q in inherit.reads(config, product, src.dialect)]
            rel = entitle(
                config, user, product, self.columns(product), self.base(product, user, seen),
                src.dialect, self.keys() if "hash" in masks.values() else None, fence=fence)
            if inner:
                rel = dataclasses.replace(rel, inner=tuple(inner), params={
                    k: v for r in inner for k, v in r.params.items()} | rel.params)
            self._relations[key] = rel
        return self._relations[key]

    def secure(self, query: exp.Expr, user: str) -> tuple[exp.Expr, dict[str, Any]]:
        """A plan's query with each product it reads (a FROM or JOIN source aliased by the
        product's name) replaced by the user's entitled relation, and that relation's params.
        :func:`reads` names those products."""
        products = self.project.config.products
        found: dict[int, str] = {}
        for node in query.find_all(exp.Table, exp.Subquery):
            alias = node.alias
            if alias in products and isinstance(node.parent, exp.From | exp.Join):
                found[id(node)] = alias
        # every other table it names would be read as it is, past the policy: a table in a
        # CTE or a subquery of a measure, a table function. Such a statement is not run.
        covered = {id(t) for node in query.find_all(exp.Table, exp.Subquery)
                   if id(node) in found for t in node.find_all(exp.Table)}
        for t in query.find_all(exp.Table):
            if id(t) not in covered:
                raise ToolError(f"this tool's statement reads {t.sql()[:80]}, which is not a "
                                "data product read through your policy; it is not run (fix "
                                "the metric's SQL in tether.yaml or its import)")
        params: dict[str, Any] = {}

        def swap(node: exp.Expr) -> exp.Expr:
            product = found.get(id(node))
            if product is None:
                return node
            rel = self.relation(user, product)
            params.update(rel.params)
            return rel.subquery(product)

        return query.transform(swap, copy=False), params

    def reads(self, query: exp.Expr) -> list[str]:
        """The products a plan's query reads (FROM and JOIN sources aliased by product name)."""
        products = self.project.config.products
        return sorted({n.alias for n in query.find_all(exp.Table, exp.Subquery)
                       if n.alias in products and isinstance(n.parent, exp.From | exp.Join)})

    def scope_key(self, user: str) -> tuple[str, str]:
        """Users whose role and attributes are equal read the same relations."""
        key = ("scope", user)
        if key not in self.memo:  # asked on every call: worked out once per user
            role, _ = role_of(self.project.config, user)
            attrs = self.project.config.policies.users[user].attributes()
            self.memo[key] = (role, json.dumps(attrs, sort_keys=True, default=str))
        found: tuple[str, str] = self.memo[key]
        return found

    def fetch(self, src: Source, sql: str, params: dict[str, Any], max_rows: int,
              known: tuple[str, ...] = ()) -> Fetched:
        """Run under the per-call caps and timeout; an engine error's text is scrubbed of
        values the caller did not write (they may come from rows outside the entitlement)."""
        serve = self.project.config.serve
        try:
            return src.fetch(sql, params, self.timeout, min(max_rows, serve.max_result_rows),
                             serve.max_result_bytes)
        except QueryError as e:
            raise ToolError("the query failed: " + sqlguard.scrub(e.reason, *known)) from None

    # --- fingerprint on call ---

    def schema_drift(self, call: Call) -> str | None:
        """With serve.fingerprint_ttl_seconds > 0: when a product below the tool no longer has
        the schema the tool was generated from, say so (recomputed at most once per TTL)."""
        ttl = self.project.config.serve.fingerprint_ttl_seconds
        ctx = ToolContext.of(call.definition)
        published = ctx.schema_fingerprint
        if not ttl or not published:
            return None
        want = {published} if isinstance(published, str) else set(published)
        now = time.monotonic()
        moved = []
        for product in ctx.products:
            at, fp = self._fingerprints.get(product, (-ttl - 1.0, None))
            if now - at > ttl:
                if product not in self.project.config.products:
                    continue
                src = self.source(self.project.config.products[product].source)
                try:
                    fp = schema_fingerprint(src.describe(self.base(product), label=product))
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
        """The call's result (see :meth:`answer` for the evidence beside it)."""
        return self.answer(call).result

    def answer(self, call: Call) -> Answered:
        config = self.project.config
        if not tool_visible(config, call.user, call.tool):
            raise ToolError(f"unknown tool {call.tool!r} for this user")
        call = without_blanks(call)

        said: dict[str, Any] = {}

        kind = runner(call.plan.kind)
        try:
            if kind is None or kind.run is None:
                raise ToolError(f"tool {call.tool!r} has a plan of kind {call.plan.kind!r}, "
                                "which this server does not run here")
            reads = kind.reads(self, call) if kind.reads else (
                definition_products(call.definition)
                or ([call.plan.product] if call.plan.product else []))
            for product in reads:
                if product in config.products and not table_allowed(config, call.user, product):
                    raise Refusal("denied_table", f"your role may not read {product}")
            self._refuse_restricted(call, reads)  # a restricted name, before any reading
            args, said = interpret(call.definition, call.plan, call.args, config)
            call = as_declared(dataclasses.replace(call, args=args) if said else call)
            self._refuse_filters(call)  # a value outside the scope: refused, whatever its enum
            validate(with_declared(call.definition, call.plan), call.args)
            answered = kind.run(self, call)
            answered.result.update(said)  # beside window: what was read as what
            stated, w = answered.result.get("window") or {}, call.plan.window
            if stated.get("start") and w is not None and w.column:  # the one window, again
                answered.evidence.window = {
                    "columns": [".".join(ref_column(c)) for c in (w.column, w.end_column) if c],
                    **{k: stated.get(k) for k in ("start", "end", "calendar", "label")}}
            return answered
        except Refusal as e:
            raise ToolError(e.paragraph(), refusal=e.meta()) from None
        except (ArgumentError, pagination.CursorError, sqlguard.GuardError) as e:
            raise ToolError(str(e)) from None
        except TetherError as e:  # a timeout, a source that is down
            raise ToolError(e.paragraph()) from None

    def restricted(self, product: str) -> set[str]:
        """Names of ``product``'s restricted columns and fields (bare, and qualified by the
        product), read once."""
        key = ("restricted", product)
        if key not in self.memo:
            leaves = [c.name for col in self.columns(product) for c in [col, *col.leaves()]]
            found = restricted_columns(self.project.config, product, leaves)
            self.memo[key] = {n.lower() for c in found for n in (c, c.rsplit(".", 1)[-1],
                                                                 f"{product}.{c}")}
        names: set[str] = self.memo[key]
        return names

    def _refuse_restricted(self, call: Call, reads: list[str]) -> None:
        """An argument named after a restricted column, or a count or total asked of one, is a
        `restricted` refusal: the column exists, and no one may have it through this server
        (an unknown argument otherwise; the schema's own parameters are never restricted)."""
        props = (call.definition.get("inputSchema") or {}).get("properties", {})
        # an object of arguments (`filter: {...}`) is read as its names (serve/interpret.py):
        # a restricted name inside one is refused as at the top
        given = {**call.args, **{k: v for x in call.args.values() if isinstance(x, dict)
                                 for k, v in x.items()}}
        asked = [k for k in given if k not in props]
        asked += [str(given[k]) for k in SHAPING if given.get(k) is not None]
        for product in reads:
            if product not in self.project.config.products:
                continue
            try:
                hidden = self.restricted(product)
            except TetherError:
                continue  # a product that is gone: the call says so
            for name in asked:
                if name.lower() in hidden:
                    raise Refusal("restricted", f"{name[:80]} is restricted: not available "
                                  "to anyone through this server")

    def policy_of(self, user: str, product: str) -> tuple[dict[str, str], dict[str, set[Any]]]:
        """(masks, the values a simple row filter pins) of ``user`` on ``product``, worked out
        once per server."""
        key = ("policy_of", user, product)
        if key not in self.memo:
            config = self.project.config
            self.memo[key] = (column_masks(config, user, product),
                              equality_scope(config, user, product))
        found: tuple[dict[str, str], dict[str, set[Any]]] = self.memo[key]
        return found

    def _refuse_filters(self, call: Call) -> None:
        """A filter on a column masked for the caller would reveal its values one guess at a
        time; a filter pinning a row-filtered column to a value outside the caller's scope asks
        for rows the caller may not see. Both are refused, not answered with nothing."""
        config = self.project.config
        for f in call.plan.filters:
            value = call.args.get(f.param)
            table, column = ref_column(f.column)
            if value is None or table not in config.products:
                continue
            route = chosen_route(f, value)
            if route is not None and route.via and route.match:
                # another scheme: the value is compared with the crosswalk's column, under
                # the crosswalk's policy (its row filter applies as it is read)
                table, column = route.via, route.match
                if table not in config.products:
                    continue
                masks, _ = self.policy_of(call.user, table)
                if column in masks:
                    raise Refusal("masked_predicate", f"{f.param}: {table}.{column} is masked "
                                  "for your role, so it cannot be used as a filter")
                continue
            masks, scope = self.policy_of(call.user, table)
            if column in masks:
                raise Refusal("masked_predicate", f"{f.param}: {column} is masked for your "
                              "role, so it cannot be used as a filter")
            allowed = scope.get(column)
            if f.op != "eq" or allowed is None:
                continue
            outside = [v for v in (value if isinstance(value, list) else [value])
                       if str(v) not in {str(a) for a in allowed}]
            if outside:
                raise Refusal("outside_entitlement", f"{f.param} {shown(outside)} is outside "
                              "your scope "
                              f"({column}: {', '.join(sorted(map(str, allowed)))})",
                              hint=NOT_YOURS)

    def now(self, call: Call) -> dt.datetime:
        """The call's "now", read once: its window is resolved once, so the statement's
        bounds, the result's window and the evidence agree even across midnight."""
        if call.at is None:
            call.at = self.project.now()
        return call.at

    # --- shaping ---

    def result(self, call: Call, rows: list[dict[str, Any]], products: list[str], *,
                paged: bool, truncated: bool = False, next_cursor: str | None = None
                ) -> dict[str, Any]:
        out: dict[str, Any] = {"rows": rows, "row_count": len(rows)}
        if paged:
            out["truncated"] = truncated
            out["next_cursor"] = next_cursor
        out["as_of"] = self.as_of(call.user, products)
        if out["as_of"] is not None:
            out["as_of_basis"] = self.as_of_basis(products)
        units = call.plan.units or definition_units(call.definition)  # a plan from before units
        if units:
            out["units"] = units
        return out

    def evidence(self, call: Call, src: Source, sql: str | None, params: dict[str, Any],
                 products: list[str], fenced: bool = False,
                 as_of: list[str] | None = None) -> Evidence:
        """What the call ran: the statement and its bound values (the mask key hidden), the
        products read, what the policy added, and the statement behind as_of (over ``as_of``,
        default the products read)."""
        bound = {k: MASK_KEY_SHOWN if k in MASK_KEY_PARAMS else jsonable(v)
                 for k, v in params.items()}
        fresh = as_of if as_of is not None else products
        key = ("evidence", call.user, tuple(products), fenced, tuple(fresh))
        if key not in self.memo:  # the policy's part and as_of's statement: once per user
            added: list[str] = []
            for p in products:
                if p in self.project.config.products:
                    added += self.relation(call.user, p, fence=fenced).policy_sql(src.display)
            self.memo[key] = (added, *self.as_of_statement(call.user, fresh))
        added, as_of_sql, as_of_params = self.memo[key]
        bound |= {k: jsonable(v) for k, v in as_of_params.items() if k not in bound}
        return Evidence(tool=call.tool, version=call.version, sql=sql, params=bound,
                        tables=list(products), policy_predicates=added, as_of_sql=as_of_sql,
                        dialect=src.dialect)

    def as_of_statement(self, user: str, products: list[str]
                        ) -> tuple[str | None, dict[str, Any]]:
        """One statement giving what as_of is made of: the oldest of the newest freshness values
        among the rows the user may read (products whose as_of is a load time add nothing)."""
        parts: list[exp.Expr] = []
        params: dict[str, Any] = {}
        src = None
        for product in products:
            p = self.project.config.products.get(product)
            if p is None or not (p.freshness and p.freshness.column):
                continue
            src = self.source(p.source)
            rel = self.relation(user, product)
            params |= rel.params
            part = exp.select(exp.func("MAX", exp.column(
                p.freshness.column, table="q", quoted=True)).as_("v")).from_(rel.subquery("q"))
            cond = templates.freshness_condition(p.freshness.where, src.dialect)
            if cond is not None:
                part = part.where(cond)
                params["clock"] = self.project.now()
            parts.append(part)
        if src is None or not parts:
            return None, {}
        if len(parts) == 1:
            return src.display(parts[0]), params
        union: exp.Expr = parts[0]
        for other in parts[1:]:
            union = exp.union(union, other, distinct=False)
        q = exp.select(exp.func("MIN", exp.column("v", table="t"))).from_(
            exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier("t"))))
        return src.display(q), params

    def as_of(self, user: str, products: list[str]) -> str | None:
        """The oldest of the products' newest freshness values (the data is as old as its
        stalest input), over what the user may read of each."""
        oldest: dt.datetime | None = None
        for product in products:
            value = self._freshness(user, product)
            if value is not None:
                oldest = value if oldest is None or value < oldest else oldest
        return oldest.isoformat() if oldest else None

    def as_of_basis(self, products: list[str]) -> str:
        """What as_of is, in words: the newest value of a time column in the data ("the
        newest debut"), or the source's last write where the data holds no time of its own (a
        file's modification time is never passed off as a time in the data)."""
        said: list[str] = []
        for product in products:
            p = self.project.config.products.get(product)
            f = p.freshness if p is not None else None
            if f is None:
                continue
            words = (f"the newest {f.column}" if f.column else
                     "the source's last write, not a time in the data")
            if words not in said:
                said.append(words)
        return "; ".join(said)

    def _freshness(self, user: str, product: str) -> dt.datetime | None:
        """Newest value of the product's freshness column among the rows the user may read,
        cached for freshness_ttl seconds per scope."""
        key = (product, *self.scope_key(user))
        cached = self._fresh.get(key)
        if cached and time.monotonic() < cached[0]:
            return cached[1]
        p = self.project.config.products[product]
        value = None
        if p.freshness and p.freshness.column:
            src = self.source(p.source)
            rel = self.relation(user, product)
            q = exp.select(exp.func("MAX", exp.column(p.freshness.column, table="q",
                                                      quoted=True))).from_(rel.subquery("q"))
            params = dict(rel.params)
            cond = templates.freshness_condition(p.freshness.where, src.dialect)
            if cond is not None:  # the newest past event, not a future booking
                q = q.where(cond)
                params["clock"] = self.project.now()
            raw = src.run(src.render(q), params, self.timeout)[0][0]
            value = as_time(raw, p.time_format(p.freshness.column))
        elif p.freshness and p.freshness.load_time:
            loaded = self.source(p.source).loaded_at()
            # a fixed project clock is "now": nothing was loaded after it
            value = min(loaded, self.project.now()) if loaded is not None else None
        self._fresh[key] = (time.monotonic() + self.freshness_ttl, value)
        return value


_VALIDATORS: dict[str, Any] = {}
_BY_OBJECT: dict[int, tuple[dict[str, Any], Any]] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """The schema's validator, built once per schema text; found by the schema object first (a
    definition's schema is the same object call after call, and writing its text to look it
    up cost more than checking the arguments)."""
    hit = _BY_OBJECT.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:
        _VALIDATORS[key] = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    if len(_BY_OBJECT) > 4096:  # definitions come and go with publications
        _BY_OBJECT.clear()
    _BY_OBJECT[id(schema)] = (schema, _VALIDATORS[key])
    return _VALIDATORS[key]


def known(call: Call) -> tuple[str, ...]:
    """Texts the caller wrote: what an engine error may quote back to them."""
    return (*(str(v) for v in call.args.values()), call.tool)


def without_blanks(call: Call) -> Call:
    """Arguments a model wrote as "nothing" are not given: a null or an empty string for any
    argument (models fill optional parameters with "" rather than leave them out), and a
    placeholder cursor ("null", "none") on a first page. A real value, however odd, stays and
    is validated."""
    def blank(v: Any) -> bool:
        return v is None or (isinstance(v, str) and not v.strip())

    def empty(key: str, v: Any) -> bool:
        if blank(v) or (isinstance(v, list) and all(blank(x) for x in v)):
            return True
        return key == "cursor" and isinstance(v, str) and v.strip().lower() in ("null", "none")

    def kept(v: Any) -> Any:  # a list's blank items are left out as well
        return [x for x in v if not blank(x)] if isinstance(v, list) else v

    if not any(empty(k, v) or kept(v) != v for k, v in call.args.items()):
        return call
    return dataclasses.replace(call, args={k: kept(v) for k, v in call.args.items()
                                           if not empty(k, v)})


def as_declared(call: Call) -> Call:
    """A single value for a parameter that takes several values of an enum at once is a list of
    one; a value given twice counts once. The other way round, a list of one for count_by or
    sum_and_average_of (which take one name) is that name."""
    several = {f.param for f in call.plan.filters if f.several}
    one = [k for k in SHAPING if isinstance(call.args.get(k), list) and len(call.args[k]) == 1]
    if not several & set(call.args) and not one:
        return call
    args = dict(call.args)
    for k in one:
        args[k] = args[k][0]
    for k in several & set(args):
        values = args[k] if isinstance(args[k], list) else [args[k]]
        args[k] = list({json.dumps(v, sort_keys=True, default=str): v for v in values}.values())
    return dataclasses.replace(call, args=args)


def shown(value: Any) -> str:
    """An argument as an answer or an error quotes it: several values joined with "or"."""
    if isinstance(value, list):
        return " or ".join(str(v)[:80] for v in value[:10]) + (" ..." if len(value) > 10 else "")
    return str(value)[:80]


def validate(definition: dict[str, Any], args: dict[str, Any]) -> None:
    """Arguments against the tool's inputSchema; unknown arguments are refused too."""
    schema = definition.get("inputSchema") or {"type": "object"}
    allowed = set(schema.get("properties", {}))
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ToolError(f"unknown argument(s) {', '.join(unknown)[:200]}; allowed: "
                        f"{', '.join(sorted(allowed)) or 'none'} (call again without the "
                        "others)")
    errors = sorted(_validator(schema).iter_errors(args), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = str(e.path[0]) if e.path else "arguments"  # a list's item: its parameter
        described = schema.get("properties", {}).get(where, {}).get("description", "")
        quoted = repr(e.instance)
        quoted = quoted if len(quoted) <= 80 else quoted[:77] + "..."
        if e.validator == "enum":
            msg = f"{quoted} is not allowed; allowed values: " + ", ".join(
                map(str, e.validator_value)) + elsewhere(schema, where, e.instance)
        elif e.validator == "pattern":
            msg = f"{quoted} does not fit the format {e.validator_value}"
        else:
            msg = e.message if len(e.message) <= 300 else e.message[:297] + "..."
        raise ToolError(f"{where}: {msg}" + (f". {described}" if described else ""))


def with_declared(definition: dict[str, Any], plan: QueryPlan) -> dict[str, Any]:
    """The definition as arguments are checked against it: each enum with the values the
    governed definition names that the data does not hold (they match no row; refusing one the
    definition itself names left a model with nothing but a refusal to answer from)."""
    extra = {f.param: f.declared for f in plan.filters if f.declared}
    if not extra:
        return definition
    out = copy.deepcopy(definition)
    props = out.get("inputSchema", {}).get("properties", {})
    for param, values in extra.items():
        prop = props.get(param)
        enum = enum_of(prop)
        if prop is not None and enum is not None:
            with_enum(prop, [*enum, *(v for v in values if v not in enum)])
    return out


def elsewhere(schema: dict[str, Any], param: str, value: Any) -> str:
    """Where a value refused by one parameter's enum belongs: the other parameters that list it
    (compared as text, case-insensitively), so the call can be made again right."""
    said = str(value).strip().lower()
    others = [name for name, prop in (schema.get("properties") or {}).items()
              if name != param and any(str(v).lower() == said for v in enum_of(prop) or [])]
    if not others:
        return ""
    return f" ({value!r} is a value of {' and '.join(others)}: call again with {others[0]})"


def coerce_times(args: dict[str, Any], definition: dict[str, Any]) -> dict[str, Any]:
    """ISO date-time strings -> aware datetimes (UTC when no offset); a bad one is a ToolError."""
    props = (definition.get("inputSchema") or {}).get("properties", {})
    out = dict(args)
    for name, value in args.items():
        if props.get(name, {}).get("format") == "date-time" and isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ToolError(f"{name}: {value[:40]!r} is not an ISO 8601 date-time; write "
                                "e.g. 2026-08-01T00:00:00Z") from None
            out[name] = parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return out


def definition_products(definition: dict[str, Any]) -> list[str]:
    return ToolContext.of(definition).products


_UNIT = re.compile(r"unit: ([^;.)(]+?)(?: \(|[;.)]|$)", re.I)


def definition_units(definition: dict[str, Any]) -> dict[str, str]:
    out = {}
    rows = (((definition.get("outputSchema") or {}).get("properties") or {}).get("rows") or {})
    for name, schema in ((rows.get("items") or {}).get("properties") or {}).items():
        m = _UNIT.search(str(schema.get("description", "")))
        if m and m.group(1).strip().lower() not in ("number", "key, no unit", "none"):
            out[name] = m.group(1).strip()
    return out


def identifiers_read(call: Call) -> tuple[dict[str, Any], list[str]]:
    """How each identifier argument was read ({param: {given, scheme, resolved_through}}) and
    the crosswalk products the query reads for them."""
    out: dict[str, Any] = {}
    via: list[str] = []
    for f in call.plan.filters:
        value = call.args.get(f.param)
        if not f.routes or value is None:
            continue
        route = chosen_route(f, value)
        assert route is not None
        out[f.param] = {"given": value, "scheme": route.scheme, "resolved_through": route.via}
        if route.via and route.via not in via:
            via.append(route.via)
    return out, via


def as_time(raw: Any, fmt: str | None) -> dt.datetime | None:
    """A freshness value as an aware datetime (UTC where the engine gives none): a timestamp,
    a date (its midnight), or a year or text date read in the column's format."""
    if fmt is not None:
        return to_time(raw, fmt)
    if isinstance(raw, dt.datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=dt.UTC)
    if isinstance(raw, dt.date):
        return dt.datetime.combine(raw, dt.time(), dt.UTC)
    return None


def why_empty(out: dict[str, Any], call: Call, config: TetherConfig) -> None:
    """An empty result says why when the server knows: the window starts after the newest data
    ("the data ends at 2020"), or after the source's last load, or nothing the caller may see
    matches the arguments. A refusal (another scope) never gets here: it is an error, not an
    empty result."""
    if out.get("rows"):
        return
    window, as_of = out.get("window") or {}, out.get("as_of")
    if window.get("start") and as_of:
        newest = dt.datetime.fromisoformat(str(as_of))
        start = dt.datetime.fromisoformat(str(window["start"]))
        if start.tzinfo is None:
            start = start.replace(tzinfo=newest.tzinfo or dt.UTC)
        if start > newest:
            products = [config.products[n] for n in definition_products(call.definition)
                        if n in config.products]
            loaded = all(not (p.freshness and p.freshness.column) for p in products)
            fmt = call.plan.window.format if call.plan.window else None
            ends = timeformat.label(newest, fmt) if fmt else newest.date().isoformat()
            out["empty_reason"] = (
                f"no rows: the window starts {window['start']}, after "
                + (f"the source's last load (as of {as_of})" if loaded else
                   f"the data ends at {ends} (as of {as_of})"))
            return
    given = sorted(k for k, v in call.args.items() if v is not None
                   and k not in ("limit", "cursor", *SHAPING))
    out["empty_reason"] = ("no rows you may see match " + ", ".join(
        f"{k}={shown(call.args[k])}" for k in given) if given else "no rows you may see")


SHAPING = ("count_by", AGGREGATE)
"""Listing arguments that ask for counts or totals instead of rows."""

TOTAL = "tether_total_rows"
"""The column of a listing's first page that counts every matching row (never shown as a row
field: the result states it as total_rows)."""

_PLAIN = (str, int, float, bool, type(None))


def jsonable(v: Any) -> Any:
    if isinstance(v, _PLAIN):  # most values: nothing to convert
        return v
    if isinstance(v, dt.datetime):
        return (v if v.tzinfo else v.replace(tzinfo=dt.UTC)).isoformat()
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):  # a whole number stays one (a sum of integers)
        exponent = v.as_tuple().exponent
        return int(v) if isinstance(exponent, int) and exponent >= 0 else float(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, bytes | bytearray):
        return v.hex()
    return v
