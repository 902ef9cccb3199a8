"""The tool loop both model agents share (``openai``, ``anthropic``), and their common options.

The provider part of each agent is a small conversation object (send one request, append the
assistant message, append the tool results); :func:`run_loop` decides what is a tool call, a
clarification or the final answer, and records each model turn.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tether.eval.agents.base import AgentContext, AgentError, Answer
from tether.eval.trace import ModelTurn, RequestedCall, ToolCall, Usage

# --- the shared loop -------------------------------------------------------------------------

ASK_USER = "ask_user"
LIMIT_NOTE = ("You have reached the turn limit: no more tool calls. Answer the question now with "
              "what you have, stating the number or value clearly.")
LIMIT_SUFFIX = "(Stopped at the turn limit: this answer uses only the tool results gathered so far.)"

COMMON_OPTIONS = frozenset({"model", "base_url", "api_key_env", "temperature", "max_tokens", "timeout",
                            "max_retries", "system", "clarify", "max_result_chars", "extra_body",
                            "today"})


def system_prompt(ask_name: str | None, extra: str, today: dt.date | None = None,
                  instructions: str | None = None) -> str:
    """What the agent is told before the question; the server's own instructions (from its
    initialize result) follow, as real clients put them in the system prompt."""
    parts = ["You answer a user's question about their data. Use the tools to get the facts; "
             "do not guess numbers or values the tools can give you. Pass only the arguments the "
             "question needs: leave an optional filter out unless the question names its value."]
    if today is not None:
        parts.append(f"Today's date is {today.isoformat()}.")
    if ask_name:
        parts.append(f"If the question is ambiguous (which period, which definition of a business "
                     f"term, which entity or which part of the data it means), call the `{ask_name}` "
                     f"tool with one short question before answering.")
    parts.append("When you have the answer, reply with a short final answer that states the number "
                 "or value clearly, with its unit and period where they apply.")
    if extra:
        parts.append(extra)
    if instructions:
        parts.append(f"The data server says: {instructions.strip()}")
    return " ".join(parts)


@dataclass(frozen=True)
class ToolSpec:
    wire: str  # the name the model sees (providers allow ^[A-Za-z0-9_-]{1,64}$)
    original: str  # the MCP tool's name
    description: str
    parameters: dict[str, Any]


ASK_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string",
                                "description": "One short question for the user."}},
    "required": ["question"],
}
ASK_DESCRIPTION = ("Ask the user a clarifying question when their question is ambiguous (which "
                   "period, which definition, which entity). Returns the user's answer.")


class ToolSet:
    """The MCP tools under provider-safe names, plus the synthetic ask_user tool."""

    def __init__(self, tools: list[dict[str, Any]], clarify: bool,
                 instructions: str | None = None):
        self.instructions = instructions  # the server's, from its initialize result
        self.specs: list[ToolSpec] = []
        used: set[str] = set()
        for t in tools:
            name = str(t.get("name", ""))
            wire = _unique(re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "tool", used)
            schema = t.get("inputSchema")
            params = dict(schema) if isinstance(schema, dict) else {}
            params.setdefault("type", "object")
            if params["type"] == "object":
                params.setdefault("properties", {})
            self.specs.append(ToolSpec(wire, name, str(t.get("description") or ""), params))
        self.ask: str | None = None
        if clarify:
            self.ask = _unique(ASK_USER, used)
            self.specs.append(ToolSpec(self.ask, self.ask, ASK_DESCRIPTION, ASK_PARAMETERS))
        self._by_wire = {s.wire: s.original for s in self.specs}

    def original(self, wire: str) -> str:
        """The MCP name behind a name the model used (unknown names pass through unchanged)."""
        return self._by_wire.get(wire, wire)


def _unique(name: str, used: set[str]) -> str:
    out, n = name, 1
    while out in used:
        n += 1
        out = f"{name[:60]}_{n}"
    used.add(out)
    return out


@dataclass
class Call:
    id: str
    name: str  # as the model wrote it (wire name)
    arguments: dict[str, Any]
    raw: str = "{}"  # the arguments exactly as the model wrote them, sent back in the history
    error: str | None = None  # the arguments were not a JSON object: the tool is not called


@dataclass
class Step:
    """One model response, provider-neutral."""

    content: str | None
    calls: list[Call] = field(default_factory=list)
    reasoning: str | None = None
    draft: str | None = None  # ask_again: the answer chosen before the plain-text one
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    latency_ms: float = 0.0
    raw: Any = None  # what the provider needs to replay the assistant message


@dataclass
class Result:
    call: Call
    text: str
    is_error: bool = False
    clarification: bool = False


class Conversation(Protocol):
    async def step(self, turn: int, final: bool) -> Step: ...

    def add_assistant(self, step: Step) -> None: ...

    def add_results(self, results: list[Result], note: str | None) -> None: ...

    def use_tools(self, tools: ToolSet) -> None:
        """The server's tool list changed: offer these from the next step on."""


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """The call's arguments, or an error the model is told about (the tool is then not called)."""
    if not raw or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        return {}, f"the arguments were not valid JSON ({e.msg} at column {e.colno})"
    if not isinstance(value, dict):
        return {}, "the arguments must be a JSON object"
    return value, None


