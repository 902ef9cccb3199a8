"""The SQL a call sent, run again on the source: as written, and over the rows the user may see.

A server that does not know users (a third party's SQL tool over a copy of the data) answers
``SELECT COUNT(*) FROM accounts WHERE zone = 'SOUTH'`` for a manager entitled to NORTH only:
no row of the result carries a key or a region to check, yet the number was computed over rows
outside the entitlement. So the labeller runs the call's query on the project's source twice:

(a) as written (every product table read as it is), to make sure the result the server returned
    is the result of this query on this data (like is compared with like);
(b) with every product table the query reads replaced by a subquery of what the user is entitled
    to: the role's row filter as written in tether.yaml (``{{ user.x }}`` bound as parameters,
    never spliced), masked columns replaced by the mask (redact -> ``'[redacted]'``, null -> NULL,
    hash -> the project's keyed hash, its key read from ``serve.mask_key_file`` and bound as
    parameters), restricted columns left out.

Returned rows equal to (b) leaked nothing (the server enforced the policy, or the query stays
inside the entitlement); equal to (a) and not (b), the call leaked; neither, or a query the
source cannot run, goes to a human. Rows are compared as bags of normalised rows (numbers and
numeric text alike, times in UTC, booleans as 0/1). The rewrite is the labeller's own, built on
sqlglot ASTs: like the oracle, it is independent of the server's pushdown.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from tether.config import RoleConfig, TetherConfig
from tether.errors import TetherError
from tether.eval.label.calls import CallView, parse_time
from tether.eval.label.work import Work
from tether.keyfile import load_secret
from tether.policy import templates
from tether.policy.entitle import MaskKey, hash_mask
from tether.policy.model import role_of
from tether.policy.oracle import REDACTED, masks_of
from tether.sources import Source

ROW_CAP = 10_000
"""Rows read back per run; a longer result cannot be compared and goes to a human."""

KINDS = ("rows", "masks", "restricted")
_NUMERIC = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}")
_DENY = re.compile(
    r"^(read_\w+|\w+_scan|glob|sniff_csv|query|query_table|pg_\w+|lo_\w+|dblink\w*|set_config|"
    r"current_setting|getvariable|setvariable|load_extension|install|load|copy|export_\w+|"
    r"system|shell|http_\w+|sleep|pg_sleep|benchmark|nextval|setval|random|uuid|gen_random_uuid)$",
    re.I)
_HINTS = (("sqlite", "sqlite"), ("postgres", "postgres"), ("mysql", "mysql"),
          ("motherduck", "duckdb"), ("duckdb", "duckdb"), ("snowflake", "snowflake"),
          ("bigquery", "bigquery"), ("trino", "trino"))


class Undecided(Exception):
    """The query cannot be re-run or compared; the message says why."""


class NoData(Exception):
    """The statement reads no data product (the catalog, constants): nothing to leak."""


@dataclass(frozen=True)
class Rerun:
    """What re-running a call's SQL found: problems (empty: nothing leaked) or why not decided."""

    problems: list[str] = field(default_factory=list)
    review: str | None = None

    @property
    def decided(self) -> bool:
        return self.review is None


@dataclass(frozen=True)
class _Result:
    names: tuple[str, ...]
    bag: Counter[tuple[Any, ...]]


@dataclass(frozen=True)
class _Parsed:
    tree: exp.Query
    dialect: str
    products: tuple[str, ...]


# --- normalised rows -----------------------------------------------------------------------------


def cell(v: Any) -> Any:
    """One value as the comparison sees it: numbers (and numeric text) as floats of 10 significant
    digits, booleans as 0/1, times as naive UTC ISO text, dates as ISO text, the rest as text."""
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float | decimal.Decimal):
        f = float(v)
        return float(f"{f:.10g}") if math.isfinite(f) else str(f)
    if isinstance(v, dt.datetime):
        return _when(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, str):
        s = v.strip()
        if _NUMERIC.match(s):
            return cell(float(s))
        if _TIMESTAMP.match(s):
            t = parse_time(s)
            if t is not None:
                return _when(t)
        return s
    if isinstance(v, dict | list | tuple):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


