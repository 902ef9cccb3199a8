"""One tool call as the scorers see it: what it ran and what came back.

What a call ran is read from evidence only: the statement a result reports under
``_meta["tether/evidence"]`` (tether's results, and any server that follows the convention), or
SQL the agent itself sent (a ``sql``/``query`` argument). The evidence statement is made plain
before analysis: every relation the evidence declares as the caller's policy (a product read
through its row filter and masks) is put back as the product's table, so the policy's
predicates are not counted as the call's choice, and the bound values are written in. A tool
definition's ``_meta`` (its provenance) is never read: a description's claim is not evidence.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.meta import MASK_KEY_SHOWN, Evidence, context_in, evidence_of
from tether.eval.label.context import LabelContext
from tether.eval.label.sql.shape import SqlAnalysis, analyse
from tether.eval.trace import ToolCall, Trace, result_payload


@dataclass
class CallView:
    call: ToolCall
    evidence: Evidence | None = None
    sql: list[SqlAnalysis] = field(default_factory=list)
    sql_arguments: set[str] = field(default_factory=set)
    payload: Any = None  # structuredContent, else the text parsed as JSON (or a Python literal)
    statement: str | None = None  # the evidence's statement made plain (policy unwrapped)
    problem: str | None = None  # why the evidence's statement could not be made plain

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def ran(self) -> bool:
        """Whether the labeller knows what the call ran: evidence it could read (a statement
        made plain, or none at all for a catalog call), or SQL the call sent."""
        if self.evidence is not None:
            return self.evidence.sql is None or self.statement is not None
        return bool(self.sql)

    @property
    def unread(self) -> str:
        """Why what the call ran is not known (for a review reason)."""
        return (f"{self.label}: {self.problem}" if self.problem
                else f"{self.label} carries no evidence of what it ran")

    @property
    def ok(self) -> bool:
        return not self.call.is_error

    @property
    def label(self) -> str:
        return f"call {self.call.index} ({self.call.name})"

    def rows(self) -> list[dict[str, Any]] | None:
        """The result's rows as dicts (an object without a rows list is one record), None when
        the result holds nothing readable."""
        p = self.payload
        if isinstance(p, dict):
            inner = next((p[k] for k in ("rows", "results", "data") if k in p), None)
            p = inner if isinstance(inner, list) else [p]
        if isinstance(p, list) and all(isinstance(r, dict) for r in p):
            return p
        return None

    def row_count(self) -> int | None:
        p = self.payload
        if isinstance(p, dict) and isinstance(p.get("row_count"), int):
            return int(p["row_count"])
        if isinstance(p, dict) and not any(k in p for k in ("rows", "results", "data")):
            return None
        rows = self.rows()
        return len(rows) if rows is not None else None

    def next_cursor(self) -> str | None:
        p = self.payload
        if isinstance(p, dict) and isinstance(p.get("next_cursor"), str) and p["next_cursor"]:
            return str(p["next_cursor"])
        return None

    def as_of(self) -> tuple[dt.datetime | None, str | None]:
        """(as_of, None) or (None, why not): from structured content, the result's _meta, or a
        JSON text result."""
        raw: Any = None
        for where in (self.payload, self.call.meta, context_in(self.call.meta)):
            if isinstance(where, dict) and where.get("as_of") is not None:
                raw = where["as_of"]
                break
        if raw is None:
            return None, "no as_of in the result"
        parsed = parse_time(raw)
        if parsed is None:
            return None, f"as_of {raw!r} is not an ISO 8601 time"
        return parsed, None


def parse_time(raw: Any) -> dt.datetime | None:
    if isinstance(raw, dt.datetime):
        value = raw
    elif isinstance(raw, dt.date):
        value = dt.datetime(raw.year, raw.month, raw.day)
    elif isinstance(raw, str):
        try:
            value = dt.datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def is_sql_argument(ctx: LabelContext, arg: str, value: Any) -> bool:
    return isinstance(value, str) and arg.lower() in ctx.sql_arguments


def is_metadata(ctx: LabelContext, c: CallView) -> bool:
    """A call that listed or described the catalog (no data, so no as_of is owed): its evidence
    ran no statement, or, without evidence, its name is a catalog tool's."""
    if c.evidence is not None:
        return c.evidence.sql is None
    return not c.sql and any(fnmatchcase(c.name.lower(), p) for p in ctx.metadata_tools)


_WRITE_WORD = re.compile(r"\b(update|delete|insert)\b", re.I)


def may_write(sql: str) -> bool:
    """Whether SQL text could hold a write at all (a word test: most statements are not parsed
    again for it)."""
    return bool(_WRITE_WORD.search(sql))


