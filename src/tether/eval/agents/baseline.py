"""`baseline`: a deterministic agent with no model, kept as a measuring instrument.

It is the guesser a thin tool definition invites, made reproducible and offline:
1. It picks the tool whose name, description, parameter descriptions and enum values share the
   most words with the question (ties: the first by name). Catalog-only tools (list/describe)
   are never picked as the answer tool.
2. Arguments: an enum value named in the question (not of an enum whose values name the tool's
   own parameters or fields: that shapes the result, it filters nothing); a string matching a
   parameter's pattern (a period code, FY2027-Q1 or 2026-07, where the description spells out
   its yyyy forms instead); for
   an identifier parameter, any id-looking token in the question (whatever its scheme); ISO dates
   for ``*_from`` / ``*_to`` in order. Nothing else: no defaults invented.
3. With a SQL tool (``run_sql``, ``query``, ``read_query``...), it lists and describes tables if
   it can, picks the table whose name sounds like the question, and writes
   ``SELECT count(*)`` / ``sum(<amount-like column>)`` / ``*`` with ``WHERE`` equalities for
   columns whose names sound like the question's words (booleans = true; a column whose name
   echoes a question word in CAPITALS gets that value). Values are quoted SQL literals built by
   sqlglot, never pasted text.
4. The answer: one number from a one-row result (the numeric field sounding most like the
   question), the row count for "how many" over a listing (the first page only: it never follows
   next_cursor), else the rows.
It never asks the user anything. What it gets right, it gets right by word overlap: that is the
point of measuring it against grounded tools.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from sqlglot import exp

from tether.context.meta import enum_of
from tether.eval.agents.base import Agent, AgentContext, Answer, register
from tether.eval.trace import ModelTurn, RequestedCall, ToolCall, result_payload

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+")
_STOP = frozenset("a an and are as at be by did do does for from had has have how i in is it many "
                  "me much of on or our show the their there this to was we were what which who "
                  "with all any each give list tell get use you your per me".split())
_ID = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b|\b[A-Z]{1,4}\d{3,}\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_SQL_PARAMS = ("sql", "query")
_AMOUNT = ("amount", "revenue", "total", "value", "usd", "cents", "price")


def words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text.replace("_", " ")):
        w = w.lower()
        if w in _STOP:
            continue
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def _shaping(tool: dict[str, Any]) -> set[str]:
    """Parameters whose enum values name the tool's own parameters or output fields: they
    shape the result (count by, total of), they filter nothing, and no question word fills
    them."""
    props = (tool.get("inputSchema") or {}).get("properties", {})
    fields = set(props) | set(((((tool.get("outputSchema") or {}).get("properties") or {})
                                .get("rows") or {}).get("items") or {}).get("properties") or {})
    listed = {n: enum_of(p) for n, p in props.items()}
    return {n for n, values in listed.items() if values and {str(v) for v in values} <= fields}


def _schema_words(tool: dict[str, Any]) -> tuple[set[str], set[str], set[str]]:
    name = set(words(tool.get("name", "")))
    desc = set(words(tool.get("description") or ""))
    enums: set[str] = set()
    shaping = _shaping(tool)
    for pname, p in (tool.get("inputSchema") or {}).get("properties", {}).items():
        if pname in shaping:
            continue
        desc |= set(words(pname)) | set(words(str(p.get("description") or "")))
        for v in enum_of(p) or []:
            enums |= set(words(str(v)))
    return name, desc, enums


def score(question: str, tool: dict[str, Any]) -> float:
    q = set(words(question))
    name, desc, enums = _schema_words(tool)
    return 3 * len(q & name) + 2 * len(q & enums) + len(q & desc)


_CATALOG_VERBS = ("list_", "describe", "explain", "search", "find_", "get_schema")


def _is_catalog(tool: dict[str, Any]) -> bool:
    """A tool that lists, describes, explains or searches the catalog, by its name's verb."""
    return str(tool.get("name", "")).lower().startswith(_CATALOG_VERBS)


def _sql_param(tool: dict[str, Any]) -> str | None:
    props = (tool.get("inputSchema") or {}).get("properties", {})
    return next((p for p in props if p.lower() in _SQL_PARAMS), None)


_PERIOD_CODE = r"(?i)FY\d{2,4}(-?Q[1-4])?|\d{4}-Q[1-4]|\d{4}-\d{2}(-\d{2})?"
"""The codes a period takes that a word-matcher can copy from a question: FY2027-Q1, 2026-Q3,
2026-07, 2026-07-01 (a parameter with no pattern whose description spells out yyyy forms)."""