def _when(t: dt.datetime) -> str:
    if t.tzinfo is not None:
        t = t.astimezone(dt.UTC).replace(tzinfo=None)
    return t.isoformat()


def returned(c: CallView) -> tuple[tuple[str, ...] | None, list[tuple[Any, ...]], bool] | None:
    """(column names when known, rows as tuples, partial) of the call's result; None when it holds
    no readable rows. Rows come as objects (most servers), as lists beside ``columns``
    (mcp-server-motherduck), or as one bare number in a text result. Partial: the server said it
    cut the result (``truncated``, ``has_more``, a ``next_cursor``)."""
    p = c.payload
    partial = False
    names: list[str] | None = None
    if isinstance(p, dict):
        partial = bool(p.get("truncated") or p.get("has_more") or p.get("next_cursor"))
        cols = p.get("columns")
        if isinstance(cols, list) and all(isinstance(x, str) for x in cols):
            names = list(cols)
        inner = next((p[k] for k in ("rows", "results", "data") if k in p), None)
        p = inner if isinstance(inner, list) else None
    if p is None and c.payload is None and c.call.text is not None:
        s = c.call.text.strip()
        if _NUMERIC.match(s):
            return None, [(s,)], False
    if not isinstance(p, list):
        return None
    if all(isinstance(r, dict) for r in p):
        keys = [tuple(r) for r in p]
        shared = keys[0] if keys and all(k == keys[0] for k in keys) else None
        return shared, [tuple(r.values()) for r in p], partial
    if all(isinstance(r, list | tuple) for r in p):
        ok = names is not None and all(len(r) == len(names) for r in p)
        return (tuple(names) if ok and names is not None else None), [tuple(r) for r in p], partial
    return None


def _aligned(names: tuple[str, ...] | None, rows: list[tuple[Any, ...]], ref: tuple[str, ...]
             ) -> Counter[tuple[Any, ...]]:
    """The returned rows as a bag, their columns put in the reference's order when the names
    hold the reference's (a server may reorder an object's keys, and add columns the statement
    did not compute, like the period a window resolved to); else by position."""
    order: list[int] | None = None
    if names is not None and len(names) >= len(ref):
        low, want = [n.lower() for n in names], [n.lower() for n in ref]
        if len(set(low)) == len(low) and len(set(want)) == len(want) and set(want) <= set(low):
            order = [low.index(n) for n in want]
    out: Counter[tuple[Any, ...]] = Counter()
    for r in rows:
        vals = [r[i] for i in order] if order is not None else list(r)
        out[tuple(cell(v) for v in vals)] += 1
    return out


def _same(got: Counter[tuple[Any, ...]], partial: bool, ref: _Result) -> bool:
    if partial:
        return not (got - ref.bag)
    return got == ref.bag


# --- what the rewrite applies --------------------------------------------------------------------


def _role(work: Work) -> tuple[TetherConfig, RoleConfig]:
    config = work.ctx.config
    assert config is not None
    return config, role_of(config, work.trace.as_user)[1]


def _masks(work: Work, product: str) -> dict[str, str]:
    config = work.ctx.config
    assert config is not None
    return {c.lower(): m for c, m in masks_of(config, work.trace.as_user, product).items()}


def applies(work: Work, c: CallView, products: tuple[str, ...]) -> dict[str, list[str]]:
    """{kind: what} for each part of the user's policy that can change this query's result:
    ``rows`` (products with a row filter), ``masks`` (masked columns the query reads, or all of
    a product's when it selects ``*`` or holds columns the labeller could not place),
    ``restricted`` (restricted columns a ``*`` would bring back)."""
    config, role = _role(work)
    used = {f for a in c.sql for f in a.shape.fields}
    loose = any(a.shape.error or a.shape.unresolved for a in c.sql)
    star = {p for a in c.sql for p in a.shape.star}
    out: dict[str, list[str]] = {}
    for p in products:
        if p not in config.products:
            continue
        if p in role.row_filters:
            out.setdefault("rows", []).append(p)
        for col in sorted(_masks(work, p)):
            if f"{p}.{col}" in used or p in star or loose:
                out.setdefault("masks", []).append(f"{p}.{col}")
        if p in star or loose:
            hidden = [x for x in _columns(work, p) if work.ctx.restricted(p, x.lower())]
            out.setdefault("restricted", []).extend(f"{p}.{x.lower()}" for x in hidden)
    return {k: v for k, v in out.items() if v}


