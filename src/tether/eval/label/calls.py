"""One tool call as the scorers see it: the tool's definition, what its arguments read, its SQL
analysed, and its result's rows, as_of and next_cursor however the server sent them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from tether.eval.label.context import LabelContext
from tether.eval.label.sqlshape import SqlAnalysis, analyse
from tether.eval.trace import ToolCall, Trace, result_payload

META_KEY = "tether/context"  # the provenance key of every tether tool (CONTRACTS.md)


@dataclass(frozen=True)
class ToolInfo:
    """What a tool's definition (wire form) says about the fields it reads."""

    name: str
    kind: str | None = None  # tether's plan kind: list, metric, probe, sql, catalog, describe
    arguments: dict[str, tuple[str, ...]] | None = None  # None: the tool has no `fields` map
    governed: tuple[str, ...] = ()
    products: tuple[str, ...] = ()
    definitions: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()  # metric names from source_of_truth "metric:NAME"
    source_of_truth: dict[str, str] = field(default_factory=dict)
    canonical_ids: dict[str, str] = field(default_factory=dict)  # argument -> identifier scheme

    @property
    def task_specific(self) -> bool:
        """A tool that applies fields by itself (a governed metric)."""
        return bool(self.governed)


def tool_info(ctx: LabelContext, wire: dict[str, Any] | None, name: str) -> ToolInfo:
    meta = ((wire or {}).get("_meta") or {}).get(META_KEY)
    if not isinstance(meta, dict):
        return ToolInfo(name=name)
    fields = meta.get("fields")
    arguments: dict[str, tuple[str, ...]] | None = None
    governed: tuple[str, ...] = ()
    if isinstance(fields, dict):
        arguments = {}
        for arg, ref in (fields.get("arguments") or {}).items():
            refs = [ref] if isinstance(ref, str) else list(ref or [])
            arguments[str(arg)] = tuple(ctx.field(r) for r in refs if isinstance(r, str))
        governed = tuple(ctx.field(r) for r in fields.get("governed") or [] if isinstance(r, str))
    truth = {str(k): str(v) for k, v in (meta.get("source_of_truth") or {}).items()}
    metrics = tuple(sorted({v.split(":", 1)[1] for v in truth.values() if v.startswith("metric:")}))
    return ToolInfo(
        name=name, kind=meta.get("kind"), arguments=arguments, governed=governed,
        products=tuple(meta.get("products") or ()), definitions=tuple(meta.get("definitions") or ()),
        metrics=metrics, source_of_truth=truth,
        canonical_ids={str(k): str(v) for k, v in (meta.get("canonical_ids") or {}).items()},
    )


@dataclass
class CallView:
    call: ToolCall
    tool: ToolInfo
    sql: list[SqlAnalysis] = field(default_factory=list)
    sql_arguments: set[str] = field(default_factory=set)
    payload: Any = None  # structuredContent, else the text parsed as JSON (or a Python literal)

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
        for where in (self.payload, self.call.meta, (self.call.meta or {}).get(META_KEY)):
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


def is_sql_argument(ctx: LabelContext, tool: ToolInfo, arg: str, value: Any) -> bool:
    if not isinstance(value, str):
        return False
    if tool.kind == "sql":
        return True
    if tool.arguments is not None and arg in tool.arguments:
        return False
    return arg.lower() in ctx.sql_arguments


def is_metadata_tool(ctx: LabelContext, tool: ToolInfo) -> bool:
    """A tool that lists or describes the catalog (no data, so no as_of is owed)."""
    if tool.kind in ("catalog", "describe"):
        return True
    return tool.kind is None and any(fnmatchcase(tool.name.lower(), p) for p in ctx.metadata_tools)


def call_views(ctx: LabelContext, trace: Trace) -> list[CallView]:
    tools = {str(t.get("name")): t for t in trace.tools if isinstance(t, dict)}
    infos: dict[str, ToolInfo] = {}
    out = []
    for call in trace.tool_calls:
        if call.name not in infos:
            infos[call.name] = tool_info(ctx, tools.get(call.name), call.name)
        info = infos[call.name]
        view = CallView(call=call, tool=info)
        for arg, value in call.arguments.items():
            if is_sql_argument(ctx, info, arg, value):
                view.sql_arguments.add(arg)
                view.sql.extend(analyse(ctx, value))
        view.payload = result_payload(call)
        out.append(view)
    return out