def arguments(question: str, tool: dict[str, Any]) -> dict[str, Any]:
    """Arguments a word-matcher would fill from the question alone."""
    props = (tool.get("inputSchema") or {}).get("properties", {})
    q_words = set(words(question))
    ids = _ID.findall(question)
    dates = _DATE.findall(question)
    args: dict[str, Any] = {}
    shaping = _shaping(tool)
    for pname, p in props.items():
        if pname in shaping:
            continue
        listed = enum_of(p)
        if listed:
            hit = [v for v in listed if set(words(str(v))) and set(words(str(v))) <= q_words]
            if hit and p.get("type") == "array":  # every value named, none inside another
                args[pname] = [v for v in hit if not any(
                    set(words(str(v))) < set(words(str(o))) for o in hit)]
            elif hit:
                args[pname] = max(hit, key=lambda v: len(str(v)))
            continue
        pattern = p.get("pattern")
        if not pattern and "yyyy" in str(p.get("description", "")).lower():
            pattern = _PERIOD_CODE  # a period whose forms the description spells out
        if pattern:
            m = next((t for t in question.split() if re.fullmatch(pattern, t.strip(".,?;:"))), None)
            if m:
                args[pname] = m.strip(".,?;:")
                continue
        looks_id = p.get("format") == "uuid" or _is_key(pname)
        if looks_id and ids and p.get("type", "string") == "string":
            args[pname] = ids[0]
        elif pname.endswith("_from") and dates:
            args[pname] = dates[0]
        elif pname.endswith("_to") and len(dates) > 1:
            args[pname] = dates[1]
    return args


def parse_result(call: ToolCall) -> Any:
    """The data a result carries (tether.eval.trace.result_payload), else its text."""
    payload = result_payload(call)
    return payload if payload is not None else (call.text or "")


def rows_of(result: Any) -> list[dict[str, Any]]:
    if isinstance(result, dict) and isinstance(result.get("columns"), list) and isinstance(
            result.get("rows"), list) and all(isinstance(r, list) for r in result["rows"]):
        names = [str(c) for c in result["columns"]]  # {"columns": [...], "rows": [[...]]}
        return [dict(zip(names, r, strict=False)) for r in result["rows"]]
    if isinstance(result, dict):
        for key in ("rows", "result", "results", "data", "tables", "columns"):
            if isinstance(result.get(key), list):
                return [r for r in result[key] if isinstance(r, dict)]
        return [result]
    if isinstance(result, list):
        return [r for r in result if isinstance(r, dict)]
    return []


def _is_key(column: str) -> bool:
    """Identifiers and sequence numbers are never the answer (nor summed)."""
    c = column.lower()
    return c in ("id", "uid", "key") or c.endswith(("_id", "_no", "_ref", "_number", "_uid",
                                                     "_key"))


def pick_answer(question: str, result: Any) -> Any:
    rows = rows_of(result)
    q = set(words(question))
    how_many = bool(re.search(r"\bhow many\b|\bnumber of\b|\bcount\b", question, re.I))
    numeric = [k for k in (rows[0] if rows else {}) if not _is_key(k) and all(
        isinstance(r.get(k), int | float) and not isinstance(r.get(k), bool) for r in rows)]
    sounding = sorted((k for k in numeric if q & set(words(k))),
                      key=lambda k: (-len(q & set(words(k))), numeric.index(k)))
    if len(rows) == 1 and numeric:
        return rows[0][(sounding or numeric)[0]]
    if len(rows) > 1 and sounding:  # a guesser adds up the column that sounds right
        total = sum(r[sounding[0]] for r in rows)
        return round(total, 6) if isinstance(total, float) else total
    if how_many and isinstance(result, dict) and isinstance(result.get("row_count"), int):
        return result["row_count"]  # the first page's count: next_cursor is never followed
    if how_many:
        return len(rows)
    return [list(r.values()) for r in rows]


