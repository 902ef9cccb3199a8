"""Execute one tool call as one user: the checks (serve/pipeline.py), the policy path, the
kind's runner, the result's shape.

Every read of a product goes through the caller's entitled relation (policy/entitle.py): the
product's table in a query is replaced by it, so row filters, masks, restricted columns and
denied tables hold for listings, metrics, run_sql, the probe and freshness alike. Every result
carries rows, row_count, as_of and units (and truncated and next_cursor where the tool pages),
read under the per-call caps on rows and bytes. Invalid arguments raise ToolError, whose message
says what was wrong and what is allowed; a refusal carries its reason.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from tether.config import Project, TetherConfig
from tether.context import timeformat
from tether.context.meta import MASK_KEY_SHOWN, Evidence
from tether.context.profile import ProductProfile
from tether.context.schema import Column
from tether.context.timeformat import to_time
from tether.errors import QueryError
from tether.keyfile import load_secret
from tether.policy import inherit, templates
from tether.policy.entitle import (
    MASK_KEY_PARAMS,
    Entitled,
    MaskKey,
    column_masks,
    entitle,
    equality_scope,
    require_table,
)
from tether.policy.model import role_of
from tether.registry import Registry
from tether.serve import sqlguard
from tether.serve.arguments import SHAPING, definition_products, definition_units, shown
from tether.serve.kinds import Call, SourceFailed, ToolError
from tether.sources import Fetched, Source, open_source
from tether.sources.writer import Writer
from tether.toolgen.plan import chosen_route


@dataclass
class Caches:
    """What an executor keeps between calls, each named for what it holds and the part that
    reads it. A new executor (a publication or a policy reloaded) starts with none; a cache that
    serves one check only is that check's (serve/pipeline.py)."""

    columns: dict[str, list[Column]] = field(default_factory=dict)
    """product -> its top-level columns as the source describes them (the policy path)"""
    relations: dict[tuple[str, str, bool], Entitled] = field(default_factory=dict)
    """(user, product, fenced) -> what the user may read of it (the policy path)"""
    scopes: dict[str, tuple[str, str]] = field(default_factory=dict)
    """user -> (role, attributes as JSON): users equal in both read the same relations"""
    policies: dict[tuple[str, str], tuple[dict[str, str], dict[str, set[Any]]]] = field(
        default_factory=dict)
    """(user, product) -> (masks, the values a simple row filter pins)"""
    fresh: dict[tuple[Any, ...], tuple[float, dt.datetime | None]] = field(default_factory=dict)
    """(product, scope) -> (until when, the newest freshness value): as_of"""
    evidence_parts: dict[tuple[Any, ...], tuple[list[str], str | None, dict[str, Any]]] = field(
        default_factory=dict)
    """(user, products, fenced, as_of's products) -> (the policy's predicates, as_of's
    statement, its values)"""
    sql_texts: dict[tuple[Any, ...], tuple[str, str, dict[str, Any]]] = field(
        default_factory=dict)
    """(text the driver runs, text evidence shows, the policy's bound values) per tool, version,
    user, filters present and the schemes identifiers were read as (serve/listing.py)"""
    catalog: dict[str, set[str]] = field(default_factory=dict)
    """source -> the names its engine reserves (serve/generic.py)"""
    sql_catalogs: dict[tuple[str, str | None], Any] = field(default_factory=dict)
    """(user, source) -> what run_sql may read there (serve/generic.py)"""
    statements: dict[tuple[Any, ...], tuple[str, dict[str, Any], list[str], str]] = field(
        default_factory=dict)
    """run_sql's checked statements, the most recent few (serve/generic.py)"""
    profiles: dict[str, ProductProfile] = field(default_factory=dict)
    """product -> its profile, read by the probe (serve/probe.py)"""
    probes: dict[tuple[Any, ...], tuple[float, dict[str, Any]]] = field(default_factory=dict)
    """the probe's answers, kept a while (serve/probe.py)"""
    values_read: dict[tuple[Any, ...], set[str]] = field(default_factory=dict)
    """(product, column, scope) -> the distinct values that scope reads (serve/peruser.py)"""