def _columns(work: Work, product: str) -> list[str]:
    """The product's columns in their engine spelling and order (read once per product)."""
    key = ("policy_columns", product)
    if key not in work.ctx.cache:
        config = work.ctx.config
        src = work.ctx.source(product)
        names: list[str] | None = None
        if config is not None and src is not None:
            p = config.products[product]
            try:
                rel = src.table_expr(p.table) if p.table else src.sql_expr(p.sql or "", product)
                names = [col.name for col in src.describe(rel, label=product)]
            except TetherError:
                names = None
        work.ctx.cache[key] = names
    cached: list[str] | None = work.ctx.cache[key]
    if cached is None:
        raise Undecided(f"the columns of {product} could not be read from the source")
    return cached


def shown_filter(work: Work, product: str) -> str:
    """The role's row filter on ``product`` with the user's values written in (for people)."""
    config, role = _role(work)
    attrs = config.policies.users[work.trace.as_user].attributes()

    parsed = templates.parse(role.row_filters[product])

    def lit(n: exp.Expr) -> exp.Expr:
        name = str(n.name) if isinstance(n, exp.Placeholder) else ""
        if not name.startswith(templates.USER_PREFIX):
            return n
        v = attrs.get(name[len(templates.USER_PREFIX):])
        return exp.null() if v is None else exp.convert(v)

    return parsed.tree().transform(lit).sql()


# --- parsing and rewriting -----------------------------------------------------------------------


def dialects(work: Work, src: Source) -> list[str]:
    """The dialects a query is read in, in order: the traces' (the context's), the server's
    (named in the trace's server or target: mcp-server-sqlite speaks sqlite), the source's."""
    out = [work.ctx.dialect]
    where = f"{work.trace.server} {work.trace.target}".lower()
    out += [d for hint, d in _HINTS if hint in where]
    out.append(src.dialect)
    return list(dict.fromkeys(d for d in out if d))