def render_result(call: ToolCall, limit: int) -> str:
    """A tool result as the text the model reads, cut to ``limit`` characters."""
    if call.text is not None:
        text = call.text
    elif call.structured is not None:
        text = json.dumps(call.structured, default=str)
    else:
        text = ""
    return truncate(text, limit)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters. A JSON object is cut inside its lists instead, so the
    fields after a long list (row counts, next cursors, as_of) still reach the model."""
    if limit <= 0 or len(text) <= limit:
        return text
    fitted = _fit_json(text, limit)
    if fitted is not None:
        return fitted
    first, _, rest = text.partition("\n")  # an answer sentence, then the JSON
    if rest and len(first) < limit // 2:
        fitted = _fit_json(rest, limit - len(first) - 1)
        if fitted is not None:
            return first + "\n" + fitted
    return text[:limit] + f"\n[truncated: the first {limit} of {len(text)} characters]"


def _fit_json(text: str, limit: int) -> str | None:
    """The object with its longest list shortened until it fits, and a note saying how much of
    which list is shown; None when the text is not a JSON object or cannot be made to fit."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    lists = [k for k, v in value.items() if isinstance(v, list) and v]
    if not lists:
        return None
    key = max(lists, key=lambda k: len(json.dumps(value[k], default=str)))
    items = value[key]

    def shown(n: int) -> str:
        note = f"[shortened by the agent: the first {n} of {len(items)} items of {key!r}]"
        return json.dumps({**value, key: items[:n]}, default=str) + "\n" + note

    lo, hi = 0, len(items)  # the most items that fit: binary search on the count
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(shown(mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    out = shown(lo)
    return out if len(out) <= limit else None


_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def parse_value(text: str) -> int | float | None:
    """A number when the whole answer is one bare number, else None (the labeller reads the text)."""
    s = text.strip().rstrip(".").strip()
    if not _NUMBER.fullmatch(s):
        return None
    s = s.replace(",", "")
    return float(s) if "." in s else int(s)


async def _perform(ctx: AgentContext, tools: ToolSet, call: Call, turn: int, limit: int) -> Result:
    if call.error:
        return Result(call, f"Error: {call.error}. Call the tool again with a JSON object of "
                      f"arguments.", is_error=True)
    if tools.ask is not None and call.name == tools.ask:
        q = call.arguments.get("question")
        question = q if isinstance(q, str) else json.dumps(call.arguments)
        return Result(call, ctx.ask_user(question, turn), clarification=True)
    done = await ctx.call_tool(tools.original(call.name), call.arguments, turn)
    return Result(call, render_result(done, limit), is_error=done.is_error)


async def run_loop(ctx: AgentContext, conv: Conversation, tools: ToolSet, model: str,
                   max_result_chars: int) -> Answer:
    """Ask, call tools, pass results back, until a final answer or ``ctx.max_turns`` model turns."""
    limit = max(1, ctx.max_turns)
    final, at_limit = limit == 1, False
    for turn in range(limit):
        step = await conv.step(turn, final=final)
        calls = [] if final else step.calls
        asked = any(tools.ask is not None and c.name == tools.ask for c in calls)
        kind: Literal["model", "clarification", "answer"] = (
            "answer" if final or not calls else "clarification" if asked else "model")
        ctx.record_turn(ModelTurn(
            index=turn, content=step.content, reasoning=step.reasoning,
            tool_calls=[RequestedCall(id=c.id, name=tools.original(c.name), arguments=c.arguments)
                        for c in step.calls],
            usage=step.usage, latency_ms=step.latency_ms, finish_reason=step.finish_reason, kind=kind,
            draft=step.draft))
        if kind == "answer":
            text = step.content or ""
            shown = (f"{text}\n\n{LIMIT_SUFFIX}" if text else LIMIT_SUFFIX) if at_limit else text
            return Answer(text=shown, value=parse_value(text), model=model)
        conv.add_assistant(step)
        results = [await _perform(ctx, tools, c, turn, max_result_chars) for c in calls]
        final = at_limit = turn + 2 >= limit
        conv.add_results(results, LIMIT_NOTE if final else None)
        listed = await ctx.relist() if ctx.relist is not None else None
        if listed is not None:  # the server said its list changed: a real client lists again
            tools = ToolSet(listed, clarify=tools.ask is not None,
                            instructions=tools.instructions)
            conv.use_tools(tools)
    raise AssertionError("unreachable: the last turn is always an answer turn")


# --- options ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommonOptions:
    model: str
    base_url: str | None
    api_key: str
    api_key_env: str
    temperature: float | None
    max_tokens: int | None
    timeout: float
    max_retries: int
    system: str
    clarify: bool
    max_result_chars: int
    extra_body: dict[str, Any]
    today: dt.date | None = None  # told to the model: "last quarter" needs a date to mean anything


class OptionReader:
    """Typed access to ``--agent-option`` strings, each error naming the option and the agent."""

    def __init__(self, agent: str, options: dict[str, str], known: frozenset[str]):
        self.agent, self.options = agent, options
        unknown = sorted(set(options) - known)
        if unknown:
            raise AgentError(f"agent {agent}: unknown option {unknown[0]!r}.",
                             hint="Options: " + ", ".join(sorted(known)) + " (docs/eval-agents.md).")

    def bad(self, key: str, expected: str) -> AgentError:
        return AgentError(f"agent {self.agent}: option {key}={self.options[key]!r} is not {expected}.",
                          hint="See docs/eval-agents.md for the options.")

    def text(self, key: str, default: str = "") -> str:
        return self.options.get(key, default)

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.options.get(key, default)
        if value not in choices:
            raise self.bad(key, "one of " + ", ".join(repr(c) for c in choices))
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.options.get(key)
        if value is None:
            return default
        if value.lower() in ("true", "yes", "1", "on"):
            return True
        if value.lower() in ("false", "no", "0", "off"):
            return False
        raise self.bad(key, "true or false")

    def integer(self, key: str, default: int | None) -> int | None:
        value = self.options.get(key)
        if value is None or value.lower() in ("", "none"):
            return default if value is None else None
        try:
            return int(value)
        except ValueError:
            raise self.bad(key, "a whole number") from None

    def number(self, key: str, default: float | None) -> float | None:
        value = self.options.get(key)
        if value is None or value.lower() in ("", "none"):
            return default if value is None else None
        try:
            return float(value)
        except ValueError:
            raise self.bad(key, "a number") from None

    def date(self, key: str) -> dt.date | None:
        value = self.options.get(key, "").strip()
        if not value or value.lower() == "none":
            return None
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            raise self.bad(key, "a date (YYYY-MM-DD)") from None

    def common(self, key_env: str, url_env: str) -> CommonOptions:
        model = self.options.get("model", "").strip()
        if not model:
            raise AgentError(f"agent {self.agent} needs a model.",
                             hint="Pass --agent-option model=NAME (for a local server, the name it "
                             "serves; see docs/eval-agents.md).")
        base_url = self.options.get("base_url") or os.environ.get(url_env) or None
        env_name = self.options.get("api_key_env") or key_env
        api_key = os.environ.get(env_name, "")
        if not api_key:
            # A named variable that is unset is a mistake; the default one may be absent locally.
            if base_url is None or "api_key_env" in self.options:
                raise AgentError(f"agent {self.agent}: no API key: {env_name} is not set.",
                                 hint=f"Export {env_name}, name another variable with --agent-option "
                                 f"api_key_env=VAR, or point base_url at a local server.")
            api_key = "not-needed"  # local servers accept any key; the SDKs insist on one
        extra = self.options.get("extra_body", "").strip()
        try:
            extra_body = json.loads(extra) if extra else {}
        except json.JSONDecodeError:
            raise self.bad("extra_body", "a JSON object") from None
        if not isinstance(extra_body, dict):
            raise self.bad("extra_body", "a JSON object")
        timeout = self.number("timeout", 120.0)
        retries = self.integer("max_retries", 2)
        chars = self.integer("max_result_chars", 4000)
        return CommonOptions(
            model=model, base_url=base_url, api_key=api_key, api_key_env=env_name,
            temperature=self.number("temperature", 0.0), max_tokens=self.integer("max_tokens", None),
            timeout=timeout if timeout is not None else 120.0,
            max_retries=retries if retries is not None else 2, system=self.text("system"),
            clarify=self.flag("clarify", True), max_result_chars=chars or 0, extra_body=extra_body,
            today=self.date("today"))


def endpoint_error(provider: str, url: str, status: int | None, detail: str, key_env: str
                   ) -> AgentError:
    """A provider failure as one paragraph naming the endpoint and what to try."""
    detail = " ".join(detail.split()).rstrip(".")
    detail = detail if len(detail) <= 300 else detail[:300] + "..."
    if status is None:
        return AgentError(f"could not reach the {provider} endpoint {url}: {detail}.",
                          hint="Check base_url and that the server is running; a slow local model "
                          "may need a larger timeout option.")
    hints = {401: f"Check the key in ${key_env} (option api_key_env names the variable).",
             403: f"Check the key in ${key_env} and that it may use this model.",
             404: "Check base_url (most OpenAI-compatible servers want it to end in /v1) and model.",
             429: "The endpoint is rate-limiting: retry later or raise max_retries."}
    hint = hints.get(status) or (
        "The server failed on this request; for llama.cpp see the quirk options in "
        "docs/eval-agents.md (empty_content, tool_result_role, after_tool_choice, constrained)."
        if status >= 500 else "The endpoint rejected the request; see its message.")
    return AgentError(f"the {provider} endpoint {url} answered HTTP {status}: {detail}.", hint=hint)


def error_detail(body: object, fallback: str) -> str:
    """The provider's own error message, when its body has one."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return fallback