@dataclass
class Executor:
    """What a call runs with: the project, one read-only connection per source, the keys, the
    policy path and what is kept between calls. The steps a call passes, and the runner of its
    kind, are serve/pipeline.py's."""

    project: Project
    cursor_key: bytes
    mask_key: MaskKey | None = None
    sources: dict[str, Source] = field(default_factory=dict)
    writers: dict[str, Writer] = field(default_factory=dict)
    """source -> its writer connection (write tools only; serve/write.py)"""
    registry: Registry | None = None
    """where writes are logged and their keys claimed (opened on the first write if None)"""
    caches: Caches = field(default_factory=Caches)
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
        for w in self.writers.values():
            w.close()
        self.writers.clear()

    # --- the policy path ---

    def keys(self) -> MaskKey:
        if self.mask_key is None:
            path = self.project.root / self.project.config.serve.mask_key_file
            self.mask_key = MaskKey.from_secret(load_secret(path))
        return self.mask_key

    def columns(self, product: str) -> list[Column]:
        """The product's top-level columns as its source describes them (read once); a SQL
        product's as it reads other products (their restricted columns absent)."""
        if product not in self.caches.columns:
            p = self.project.config.products[product]
            src = self.source(p.source)
            self.caches.columns[product] = src.describe(self.base(product), label=product)
        return self.caches.columns[product]

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
        if key not in self.caches.relations:
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
            self.caches.relations[key] = rel
        return self.caches.relations[key]

    def secure(self, query: exp.Expr, user: str, aliases: dict[str, str] | None = None
               ) -> tuple[exp.Expr, dict[str, Any]]:
        """A plan's query with each product it reads (a FROM or JOIN source aliased by the
        product's name, or by a path's alias that ``aliases`` maps to its product) replaced by
        the user's entitled relation, and that relation's params. :func:`reads` names those
        products."""
        products = self.project.config.products
        named = {**{p: p for p in products}, **(aliases or {})}
        found: dict[int, str] = {}
        for node in query.find_all(exp.Table, exp.Subquery):
            alias = node.alias
            if alias in named and isinstance(node.parent, exp.From | exp.Join):
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
            alias = found.get(id(node))
            if alias is None:
                return node
            rel = self.relation(user, named[alias])
            params.update(rel.params)
            return rel.subquery(alias)

        return query.transform(swap, copy=False), params

    def reads(self, query: exp.Expr) -> list[str]:
        """The products a plan's query reads (FROM and JOIN sources aliased by product name)."""
        products = self.project.config.products
        return sorted({n.alias for n in query.find_all(exp.Table, exp.Subquery)
                       if n.alias in products and isinstance(n.parent, exp.From | exp.Join)})

    def scope_key(self, user: str) -> tuple[str, str]:
        """Users whose role and attributes are equal read the same relations."""
        if user not in self.caches.scopes:  # asked on every call: worked out once per user
            role, _ = role_of(self.project.config, user)
            attrs = self.project.config.policies.users[user].attributes()
            self.caches.scopes[user] = (role, json.dumps(attrs, sort_keys=True, default=str))
        return self.caches.scopes[user]

    def fetch(self, src: Source, sql: str, params: dict[str, Any], max_rows: int,
              known: tuple[str, ...] = ()) -> Fetched:
        """Run under the per-call caps and timeout; an engine error's text is scrubbed of
        values the caller did not write (they may come from rows outside the entitlement)."""
        serve = self.project.config.serve
        try:
            return src.fetch(sql, params, self.timeout, min(max_rows, serve.max_result_rows),
                             serve.max_result_bytes)
        except QueryError as e:
            raise SourceFailed("the query failed: " + sqlguard.scrub(e.reason, *known)) from None

    def policy_of(self, user: str, product: str) -> tuple[dict[str, str], dict[str, set[Any]]]:
        """(masks, the values a simple row filter pins) of ``user`` on ``product``, worked out
        once per server."""
        key = (user, product)
        if key not in self.caches.policies:
            config = self.project.config
            self.caches.policies[key] = (column_masks(config, user, product),
                                  equality_scope(config, user, product))
        return self.caches.policies[key]

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
        out["as_of"], basis = self.as_of_said(call.user, products)
        if out["as_of"] is not None:
            out["as_of_basis"] = basis
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
        key = (call.user, tuple(products), fenced, tuple(fresh))
        if key not in self.caches.evidence_parts:  # the policy's part and as_of's statement, once
            added: list[str] = []
            for p in products:
                if p in self.project.config.products:
                    added += self.relation(call.user, p, fence=fenced).policy_sql(src.display)
            self.caches.evidence_parts[key] = (added, *self.as_of_statement(call.user, fresh))
        added, as_of_sql, as_of_params = self.caches.evidence_parts[key]
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
        return self.as_of_said(user, products)[0]

    def as_of_said(self, user: str, products: list[str]) -> tuple[str | None, str]:
        """(as_of, what it is in words): of several products, the basis of the stalest one,
        named (where the others hold newer data), never every basis at once."""
        known = {p: v for p in dict.fromkeys(products)
                 if (v := self._freshness(user, p)) is not None}
        if not known:
            return None, ""
        oldest = min(known.values())
        at = [p for p, v in known.items() if v == oldest]
        basis = self.as_of_basis(at)
        if len(at) < len(known):
            basis += f" of {', '.join(at)}, the stalest of the {len(known)} tables read"
        return oldest.isoformat(), basis

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
        cached = self.caches.fresh.get(key)
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
        self.caches.fresh[key] = (time.monotonic() + self.freshness_ttl, value)
        return value


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


TOTAL = "tether_total_rows"
"""The column of a listing's first page that counts every matching row (never shown as a row
field: the result states it as total_rows)."""

_PLAIN = (str, int, float, bool, type(None))


_PLAIN_TYPES = frozenset(_PLAIN)


def json_rows(names: list[str], rows: list[tuple[Any, ...]], leave_out: str | None = None
              ) -> list[dict[str, Any]]:
    """Rows as dicts of JSON types, without the columns whose name starts with ``leave_out``
    (what a statement adds beside a row's own columns). Per value: a plain one is kept as is,
    without a call (this runs for every value of every page)."""
    keep = [(i, n) for i, n in enumerate(names) if not (leave_out and n.startswith(leave_out))]
    plain = _PLAIN_TYPES
    return [{n: v if type(v := r[i]) in plain else jsonable(v) for i, n in keep} for r in rows]


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
