"""OpenTelemetry GenAI/MCP spans exported as OTLP JSON, read into harvest candidates.

One export object, or the collector's one-object-per-line form. Each trace becomes one
:class:`~tether.eval.harvest.Candidate` (its question from the first user message, its tool calls
and outcome from the tool spans); :func:`harvest_otel` samples them like the call log
(:func:`tether.eval.harvest.stratify`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tether.config import Project
from tether.errors import ConfigError
from tether.eval.harvest import (
    ASK_TOOLS,
    NO_TOOL,
    Candidate,
    Outcome,
    _Call,
    _candidate,
    _chains,
    _clip,
    stratify,
)
from tether.textfiles import JSONProblem, parse_json

OTLP_HINT = ("Give an OTLP JSON trace export: {\"resourceSpans\": [{\"resource\": ..., "
             "\"scopeSpans\": [{\"spans\": [...]}]}]}, one object or one per line.")


@dataclass
class _Span:
    trace: str
    id: str
    parent: str
    name: str
    start: float
    attrs: dict[str, Any]
    resource: dict[str, Any]
    error: str | None
    where: str


@dataclass(frozen=True)
class _Msg:
    role: str
    text: str
    calls: tuple[str, ...]


def _load_docs(path: Path) -> list[Any]:
    if not path.is_file():
        raise ConfigError(f"{path} does not exist.", hint=OTLP_HINT)
    text = path.read_text(encoding="utf-8")
    try:
        return [parse_json(text)]
    except JSONProblem as whole:
        if whole.kind != "syntax":  # too deep, a number too long: no reading of it helps
            raise ConfigError(f"{path.name} {whole.reason}.", where=f"{path}:{whole.line or 1}",
                              hint=whole.hint or OTLP_HINT) from None
        lines = [(n, s) for n, s in enumerate(text.splitlines(), start=1) if s.strip()]
        docs: list[Any] = []
        for n, line in lines:
            try:
                docs.append(parse_json(line, one_line=True))
            except JSONProblem as e:  # not JSON Lines either: report the likelier reading
                where, msg = ((f"{path}:{n}", e.detail or e.reason) if docs or e.kind != "syntax"
                              else (f"{path}:{whole.line}", whole.detail))
                raise ConfigError(f"not JSON ({msg}).", where=where, hint=OTLP_HINT) from None
        return docs


def _value(v: Any, where: str) -> Any:
    kinds = "stringValue, intValue, boolValue, doubleValue, arrayValue, kvlistValue, bytesValue"
    if not isinstance(v, dict) or len(v) > 1 or (v and next(iter(v)) not in kinds.split(", ")):
        raise ConfigError(f"attribute value {_clip(json.dumps(v, default=str), 80)} is not an OTLP "
                          "AnyValue.", where=where, hint=f"Use one of {kinds}.")
    if not v:
        return None
    kind, x = next(iter(v.items()))
    if kind in ("arrayValue", "kvlistValue"):
        items = x.get("values", []) if isinstance(x, dict) else None
        if not isinstance(items, list):
            raise ConfigError(f"{kind} has no values list.", where=where, hint=OTLP_HINT)
        return ([_value(i, where) for i in items] if kind == "arrayValue" else _attrs(items, where))
    if kind == "intValue":
        try:
            return int(x)
        except (TypeError, ValueError):
            raise ConfigError(f"intValue {x!r} is not an integer.", where=where) from None
    return x


def _attrs(items: Any, where: str) -> dict[str, Any]:
    if not isinstance(items, list):
        raise ConfigError("attributes is not a list.", where=where, hint=OTLP_HINT)
    out: dict[str, Any] = {}
    for i, a in enumerate(items):
        if not isinstance(a, dict) or not isinstance(a.get("key"), str) or "value" not in a:
            raise ConfigError(f"attribute {i} is not {{\"key\": ..., \"value\": ...}}.", where=where,
                              hint=OTLP_HINT)
        out[a["key"]] = _value(a["value"], f"{where} attribute {a['key']!r}")
    return out


def _span(raw: Any, resource: dict[str, Any], where: str) -> _Span:
    if not isinstance(raw, dict):
        raise ConfigError("a span is not an object.", where=where, hint=OTLP_HINT)
    missing = [k for k in ("traceId", "spanId", "startTimeUnixNano") if not raw.get(k)]
    if missing:
        raise ConfigError(f"the span has no {', '.join(missing)}.", where=where, hint=OTLP_HINT)
    try:
        start = int(raw["startTimeUnixNano"]) / 1e9
    except (TypeError, ValueError):
        raise ConfigError(f"startTimeUnixNano {raw['startTimeUnixNano']!r} is not an integer.",
                          where=where, hint=OTLP_HINT) from None
    attrs = _attrs(raw.get("attributes", []), where)
    for ev in raw.get("events") or []:  # older instrumentations put the messages on events
        if isinstance(ev, dict):
            for k, v in _attrs(ev.get("attributes", []), f"{where} event").items():
                if k.startswith("gen_ai.") and k not in attrs:
                    attrs[k] = v
    status: dict[str, Any] = raw["status"] if isinstance(raw.get("status"), dict) else {}
    failed = status.get("code") in (2, "2", "STATUS_CODE_ERROR", "ERROR") or "error.type" in attrs
    error = (str(status.get("message") or attrs.get("error.type") or "error")) if failed else None
    return _Span(str(raw["traceId"]), str(raw["spanId"]), str(raw.get("parentSpanId") or ""),
                 str(raw.get("name") or ""), start, attrs, resource, error, where)


def _read_spans(path: Path) -> list[_Span]:
    """Every span of an OTLP JSON export, checked; a bad one is a ConfigError naming where."""
    spans: list[_Span] = []
    for d, doc in enumerate(_load_docs(path)):
        rss = doc.get("resourceSpans") if isinstance(doc, dict) else None
        if not isinstance(rss, list):
            raise ConfigError("is not an OTLP JSON trace export: the top level has no resourceSpans "
                              "list.", where=f"{path}" + (f" (object {d + 1})" if d else ""),
                              hint=OTLP_HINT)
        for r, rs in enumerate(rss):
            where = f"{path}: resourceSpans[{r}]"
            if not isinstance(rs, dict):
                raise ConfigError("is not an object.", where=where, hint=OTLP_HINT)
            res: dict[str, Any] = rs["resource"] if isinstance(rs.get("resource"), dict) else {}
            resource = _attrs(res.get("attributes", []), f"{where}.resource")
            scopes = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", []))
            if not isinstance(scopes, list):
                raise ConfigError("scopeSpans is not a list.", where=where, hint=OTLP_HINT)
            for s, scope in enumerate(scopes):
                items = scope.get("spans", []) if isinstance(scope, dict) else None
                if not isinstance(items, list):
                    raise ConfigError("has no spans list.", where=f"{where}.scopeSpans[{s}]",
                                      hint=OTLP_HINT)
                spans.extend(_span(sp, resource, f"{where}.scopeSpans[{s}].spans[{i}]")
                             for i, sp in enumerate(items))
    return spans


def _is_tool(s: _Span) -> bool:
    return (s.attrs.get("gen_ai.operation.name") == "execute_tool"
            or s.attrs.get("mcp.method.name") == "tools/call")


def _tool_name(s: _Span) -> str:
    name = s.attrs.get("gen_ai.tool.name")
    return str(name) if name else s.name.split(" ", 1)[-1] or "tool"


def _json_attr(s: _Span, key: str, strict: bool) -> Any:
    v = s.attrs.get(key)
    if isinstance(v, str):
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            if strict:
                raise ConfigError(f"{key} is not JSON.", where=s.where,
                                  hint="GenAI semantic conventions carry messages as JSON.") from None
    return v


def _is_empty(result: Any) -> bool:
    if isinstance(result, dict):
        result = result.get("structuredContent", result)
    if isinstance(result, dict):
        return result.get("row_count") == 0 or (result.get("rows") == [] and not result.get("row_count"))
    return isinstance(result, list) and not result


def _identity(spans: Sequence[_Span], project: Project | None) -> tuple[str, str]:
    def first(*keys: str) -> Any:
        for attrs in [*(s.attrs for s in spans if _is_tool(s)), *(s.attrs for s in spans),
                      *(s.resource for s in spans)]:
            for k in keys:
                if attrs.get(k):
                    return attrs[k]
        return None

    user = str(first("enduser.id", "user.id") or "unknown")
    role = first("enduser.role", "user.roles", "tether.role")
    if isinstance(role, list):
        role = role[0] if role else None
    if role is None and project is not None and user in project.config.policies.users:
        role = project.config.policies.users[user].role
    return user, str(role or "unknown")


def _tool_calls(spans: Sequence[_Span], user: str, role: str) -> list[_Call]:
    by_id = {s.id: s for s in spans}
    out = []
    for s in spans:
        parent = by_id.get(s.parent)
        # an agent's execute_tool span and the MCP client's tools/call span below it are one call
        if not _is_tool(s) or (parent is not None and _is_tool(parent)
                               and _tool_name(parent) == _tool_name(s)):
            continue
        args = _json_attr(s, "gen_ai.tool.call.arguments", strict=False)
        outcome: Literal["ok", "error", "empty"] = (
            "error" if s.error else "empty" if _is_empty(
                _json_attr(s, "gen_ai.tool.call.result", strict=False)) else "ok")
        at = dt.datetime.fromtimestamp(s.start, dt.UTC).isoformat()
        out.append(_Call(f"{s.trace}/{s.id}", at, s.start, user, role, _tool_name(s),
                         {} if args is None else args, outcome, s.error))
    return out


def _messages(s: _Span, key: str) -> list[_Msg]:
    raw = _json_attr(s, key, strict=True)
    raw = [raw] if isinstance(raw, dict) else raw
    out = []
    for m in raw if isinstance(raw, list) else []:
        if not isinstance(m, dict):
            continue
        texts: list[str] = []
        calls: list[str] = []
        content = m.get("content")
        parts = [*(m.get("parts") or []), *(content if isinstance(content, list) else [])]
        texts += [content] if isinstance(content, str) else []
        for p in parts:
            if isinstance(p, dict) and p.get("type") in ("tool_call", "tool_use", "function_call"):
                calls.append(str(p.get("name", "")))
            elif isinstance(p, dict) and isinstance(t := p.get("content", p.get("text")), str):
                texts.append(t)
        calls += [str((c.get("function") or c).get("name", "")) for c in m.get("tool_calls") or []
                  if isinstance(c, dict)]
        out.append(_Msg(str(m.get("role", "")), "\n".join(texts).strip(), tuple(calls)))
    return out


def _question(spans: Sequence[_Span]) -> str | None:
    """The first user message of the conversation (gen_ai.input.messages, else gen_ai.prompt)."""
    for s in spans:
        for m in _messages(s, "gen_ai.input.messages"):
            if m.role == "user" and m.text:
                return m.text
    for s in spans:
        prompt = s.attrs.get("gen_ai.prompt")
        if isinstance(prompt, str) and prompt.strip():
            parsed = _json_attr(s, "gen_ai.prompt", strict=False)
            if isinstance(parsed, list | dict):
                users = [m.text for m in _messages(s, "gen_ai.prompt") if m.role == "user" and m.text]
                if users:
                    return users[0]
            return prompt.strip()
        indexed = sorted((int(k.split(".")[2]), v) for k, v in s.attrs.items()
                         if re.fullmatch(r"gen_ai\.prompt\.\d+\.role", k) and v == "user")
        for i, _ in indexed:
            text = s.attrs.get(f"gen_ai.prompt.{i}.content")
            if isinstance(text, str) and text.strip():
                return text.strip()
    return None


def _asks(m: _Msg) -> bool:
    return m.role == "assistant" and not m.calls and m.text.rstrip().endswith("?")


def _clarified(spans: Sequence[_Span], calls: Sequence[_Call]) -> bool:
    """An assistant turn asked the user instead of calling a tool: the user answered it (a later
    history has the question followed by a user message), or the conversation stopped on it before
    any tool was called, or the agent used an ask-the-user tool."""
    if any(_is_tool(s) and _tool_name(s) in ASK_TOOLS for s in spans):
        return True
    chats = [s for s in spans if "gen_ai.input.messages" in s.attrs or "gen_ai.output.messages" in s.attrs]
    for s in chats:
        msgs = _messages(s, "gen_ai.input.messages")
        if any(_asks(a) and b.role == "user" for a, b in itertools.pairwise(msgs)):
            return True
        if any(set(m.calls) & set(ASK_TOOLS) for m in msgs + _messages(s, "gen_ai.output.messages")):
            return True
    if chats:
        out = _messages(chats[-1], "gen_ai.output.messages")
        if out and _asks(out[-1]) and not any(c.t <= chats[-1].start for c in calls):
            return True
    return False


def _trace_candidate(trace: str, spans: list[_Span], calls: list[_Call], retried: set[str],
                     clarified: bool, user: str, role: str) -> Candidate | None:
    question = _question(spans)
    if question is None and not calls and not clarified:
        return None
    tries = [c for c in calls if c.ref in retried]
    outcome: Outcome = ("clarification" if clarified else "retry" if tries else
                        "error" if any(c.outcome == "error" for c in calls) else
                        "empty" if any(c.outcome == "empty" for c in calls) else "ok")
    focus = [c for c in calls if c.outcome == outcome] if outcome in ("error", "empty") else tries
    tool = (focus or calls)[0].tool if calls else NO_TOOL
    at = dt.datetime.fromtimestamp(spans[0].start, dt.UTC).isoformat()
    return _candidate(tool=tool, role=role, user=user, outcome=outcome, at=at, source=trace,
                      question=question, calls=calls)


def otel_candidates(path: Path, *, project: Project | None = None, retry_window_s: float = 300
                    ) -> list[Candidate]:
    """One candidate per trace of an OTLP JSON export that holds a user question or a tool call,
    unsampled. Users come from ``enduser.id`` (or ``user.id``), roles from ``enduser.role`` or,
    given ``project``, from its policies."""
    spans = _read_spans(path)
    if spans and not any(k.startswith(("gen_ai.", "mcp.")) for s in spans for k in s.attrs):
        raise ConfigError("has no GenAI or MCP span (no gen_ai.* or mcp.* attribute).", where=str(path),
                          hint="Export the agent's or the MCP server's spans (OpenTelemetry GenAI "
                          "semantic conventions: gen_ai.operation.name, gen_ai.tool.name, ...).")
    traces: dict[str, list[_Span]] = {}
    for s in sorted(spans, key=lambda s: (s.start, s.id)):
        traces.setdefault(s.trace, []).append(s)
    found: dict[str, tuple[list[_Call], bool, str, str]] = {}
    for tid, ts in traces.items():
        user, role = _identity(ts, project)
        calls = [c for c in _tool_calls(ts, user, role) if c.tool not in ASK_TOOLS]
        found[tid] = (calls, _clarified(ts, calls), user, role)
    every = [c for calls, *_ in found.values() for c in calls]
    retried = {chain[0].ref for chain in _chains(every, retry_window_s) if len(chain) > 1}
    out = [_trace_candidate(tid, traces[tid], calls, retried, clar, user, role)
           for tid, (calls, clar, user, role) in found.items()]
    return [c for c in out if c is not None]


def harvest_otel(path: Path, *, project: Project | None = None, per_stratum: int = 5,
                 oversample: float = 3, seed: int = 0, retry_window_s: float = 300) -> list[Candidate]:
    """Stratified candidates from an OTLP JSON export of GenAI/MCP spans."""
    return stratify(otel_candidates(path, project=project, retry_window_s=retry_window_s),
                    per_stratum=per_stratum, oversample=oversample, seed=seed)