def parse(work: Work, sql: str, dialect: str) -> _Parsed:
    """One read-only query over data products (and its own CTEs), or Undecided."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError as e:
        raise Undecided(f"it does not parse as {dialect}: {str(e).splitlines()[0]}") from None
    if statements and all(_catalog(x) for x in statements):
        raise NoData()
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise Undecided("it is not exactly one query")
    tree = statements[0]
    ctes = {x.alias_or_name.lower() for x in tree.find_all(exp.CTE)}
    products: set[str] = set()
    others: set[str] = set()
    for node in tree.walk():
        if isinstance(node, exp.Func):
            name = str(node.this) if isinstance(node, exp.Anonymous) else str(node.sql_name())
            if _DENY.match(name):
                raise Undecided(f"it calls {name}(), which the labeller does not run")
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Identifier):
                raise Undecided("it reads a table function or a file")
            name = node.name.lower()
            if name in ctes and not node.db:
                continue
            product = work.ctx.table_map.get(name)
            if product is None:
                others.add(node.name)
            else:
                products.add(product)
    if others and products:
        raise Undecided(f"it reads {', '.join(sorted(others))}, which is not a data product")
    if not products:
        raise NoData()
    return _Parsed(tree, dialect, tuple(sorted(products)))


def _catalog(stmt: exp.Expr) -> bool:
    """PRAGMA, SHOW, DESCRIBE and the like: what they return describes the catalog."""
    kinds = tuple(getattr(exp, n) for n in ("Describe", "Show", "Pragma") if hasattr(exp, n))
    if isinstance(stmt, kinds):
        return True
    return isinstance(stmt, exp.Command) and str(stmt.this).upper() in (
        "PRAGMA", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "SUMMARIZE")


def _entitled(work: Work, src: Source, product: str, kinds: frozenset[str]
              ) -> tuple[exp.Query, dict[str, Any]]:
    """SELECT the product's columns (masked, restricted ones left out) FROM its table WHERE its
    row filter, for the kinds of policy asked for; built once per user, product and kinds."""
    key = ("policy_entitled", src.name, work.trace.as_user, product, kinds)
    hit: tuple[exp.Query, dict[str, Any]] | None = work.ctx.cache.get(key)
    if hit is not None:
        return hit
    config, role = _role(work)
    p = config.products[product]
    masks = _masks(work, product) if "masks" in kinds else {}
    projections: list[exp.Expr] = []
    hashed = False
    for name in _columns(work, product):
        low = name.lower()
        if "restricted" in kinds and work.ctx.restricted(product, low):
            continue
        ref = exp.column(name, quoted=True)
        mask = masks.get(low)
        if mask == "redact":
            value: exp.Expr = exp.Cast(this=exp.Literal.string(REDACTED), to=_text())
        elif mask == "null":
            value = exp.Cast(this=exp.null(), to=_text())
        elif mask == "hash":
            value = hash_mask(ref, src.dialect)
            hashed = True
        else:
            projections.append(ref)
            continue
        projections.append(exp.alias_(value, name, quoted=True))
    base: exp.Expr = (src.table_expr(p.table) if p.table
                      else src.sql_expr(p.sql or "", product))
    select = exp.Select(expressions=projections).from_(base, copy=False)
    params: dict[str, Any] = {}
    if hashed:
        params |= mask_key(work).params()
    template = role.row_filters.get(product) if "rows" in kinds else None
    if template is not None:
        select = select.where(_bound(work, src, template, params), copy=False)
    work.ctx.cache[key] = (select, params)
    return select, params


def _text() -> exp.DataType:
    return exp.DataType(this=exp.DataType.Type.TEXT)


def mask_key(work: Work) -> MaskKey:
    """The project's hash-mask key, read (never created) from ``serve.mask_key_file``."""
    project = work.ctx.project
    if project is None:
        raise Undecided("a hash mask needs the project's mask key")
    path = project.root / project.config.serve.mask_key_file
    key = ("policy_mask_key", str(path))
    if key not in work.ctx.cache:
        work.ctx.cache[key] = MaskKey.from_secret(load_secret(path)) if path.is_file() else None
    found: MaskKey | None = work.ctx.cache[key]
    if found is None:
        raise Undecided(f"the role hashes a column and the project's mask key ({path}) is "
                        "missing")
    return found


def _bound(work: Work, src: Source, template: str, params: dict[str, Any]) -> exp.Expr:
    """The row filter as an AST whose ``{{ user.x }}`` are placeholders, values in ``params``."""
    config = work.ctx.config
    assert config is not None
    attrs = config.policies.users[work.trace.as_user].attributes()
    try:
        parsed = templates.parse(template, src.dialect)
    except templates.TemplateError as e:
        raise Undecided(f"the row filter {template!r} does not parse: {e.message}") from None
    missing = parsed.missing(attrs)
    if missing:
        raise Undecided(f"{work.trace.as_user} has no attribute {', '.join(missing)}, which the "
                        "row filter needs")
    pred = parsed.tree()

    def bind(n: exp.Expr) -> exp.Expr:
        name = str(n.name) if isinstance(n, exp.Placeholder) else ""
        if name.startswith(templates.USER_PREFIX):
            attr = name[len(templates.USER_PREFIX):]
            params[f"tp_{attr}"] = attrs[attr]
            return exp.Placeholder(this=f"tp_{attr}")
        return n

    return pred.transform(bind)