def _best(question: str, tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The answering tool whose words the question shares most (the first of equals)."""
    answer_tools = [t for t in tools if not _is_catalog(t) and not _sql_param(t)]
    return max(answer_tools, key=lambda t: (score(question, t), -tools.index(t)), default=None)


@register
class BaselineAgent(Agent):
    name = "baseline"
    needs_model: ClassVar[bool] = False

    def describe(self) -> str | None:
        return "baseline (word overlap, no model)"

    async def run(self, ctx: AgentContext) -> Answer:
        tools = ctx.tools
        sql_tool = next((t for t in tools if _sql_param(t)), None)
        best = _best(ctx.question, tools)
        if best is not None and (sql_tool is None or score(ctx.question, best) > 0):
            call = await self._call(ctx, best, 0)
            listed = await ctx.relist() if ctx.relist is not None else None
            better = _best(ctx.question, listed) if listed else None
            if better is not None and better["name"] != best["name"] and (
                    score(ctx.question, better) > score(ctx.question, best)):
                # the server listed a tool that fits better (a product it found): use it, as a
                # client that lists again would
                call = await self._call(ctx, better, 1)
                return self._answer(ctx, call, 2)
            return self._answer(ctx, call, 1)
        if sql_tool is None:
            ctx.record_turn(ModelTurn(index=0, content="No tool fits.", kind="answer"))
            return Answer(text="I could not find a tool for this question.")
        return await self._sql(ctx, tools, sql_tool)

    async def _call(self, ctx: AgentContext, tool: dict[str, Any], turn: int) -> ToolCall:
        args = arguments(ctx.question, tool)
        ctx.record_turn(ModelTurn(index=turn, tool_calls=[
            RequestedCall(id=f"b{turn}", name=tool["name"], arguments=args)]))
        return await ctx.call_tool(tool["name"], args, turn)

    def _answer(self, ctx: AgentContext, call: ToolCall, turn: int) -> Answer:
        if call.is_error:
            text = f"The tool failed: {(call.text or '')[:200]}"
            ctx.record_turn(ModelTurn(index=turn, content=text, kind="answer"))
            return Answer(text=text)
        value = pick_answer(ctx.question, parse_result(call))
        text = f"The answer is {json.dumps(value, default=str)}."
        ctx.record_turn(ModelTurn(index=turn, content=text, kind="answer"))
        return Answer(text=text, value=value)

    async def _sql(self, ctx: AgentContext, tools: list[dict[str, Any]],
                   sql_tool: dict[str, Any]) -> Answer:
        turn = 0
        q = set(words(ctx.question))
        tables: list[str] = []
        lister = next((t for t in tools if "list" in t["name"] and "table" in t["name"]), None)
        if lister is not None:
            ctx.record_turn(ModelTurn(index=turn, tool_calls=[
                RequestedCall(id=f"b{turn}", name=lister["name"])]))
            listed = await ctx.call_tool(lister["name"], {}, turn)
            turn += 1
            tables = _names(parse_result(listed))
        table = max(tables, key=lambda t: (10 * len(q & set(words(t))) - len(set(words(t)) - q),
                                           -tables.index(t)), default=None)
        columns: list[tuple[str, str]] = []
        describer = next((t for t in tools if t["name"].startswith("describe")
                          or "column" in t["name"]), None)
        if table and describer is not None:
            props = (describer.get("inputSchema") or {}).get("properties", {})
            param = next(iter(props), "table")
            ctx.record_turn(ModelTurn(index=turn, tool_calls=[
                RequestedCall(id=f"b{turn}", name=describer["name"], arguments={param: table})]))
            described = await ctx.call_tool(describer["name"], {param: table}, turn)
            turn += 1
            columns = _columns(parse_result(described))
        sql = write_sql(ctx.question, table or "data", columns)
        param = _sql_param(sql_tool) or "sql"
        ctx.record_turn(ModelTurn(index=turn, tool_calls=[
            RequestedCall(id=f"b{turn}", name=sql_tool["name"], arguments={param: sql})]))
        call = await ctx.call_tool(sql_tool["name"], {param: sql}, turn)
        return self._answer(ctx, call, turn + 1)


def _names(result: Any) -> list[str]:
    out = []
    for r in rows_of(result):
        v = r.get("table") or r.get("name") or r.get("table_name") or next(iter(r.values()), None)
        if isinstance(v, str):
            out.append(v)
    if not out and isinstance(result, list):
        out = [x for x in result if isinstance(x, str)]
    return out


def _columns(result: Any) -> list[tuple[str, str]]:
    out = []
    for r in rows_of(result):
        name = r.get("column") or r.get("column_name") or r.get("name")
        kind = str(r.get("type") or r.get("column_type") or r.get("data_type") or "")
        if isinstance(name, str):
            out.append((name, kind.upper()))
    return out


def write_sql(question: str, table: str, columns: list[tuple[str, str]]) -> str:
    """SQL from columns whose names sound like the question's words (the table's own words do
    not count); a CAPITALISED word becomes the value of a sounding string column, else of the
    first text column that is not a key."""
    q = set(words(question)) - set(words(table))
    capitals = [w for w in _WORD.findall(question) if w.isupper() and len(w) > 1 and w.isalpha()]
    textual = ("CHAR", "TEXT", "STRING")
    t = exp.to_table(table)
    where: list[exp.Expr] = []
    used: set[str] = set()
    for name, kind in columns:
        if not set(words(name)) & q:
            continue
        col = exp.column(name, quoted=True)
        if "BOOL" in kind:
            where.append(col.eq(exp.true()))
            used.add(name)
        elif capitals and (not kind or any(k in kind for k in textual)):  # untyped: SQLite
            where.append(col.eq(exp.Literal.string(capitals.pop(0))))
            used.add(name)
    for value in capitals:  # the first text column that is not a key takes the next value
        col_name = next((n for n, k in columns if n not in used and not _is_key(n)
                         and (not k or any(x in k for x in textual))), None)
        if col_name is None:
            break
        where.append(exp.column(col_name, quoted=True).eq(exp.Literal.string(value)))
        used.add(col_name)
    how_many = bool(re.search(r"\bhow many\b|\bnumber of\b|\bcount\b", question, re.I))
    amount = next((n for n, k in columns if any(a in n.lower() for a in _AMOUNT)
                   and set(words(n)) & set(words(question))), None)
    if how_many or not columns:
        select = exp.select(exp.func("COUNT", exp.Star()).as_("n"))
    elif amount:
        select = exp.select(exp.func("SUM", exp.column(amount, quoted=True)).as_("total"))
    else:
        select = exp.select(exp.Star()).limit(50)
    query = select.from_(t)
    for w in where:
        query = query.where(w)
    return query.sql()