def writes_only(ctx: LabelContext, sql: str) -> bool:
    """SQL that only changes rows (UPDATE, DELETE, INSERT): what it wrote is the writes rule's
    to read (label/writes.py); the reading rules have nothing in it to analyse."""
    if not may_write(sql):
        return False
    for dialect in (ctx.dialect, "sqlite"):
        try:
            parsed = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
        except sqlglot.errors.SqlglotError:
            continue
        return bool(parsed) and all(isinstance(s, exp.Update | exp.Delete | exp.Insert)
                                    for s in parsed)
    return False


def call_views(ctx: LabelContext, trace: Trace) -> list[CallView]:
    out = []
    for call in trace.tool_calls:
        view = CallView(call=call, evidence=evidence_of(call.meta))
        if view.evidence is not None and view.evidence.sql:
            view.statement, view.problem = plain_statement(ctx, view.evidence)
            if view.statement is not None and not writes_only(ctx, view.statement):
                view.sql.extend(analyse(ctx, view.statement))
        elif view.evidence is None:
            for arg, value in call.arguments.items():
                if is_sql_argument(ctx, arg, value) and not writes_only(ctx, value):
                    view.sql_arguments.add(arg)
                    view.sql.extend(analyse(ctx, value))
        view.payload = result_payload(call)
        out.append(view)
    return out


# --- the evidence's statement, made plain --------------------------------------------------------


def plain_statement(ctx: LabelContext, ev: Evidence) -> tuple[str | None, str | None]:
    """(the statement with the declared policy relations unwrapped and the bound values written
    in, rendered in the labeller's dialect; or None and why not). Memoised per evidence."""
    key = ("plain", ev.dialect, ev.sql, tuple(ev.policy_predicates), tuple(ev.tables),
           repr(sorted(ev.params.items())))
    if key not in ctx.cache:
        ctx.cache[key] = _plain(ctx, ev)
    found: tuple[str | None, str | None] = ctx.cache[key]
    return found


def _plain(ctx: LabelContext, ev: Evidence) -> tuple[str | None, str | None]:
    dialect = ev.dialect or ctx.dialect
    try:
        tree = sqlglot.parse_one(ev.sql or "", read=dialect)
        policy = {_canonical(p, dialect) for p in ev.policy_predicates}
    except sqlglot.errors.SqlglotError as e:
        return None, f"the evidence's statement does not parse: {str(e).splitlines()[0]}"
    tables = {t.lower() for t in ev.tables}
    unwrapped = tree.transform(lambda n: _unwrap(n, tables, policy, dialect), copy=True)

    def bind(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Placeholder) and n.name in ev.params:
            value = ev.params[n.name]
            if value != MASK_KEY_SHOWN:
                return _literal(value)
        return n

    bound = unwrapped.transform(bind)
    left = sorted({n.name for n in bound.find_all(exp.Placeholder)})
    if left:
        return None, ("the evidence's statement keeps placeholders no parameter binds: "
                      + ", ".join(left))
    return bound.sql(dialect=ctx.dialect), None


def _canonical(sql: str, dialect: str) -> str:
    return sqlglot.parse_one(sql, read=dialect).sql(dialect=dialect)


def _unwrap(node: exp.Expr, tables: set[str], policy: set[str], dialect: str) -> exp.Expr:
    """``(SELECT cols FROM t AS p WHERE <policy>) AS a`` -> ``t AS a`` when the inner relation
    reads one of the evidence's products (``p``) and every part beyond plain columns is a
    predicate or mask the evidence declares as the policy's; ``a`` is whatever alias the
    statement gives it (the caller's own, in SQL the caller wrote)."""
    if not isinstance(node, exp.Subquery) or not node.alias:
        return node
    inner = node.this
    if not isinstance(inner, exp.Select) or inner.args.get("joins") or any(
            inner.args.get(k) for k in ("group", "having", "order", "limit", "qualify")):
        return node
    offset = inner.args.get("offset")
    if offset is not None and offset.expression.sql() != "0":
        return node
    source = inner.args.get("from_")
    source = source.this if source is not None else None
    if not isinstance(source, exp.Table | exp.Subquery) or source.alias.lower() not in tables:
        return node
    where = inner.args.get("where")
    if where is not None and where.this.sql(dialect=dialect) not in policy:
        return node
    for p in inner.expressions:
        if not isinstance(p, exp.Column) and p.sql(dialect=dialect) not in policy:
            return node
    table = source.copy()
    table.set("alias", exp.TableAlias(this=exp.to_identifier(node.alias, quoted=True)))
    return table


def _literal(value: Any) -> exp.Expr:
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return exp.convert(value)
    if isinstance(value, list | tuple):
        return exp.Array(expressions=[_literal(v) for v in value])
    return exp.Literal.string(str(value))