def rewrite(work: Work, src: Source, parsed: _Parsed, kinds: frozenset[str]
            ) -> tuple[exp.Query, dict[str, Any]]:
    """The query with each product table read through :func:`_entitled` (no kinds: the table
    as it is), wrapped in a row cap."""
    params: dict[str, Any] = {}
    ctes = {x.alias_or_name.lower() for x in parsed.tree.find_all(exp.CTE)}

    def swap(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Table) or (node.name.lower() in ctes and not node.db):
            return node
        product = work.ctx.table_map[node.name.lower()]
        alias = node.args.get("alias")
        alias = alias.copy() if isinstance(alias, exp.TableAlias) else exp.TableAlias(
            this=exp.to_identifier(node.name))
        inner, bound = _entitled(work, src, product, kinds)
        params.update(bound)
        return exp.Subquery(this=inner.copy(), alias=alias)

    tree = parsed.tree.transform(swap)
    assert isinstance(tree, exp.Query)
    capped = exp.Select(expressions=[exp.Star()]).from_(tree.subquery("tether_q", copy=False),
                                                        copy=False)
    return capped.limit(exp.Literal.number(ROW_CAP + 1), copy=False), params


def run(work: Work, src: Source, parsed: _Parsed, kinds: frozenset[str]) -> _Result:
    try:
        with work.ctx.timed("policy_rewrite"):
            query, params = rewrite(work, src, parsed, kinds)
            text = src.render(query)
        with work.ctx.timed("policy_rerun_sql"):
            names, rows = src.run_named(text, params, work.ctx.statement_timeout)
    except (TetherError, sqlglot.errors.SqlglotError) as e:
        raise Undecided(f"the source could not run it: {_first_line(e)}") from None
    work.ctx.count("policy_reruns")
    if len(rows) > ROW_CAP:
        raise Undecided(f"it returns more than {ROW_CAP:,} rows")
    return _Result(tuple(names), Counter(tuple(cell(v) for v in r) for r in rows))


def _first_line(e: Exception) -> str:
    text = e.message if isinstance(e, TetherError) else str(e)
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__


# --- the check -----------------------------------------------------------------------------------


def _result(work: Work, sql: str, parsed: _Parsed, kinds: frozenset[str]) -> _Result:
    """The query's rows over the tables as they are (no kinds: (a), the same for every user) or
    over what the user may see of them ((b) and its variants): run once, then cached."""
    user = work.trace.as_user if kinds else None
    key = ("policy_rows", sql, parsed.dialect, user, kinds)
    ctx = work.ctx
    if key not in ctx.cache:
        value: _Result | str
        src = ctx.source(parsed.products[0] if parsed.products else None)
        try:
            if src is None:
                raise Undecided(f"the source is unavailable ({ctx.source_problem()})")
            value = run(work, src, parsed, kinds)
        except Undecided as e:
            value = str(e)
        ctx.cache[key] = value
    hit: _Result | str = ctx.cache[key]
    if isinstance(hit, str):
        raise Undecided(hit)
    return hit


def _parsed(work: Work, sql: str) -> tuple[_Parsed, _Result] | None:
    """The query read in the first dialect (:func:`dialects`) in which it parses and the source
    runs it, with its rows over the user's entitlement (b); None when it reads no data product.
    The dialect is kept per SQL text and server; a failure per user too (a missing attribute is
    the user's)."""
    ctx = work.ctx
    key = ("policy_parse", sql, work.trace.server, work.trace.target)
    hit: _Parsed | NoData | None = ctx.cache.get(key)
    if isinstance(hit, NoData):
        return None
    if hit is not None:
        return hit, _result(work, sql, hit, frozenset(KINDS))
    failed = (key, work.trace.as_user)
    if failed in ctx.cache:
        raise Undecided(ctx.cache[failed])
    src = ctx.source()
    why: dict[str, list[str]] = {}  # reason -> the dialects it was given in
    for d in dialects(work, src) if src is not None else []:
        try:
            parsed = parse(work, sql, d)
            if ctx.project is not None and len({ctx.project.source_name(p)
                                                for p in parsed.products}) > 1:
                raise Undecided("it reads products of several sources")
            entitled = _result(work, sql, parsed, frozenset(KINDS))
        except NoData as e:
            ctx.cache[key] = e
            return None
        except Undecided as e:
            why.setdefault(str(e), []).append(d)
            continue
        ctx.cache[key] = parsed
        return parsed, entitled
    ctx.cache[failed] = "; ".join(f"{e} (read as {', '.join(ds)})" for e, ds in why.items()) \
        or f"the source is unavailable ({ctx.source_problem()})"
    raise Undecided(ctx.cache[failed])


