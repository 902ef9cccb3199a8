"""`tether eval harvest`: candidate cases from real traffic, not from imagination.

Two sources feed it: the server's call log (the registry's ``call_log`` table) and OpenTelemetry
GenAI/MCP spans exported as OTLP JSON (one export object, or the collector's one-per-line form).
Each becomes :class:`Candidate` cases (``gold.answer`` and ``label`` null, ``source_trace`` the call
or trace it came from). :func:`stratify` samples them by tool, role and outcome with a cap per
stratum; retries and clarifications are oversampled because that is where an agent recovers from a
grounding failure and the top-line metric never sees it. The seed makes the sample repeatable.
:func:`keep_discriminating` then keeps the cases that at least one labelled configuration failed
or passed ungrounded: a case every configuration passes grounded tells nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from tether.config import Project
from tether.drift.publish import open_registry
from tether.errors import ConfigError, TetherError
from tether.eval.cases import Case, Gold
from tether.eval.trace import LabelLine

Outcome = Literal["ok", "error", "empty", "retry", "clarification"]
OUTCOMES: tuple[str, ...] = ("ok", "error", "empty", "retry", "clarification")
OVERSAMPLED: tuple[str, ...] = ("retry", "clarification")
PLACEHOLDER = "[write the question]"
NO_TOOL = "(no tool)"
ASK_TOOLS = ("ask_user",)  # the synthetic tool tether's agents ask the user through
CALL_LOG_KEYS = ("at", "username", "role", "tool", "arguments", "row_count", "error")
OTLP_HINT = ("Give an OTLP JSON trace export: {\"resourceSpans\": [{\"resource\": ..., "
             "\"scopeSpans\": [{\"spans\": [...]}]}]}, one object or one per line.")


@dataclass(frozen=True)
class Candidate:
    """A harvested case and the stratum it was drawn from."""

    case: Case
    tool: str
    role: str
    outcome: Outcome
    at: str  # ISO time of the (first) call, or of the trace's first span
    key: str = ""  # what makes two episodes the same case (tool calls, and the question if real)
    seen: int = 1  # how many identical episodes it stands for

    @property
    def stratum(self) -> tuple[str, str, str]:
        return (self.tool, self.role, self.outcome)


@dataclass(frozen=True)
class _Call:
    """One tool call, from either source, in the shape retry detection needs."""

    ref: str
    at: str  # ISO
    t: float  # seconds since the epoch
    user: str
    role: str
    tool: str
    arguments: Any
    outcome: Literal["ok", "error", "empty"]
    detail: str | None = None  # the error, or the row count as text


# ---------------------------------------------------------------- shared pieces


def _chains(calls: Iterable[_Call], window_s: float) -> list[list[_Call]]:
    """Calls grouped into episodes: a call joins the previous one by the same user to the same tool
    when that one failed or came back empty and this one follows within ``window_s``."""
    open_: dict[tuple[str, str], list[_Call]] = {}
    out: list[list[_Call]] = []
    for c in sorted(calls, key=lambda c: (c.t, c.ref)):
        prev = open_.get((c.user, c.tool))
        if prev is not None and prev[-1].outcome != "ok" and 0 <= c.t - prev[-1].t <= window_s:
            prev.append(c)
            continue
        chain = [c]
        open_[(c.user, c.tool)] = chain
        out.append(chain)
    return out


def _describe(c: _Call) -> str:
    args = c.arguments
    inner = (", ".join(f"{k}={v!r}" for k, v in args.items()) if isinstance(args, dict)
             else repr(args))
    what = {"ok": f"{c.detail} rows" if c.detail else "ok", "empty": "no rows",
            "error": f"error: {_clip(c.detail or 'failed', 120)}"}[c.outcome]
    return f"{c.tool}({inner}) -> {what}"


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _placeholder(user: str, calls: Sequence[_Call]) -> str:
    shown = " then ".join(_describe(c) for c in calls[:6])
    more = f" (+{len(calls) - 6} more calls)" if len(calls) > 6 else ""
    return f"{PLACEHOLDER} as {user}: {shown}{more}" if calls else f"{PLACEHOLDER} as {user}"


def _signature(question: str | None, calls: Sequence[_Call]) -> str:
    return json.dumps([question, [(c.tool, c.arguments, c.outcome) for c in calls]],
                      sort_keys=True, default=str)


def _candidate(*, tool: str, role: str, user: str, outcome: Outcome, at: str, source: str,
               question: str | None, calls: Sequence[_Call]) -> Candidate:
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", tool).strip("-")[:60] or "tool"
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    case = Case(case_id=f"{slug}-{outcome}-{digest}", source_trace=source, user_role=role,
                as_user=user, question=question or _placeholder(user, calls), gold=Gold(answer=None))
    return Candidate(case, tool, role, outcome, at, _signature(question, calls))


def _positive(name: str, value: float) -> None:
    if not (value >= 1 and math.isfinite(value)):
        raise ConfigError(f"{name} must be 1 or more (got {value}).",
                          hint="E.g. --per-stratum 5 --oversample 3.")


# ---------------------------------------------------------------- sampling


def stratify(candidates: Iterable[Candidate], *, per_stratum: int = 5, oversample: float = 3,
             seed: int = 0) -> list[Candidate]:
    """At most ``per_stratum`` candidates per (tool, role, outcome), ``per_stratum * oversample`` for
    retries and clarifications; identical episodes count once (``seen`` says how often)."""
    _positive("per_stratum", per_stratum)
    _positive("oversample", oversample)
    groups: dict[tuple[str, str, str], dict[str, list[Candidate]]] = {}
    for c in sorted(candidates, key=lambda c: (c.at, c.case.case_id)):
        groups.setdefault(c.stratum, {}).setdefault(c.key or c.case.case_id, []).append(c)
    out: list[Candidate] = []
    for stratum in sorted(groups):
        pool = [replace(same[0], seen=sum(s.seen for s in same)) for same in groups[stratum].values()]
        quota = quota_for(stratum[2], per_stratum, oversample)
        if len(pool) > quota:
            # one generator per stratum: a new stratum elsewhere leaves this one's draw unchanged
            pool = random.Random(f"{seed}/{'/'.join(stratum)}").sample(pool, quota)
        out.extend(sorted(pool, key=lambda c: (c.at, c.case.case_id)))
    return _unique_ids(out)


def quota_for(outcome: str, per_stratum: int, oversample: float) -> int:
    """How many candidates a stratum of this outcome may keep."""
    return max(1, math.floor(per_stratum * oversample)) if outcome in OVERSAMPLED else per_stratum


def _unique_ids(cands: list[Candidate]) -> list[Candidate]:
    seen: dict[str, int] = {}
    out = []
    for c in cands:
        cid = c.case.case_id
        seen[cid] = seen.get(cid, 0) + 1
        if seen[cid] > 1:
            c = replace(c, case=c.case.model_copy(update={"case_id": f"{cid}-{seen[cid]}"}))
        out.append(c)
    return out


def strata(candidates: Iterable[Candidate]) -> dict[tuple[str, str, str], int]:
    """Candidates per (tool, role, outcome), in sorted order (for the CLI's summary)."""
    counts: dict[tuple[str, str, str], int] = {}
    for c in candidates:
        counts[c.stratum] = counts.get(c.stratum, 0) + 1
    return dict(sorted(counts.items()))


# ---------------------------------------------------------------- the call log


def _log_call(n: int, row: Mapping[str, Any], where: str) -> _Call:
    missing = [k for k in CALL_LOG_KEYS if k not in row]
    if missing:
        raise ConfigError(f"call log row {n} has no {', '.join(missing)}.", where=where,
                          hint="Give rows as Registry.calls() returns them.")
    try:
        at = dt.datetime.fromisoformat(str(row["at"]))
        args = json.loads(row["arguments"]) if isinstance(row["arguments"], str) else row["arguments"]
    except (ValueError, TypeError) as e:
        raise ConfigError(f"call log row {n} ({row['tool']} at {row['at']}) is unreadable: {e}.",
                          where=where, hint="The registry may be damaged; check registry.url.") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    rows = row["row_count"]
    outcome: Literal["ok", "error", "empty"] = (
        "error" if row["error"] is not None else "empty" if rows == 0 else "ok")
    detail = str(row["error"]) if row["error"] is not None else None if rows is None else str(rows)
    return _Call(f"call_log:{row['at']}:{row['username']}:{row['tool']}", str(row["at"]), at.timestamp(),
                 str(row["username"]), str(row["role"]), str(row["tool"]), args, outcome, detail)


def call_log_candidates(calls: Iterable[Mapping[str, Any]], *, retry_window_s: float = 300,
                        where: str = "call_log") -> list[Candidate]:
    """Every episode of the call log (rows as ``Registry.calls()`` returns them), unsampled.

    A call without an identity (user ``?``: it failed before the user was known) cannot be replayed
    as anyone, so it is skipped."""
    parsed = [_log_call(n, row, where) for n, row in enumerate(calls, start=1)]
    out = []
    for chain in _chains((c for c in parsed if c.user not in ("", "?")), retry_window_s):
        first = chain[0]
        outcome: Outcome = "retry" if len(chain) > 1 else first.outcome
        out.append(_candidate(tool=first.tool, role=first.role, user=first.user, outcome=outcome,
                              at=first.at, source=first.ref,
                              question=None, calls=chain))
    return out


def harvest_call_log(project: Project, *, per_stratum: int = 5, oversample: float = 3, seed: int = 0,
                     retry_window_s: float = 300) -> list[Candidate]:
    """Stratified candidates from the project's call log (the registry's ``call_log`` table)."""
    registry = open_registry(project)
    try:
        rows = registry.calls()
    finally:
        registry.close()
    found = call_log_candidates(rows, retry_window_s=retry_window_s,
                                where=f"{project.config.registry.url} (call_log)")
    return stratify(found, per_stratum=per_stratum, oversample=oversample, seed=seed)


# ---------------------------------------------------------------- OTLP JSON spans


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
        return [json.loads(text)]
    except json.JSONDecodeError as whole:
        lines = [(n, s) for n, s in enumerate(text.splitlines(), start=1) if s.strip()]
        docs: list[Any] = []
        for n, line in lines:
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as e:  # not JSON Lines either: report the likelier reading
                where, msg = (f"{path}:{n}", e.msg) if docs else (f"{path}:{whole.lineno}", whole.msg)
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


# ---------------------------------------------------------------- keep what discriminates

T = TypeVar("T", Case, Candidate)


@dataclass
class Discrimination(Generic[T]):
    """What :func:`keep_discriminating` kept, dropped, and could not judge, each with a reason."""

    kept: list[T] = field(default_factory=list)
    dropped: list[T] = field(default_factory=list)
    unlabelled: list[T] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


def _run_labels(run_dirs: Sequence[Path]) -> dict[str, list[LabelLine]]:
    from tether.eval.report import load_labels

    if not run_dirs:
        raise ConfigError("no labelled run folder given.",
                          hint="Give one RUN_DIR per configuration, each labelled by tether eval label.")
    out: dict[str, list[LabelLine]] = {}
    for d in map(Path, run_dirs):
        path = d / "labels.jsonl"
        if not path.is_file():
            raise ConfigError(f"run folder {str(d)!r} has no labels.jsonl.",
                              hint=f"Label it first: tether eval label {d}")
        try:
            lines = load_labels(path)
        except TetherError as e:
            raise ConfigError(e.message, where=e.where, hint=e.hint) from None
        for line in lines:
            out.setdefault(line.case_id, []).append(line)
    return out


def _exposes(line: LabelLine) -> str | None:
    if line.correct is False:
        return f"{line.server} failed" + (f" ({line.failure_class})" if line.failure_class else "")
    if line.correct and line.grounded is False:
        return f"{line.server} passed ungrounded" + (
            f" ({line.failure_class})" if line.failure_class else "")
    if line.correct is None or line.grounded is None:
        return f"{line.server} is undecided (needs review)"
    return None


def keep_discriminating(items: Sequence[T], run_dirs: Sequence[Path]) -> Discrimination[T]:
    """Keep the cases at least one configuration failed, passed ungrounded, or left undecided; drop
    those every configuration passed grounded. A case no run labelled is set aside."""
    labels = _run_labels(run_dirs)
    out: Discrimination[T] = Discrimination()
    for item in items:
        cid = (item.case if isinstance(item, Candidate) else item).case_id
        lines = labels.get(cid, [])
        why = [w for w in map(_exposes, lines) if w]
        if not lines:
            out.unlabelled.append(item)
            out.reasons[cid] = "no run labelled it"
        elif why:
            out.kept.append(item)
            out.reasons[cid] = "; ".join(why)
        else:
            out.dropped.append(item)
            out.reasons[cid] = f"every configuration passed grounded ({len(lines)})"
    return out


# ---------------------------------------------------------------- output


def write_candidates(items: Iterable[Case | Candidate], path: Path) -> int:
    """Write cases.jsonl (one Case per line); returns how many lines."""
    cases = [i.case if isinstance(i, Candidate) else i for i in items]
    ids: set[str] = set()
    for c in cases:
        if c.case_id in ids:
            raise ConfigError(f"case_id {c.case_id!r} appears twice.", where=str(path),
                              hint="Harvest into one list, or rename one of them.")
        ids.add(c.case_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(c.model_dump(mode="json"), ensure_ascii=False) + "\n" for c in cases)
    path.write_text(text, encoding="utf-8")
    return len(cases)