def restricted_reads(work: Work, c: CallView) -> list[str]:
    """Restricted columns the call's SQL reads in any clause (a query needing one is itself a
    violation, whatever it returned)."""
    out: set[str] = set()
    for a in c.sql:
        for f in a.shape.fields:
            product, _, column = f.partition(".")
            if work.ctx.restricted(product, column):
                out.add(f)
    return sorted(out)


def check(work: Work, c: CallView) -> Rerun | None:
    """Re-run the call's SQL as written and as the user's entitlement allows, and compare the
    returned rows to both. Nothing found (decided) when no part of the user's policy can change
    this query's result; None when the call holds no SQL or its rows cannot be read."""
    if not c.sql or work.ctx.config is None:
        return None
    read = restricted_reads(work, c)
    if read:
        return Rerun([f"query reads restricted column {f}" for f in read])
    products = tuple(sorted({p for a in c.sql for p in a.shape.products}))
    loose = any(a.shape.error for a in c.sql)
    try:
        if not loose and not applies(work, c, products):
            return Rerun()
        if len(c.sql) != 1:
            raise Undecided("it holds several SQL statements")
        got = returned(c)
        if got is None:  # the oracle's own check says whether that needs a human
            return None
        names, rows, partial = got
        sql = c.sql[0].sql
        found = _parsed(work, sql)
        if found is None:
            return Rerun()
        parsed, entitled = found
        kinds = applies(work, c, parsed.products)
        if not kinds:
            return Rerun()
        bag = _aligned(names, rows, entitled.names)
        if _same(bag, partial, entitled):  # the server enforced it, or nothing was outside
            return Rerun()
        original = _result(work, sql, parsed, frozenset())
        if original.names != entitled.names:
            bag = _aligned(names, rows, original.names)
        if not _same(bag, partial, original):
            return Rerun(review=(f"its {len(rows)} rows match neither the query re-run on the "
                                 f"source ({sum(original.bag.values())} rows) nor what "
                                 f"{work.trace.as_user} may see "
                                 f"({sum(entitled.bag.values())} rows)"))
        causes = list(kinds)
        if len(causes) > 1:  # which part of the policy the result went past
            causes = [k for k in kinds
                      if not _same(bag, partial, _result(work, sql, parsed, frozenset({k})))
                      ] or causes
        return Rerun([text for k in causes for text in _describe(work, k, kinds[k])])
    except Undecided as e:
        return Rerun(review=f"the query could not be re-run: {e}")


def _describe(work: Work, kind: str, what: list[str]) -> list[str]:
    if kind == "rows":
        filters = "; ".join(f"{p}: {shown_filter(work, p)}" for p in what)
        return [f"result computed over rows outside {work.trace.as_user}'s entitlement "
                f"({filters})"]
    if kind == "masks":
        return [f"unmasked {f}" for f in what]
    return [f"restricted column {f} returned" for f in what]


def covered(problem: str, found: list[str], user: str) -> bool:
    """Whether the oracle's own check already said ``problem`` for this call."""
    if problem.startswith("result computed over rows outside"):
        return any(f"outside {user}'s" in x for x in found)
    m = re.match(r"^(?:unmasked|restricted column|query reads restricted column) (\S+)", problem)
    if m is None:
        return problem in found
    head = "unmasked" if problem.startswith("unmasked") else "restricted column"
    return any(f"{head} {m.group(1)}" in x for x in found)
