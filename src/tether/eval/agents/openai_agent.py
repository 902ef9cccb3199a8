"""The ``openai`` agent: any OpenAI-compatible chat-completions endpoint.

Hosted models and local servers (vLLM, Ollama, llama.cpp) speak the same protocol, each with its
own quirks; the quirks are options (docs/eval-agents.md), never a check of the model's name.
This module also holds the tool loop the ``anthropic`` agent shares: the provider part of each
agent is a small conversation object (send one request, append the assistant message, append the
tool results); the loop decides what is a tool call, a clarification or the final answer.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from tether.eval.agents.base import Agent, AgentContext, AgentError, Answer, register
from tether.eval.trace import ModelTurn, RequestedCall, ToolCall, Usage

if TYPE_CHECKING:
    import openai

# --- the shared loop -------------------------------------------------------------------------

ASK_USER = "ask_user"
ANSWER_NOW = "Now give your final answer to the question, stating the number or value clearly."
LIMIT_NOTE = ("You have reached the turn limit: no more tool calls. Answer the question now with "
              "what you have, stating the number or value clearly.")
LIMIT_SUFFIX = "(Stopped at the turn limit: this answer uses only the tool results gathered so far.)"

COMMON_OPTIONS = frozenset({"model", "base_url", "api_key_env", "temperature", "max_tokens", "timeout",
                            "max_retries", "system", "clarify", "max_result_chars", "extra_body",
                            "today"})


def system_prompt(ask_name: str | None, extra: str, today: dt.date | None = None) -> str:
    """What the agent is told before the question."""
    parts = ["You answer a user's question about their data. Use the tools to get the facts; "
             "do not guess numbers or values the tools can give you. Pass only the arguments the "
             "question needs: leave an optional filter out unless the question names its value."]
    if today is not None:
        parts.append(f"Today's date is {today.isoformat()}.")
    if ask_name:
        parts.append(f"If the question is ambiguous (which period, which definition of a business "
                     f"term, which customer, product or region it means), call the `{ask_name}` "
                     f"tool with one short question before answering.")
    parts.append("When you have the answer, reply with a short final answer that states the number "
                 "or value clearly, with its unit and period where they apply.")
    if extra:
        parts.append(extra)
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

    def __init__(self, tools: list[dict[str, Any]], clarify: bool):
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
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    latency_ms: float = 0.0
    wants_answer: bool = False  # constrained mode: the model chose "answer"; a plain step follows
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
            "answer" if final or not (calls or step.wants_answer)
            else "clarification" if asked else "model")
        ctx.record_turn(ModelTurn(
            index=turn, content=step.content, reasoning=step.reasoning,
            tool_calls=[RequestedCall(id=c.id, name=tools.original(c.name), arguments=c.arguments)
                        for c in step.calls],
            usage=step.usage, latency_ms=step.latency_ms, finish_reason=step.finish_reason, kind=kind))
        if kind == "answer":
            text = step.content or ""
            shown = (f"{text}\n\n{LIMIT_SUFFIX}" if text else LIMIT_SUFFIX) if at_limit else text
            return Answer(text=shown, value=parse_value(text), model=model)
        conv.add_assistant(step)
        results = [await _perform(ctx, tools, c, turn, max_result_chars) for c in calls]
        final = step.wants_answer or turn + 2 >= limit
        at_limit = final and not step.wants_answer
        conv.add_results(results, ANSWER_NOW if step.wants_answer else LIMIT_NOTE if final else None)
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


# --- the OpenAI-compatible agent -------------------------------------------------------------

TOOL_CHOICES = ("auto", "none", "required", "unset")


@dataclass(frozen=True)
class OpenAIOptions:
    common: CommonOptions
    tool_choice: str
    after_tool_choice: str
    tool_result_role: str
    empty_content: str | None  # what an assistant message without text carries; "omit" drops the key
    constrained: bool
    constrained_format: str
    describe_tools: str  # "request": only in the tools field; "system": also in the prompt


@register
class OpenAIAgent(Agent):
    """Any OpenAI-compatible chat-completions endpoint: hosted, vLLM, Ollama, llama.cpp."""

    name: ClassVar[str] = "openai"
    known_options: ClassVar[frozenset[str]] = COMMON_OPTIONS | {
        "tool_choice", "after_tool_choice", "tool_result_role", "empty_content", "constrained",
        "constrained_format", "describe_tools"}

    def __init__(self, options: dict[str, str] | None = None):
        super().__init__(options)
        r = OptionReader(self.name, self.options, self.known_options)
        empty = r.text("empty_content", "")
        self.settings = OpenAIOptions(
            common=r.common("OPENAI_API_KEY", "OPENAI_BASE_URL"),
            tool_choice=r.choice("tool_choice", TOOL_CHOICES, "auto"),
            after_tool_choice=r.choice("after_tool_choice", TOOL_CHOICES, "auto"),
            tool_result_role=r.choice("tool_result_role", ("tool", "user"), "tool"),
            empty_content=None if empty.lower() == "null" else empty,
            constrained=r.flag("constrained", False),
            constrained_format=r.choice("constrained_format", ("json_object", "json_schema"),
                                        "json_object"),
            describe_tools=r.choice("describe_tools", ("request", "system"), "request"))

    async def run(self, ctx: AgentContext) -> Answer:
        import openai

        c = self.settings.common
        tools = ToolSet(ctx.tools, c.clarify)
        async with openai.AsyncOpenAI(api_key=c.api_key, base_url=c.base_url, timeout=c.timeout,
                                      max_retries=c.max_retries) as client:
            chat = _Chat(client, self.settings, tools, ctx.question)
            conv: Conversation = _ConstrainedChat(chat) if self.settings.constrained else chat
            return await run_loop(ctx, conv, tools, c.model, c.max_result_chars)


class _Chat:
    """Native tool calling: tools in the request, tool_calls in the answer."""

    def __init__(self, client: openai.AsyncOpenAI, settings: OpenAIOptions, tools: ToolSet, question: str):
        self.client, self.s, self.tools = client, settings, tools
        prompt = system_prompt(tools.ask, settings.common.system, settings.common.today)
        if settings.describe_tools == "system" and not settings.constrained:
            prompt += "\n\n" + describe_tools(tools)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompt},
            {"role": "user", "content": question}]
        self.after_tool = False

    def request(self, final: bool) -> dict[str, Any]:
        c = self.s.common
        kw: dict[str, Any] = {"model": c.model, "messages": self.messages}
        if c.temperature is not None:
            kw["temperature"] = c.temperature
        if c.max_tokens is not None:
            kw["max_tokens"] = c.max_tokens
        if c.extra_body:
            kw["extra_body"] = c.extra_body
        if self.tools.specs and not self.s.constrained:
            kw["tools"] = [{"type": "function", "function": {
                "name": s.wire, "description": s.description, "parameters": s.parameters}}
                for s in self.tools.specs]
            choice = "none" if final else self.s.after_tool_choice if self.after_tool \
                else self.s.tool_choice
            if choice != "unset":
                kw["tool_choice"] = choice
        return kw

    async def send(self, kw: dict[str, Any]) -> tuple[Any, float]:
        import openai

        c = self.s.common
        url = str(self.client.base_url).rstrip("/")
        started = time.perf_counter()
        try:
            resp = await self.client.chat.completions.create(**kw)
        except openai.APIStatusError as e:
            raise endpoint_error("OpenAI-compatible", url, e.status_code,
                                 error_detail(e.body, e.message), c.api_key_env) from None
        except openai.APIConnectionError as e:
            raise endpoint_error("OpenAI-compatible", url, None, str(e) or type(e).__name__,
                                 c.api_key_env) from None
        if not getattr(resp, "choices", None):
            raise AgentError(f"the OpenAI-compatible endpoint {url} returned no choices.",
                             hint="Check that base_url points at a chat-completions server.")
        return resp, (time.perf_counter() - started) * 1000

    async def step(self, turn: int, final: bool) -> Step:
        resp, ms = await self.send(self.request(final))
        choice = resp.choices[0]
        msg = choice.message
        calls = []
        for i, tc in enumerate(msg.tool_calls or []):
            fn = getattr(tc, "function", None)
            if fn is None:  # a custom (non-function) tool call: we offered none
                continue
            args, err = parse_arguments(fn.arguments)
            calls.append(Call(id=tc.id or f"call_{turn}_{i}", name=fn.name, arguments=args,
                              raw=fn.arguments or "{}", error=err))
        return Step(content=msg.content, calls=calls, reasoning=_reasoning(msg), usage=_usage(resp),
                    finish_reason=choice.finish_reason, latency_ms=ms)

    def assistant_message(self, content: str | None) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant"}
        if content:
            msg["content"] = content
        elif self.s.empty_content != "omit":
            msg["content"] = self.s.empty_content  # "" by default: llama.cpp fails on null
        return msg

    def add_assistant(self, step: Step) -> None:
        msg = self.assistant_message(step.content)
        msg["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": c.raw}} for c in step.calls]
        self.messages.append(msg)

    def add_results(self, results: list[Result], note: str | None) -> None:
        # a user's answer to ask_user is not a tool result: the next request still offers the tools
        # with the first-turn tool_choice (after_tool_choice=none would forbid every data call)
        self.after_tool = self.after_tool or any(not r.clarification for r in results)
        if self.s.tool_result_role == "user":
            self.messages.append({"role": "user", "content": results_as_text(results, note)})
            return
        for r in results:
            text = f"Error: {r.text}" if r.is_error and not r.text.startswith("Error") else r.text
            self.messages.append({"role": "tool", "tool_call_id": r.call.id, "content": text})
        if note:
            self.messages.append({"role": "user", "content": note})


def results_as_text(results: list[Result], note: str | None) -> str:
    """Tool results as one user message, for servers that mishandle ``role: tool``."""
    parts = []
    for r in results:
        if r.clarification:
            parts.append(f"The user answered: {r.text}")
        else:
            head = "Error from" if r.is_error else "Result of"
            parts.append(f"{head} {r.call.name}({json.dumps(r.call.arguments)}):\n{r.text}")
    if note:
        parts.append(note)
    return "\n\n".join(parts)


class _ConstrainedChat:
    """No native tools: each step is one JSON object the server's grammar forces into shape."""

    def __init__(self, chat: _Chat):
        self.chat = chat
        tools = chat.tools
        chat.messages[0]["content"] = constrained_prompt(tools, chat.s.common.system,
                                                         chat.s.common.today)
        schema = step_schema(tools)
        self.response_format: dict[str, Any] = (
            {"type": "json_object", "schema": schema} if chat.s.constrained_format == "json_object"
            else {"type": "json_schema", "json_schema": {"name": "next_step", "schema": schema}})
        self.json_answer = ""

    async def step(self, turn: int, final: bool) -> Step:
        kw = self.chat.request(final)
        if not final:
            kw["response_format"] = self.response_format
        resp, ms = await self.chat.send(kw)
        choice = resp.choices[0]
        text = choice.message.content or ""
        step = Step(content=text, reasoning=_reasoning(choice.message), usage=_usage(resp),
                    finish_reason=choice.finish_reason, latency_ms=ms)
        if final:
            step.content = text or self.json_answer
            return step
        picked = parse_choice(text)
        if isinstance(picked, str):
            self.json_answer, step.wants_answer = picked, True
        elif picked is not None:
            name, args = picked
            step.calls = [Call(id=f"json_{turn}", name=name, arguments=args, raw=json.dumps(args))]
        return step  # not JSON at all (a server without grammar support): the text is the answer

    def add_assistant(self, step: Step) -> None:
        if step.wants_answer:  # only a signal: a small model's JSON draft would leak into the answer
            return
        self.chat.messages.append(self.chat.assistant_message(step.content))

    def add_results(self, results: list[Result], note: str | None) -> None:
        if note:
            note += " Reply in plain text, not JSON."
        last = self.chat.messages[-1]
        if not results and note and last["role"] == "user":
            last["content"] = f"{last['content']}\n\n{note}"
            return
        self.chat.messages.append({"role": "user", "content": results_as_text(results, note)})


def step_schema(tools: ToolSet) -> dict[str, Any]:
    """One choice per tool ({"tool": NAME, "arguments": PARAMS}) plus {"answer": TEXT}."""
    choices: list[dict[str, Any]] = [
        {"type": "object", "properties": {"tool": {"const": s.wire}, "arguments": s.parameters},
         "required": ["tool", "arguments"]} for s in tools.specs]
    choices.append({"type": "object", "properties": {"answer": {"type": "string"}},
                    "required": ["answer"]})
    return {"anyOf": choices}


def describe_tools(tools: ToolSet) -> str:
    """Each tool's name and description, for a server whose chat format drops descriptions."""
    return "Tools:\n" + "\n".join(f"- {s.wire}: {s.description}" for s in tools.specs)


def constrained_prompt(tools: ToolSet, extra: str, today: dt.date | None = None) -> str:
    lines = [system_prompt(tools.ask, extra, today), "", "Tools:"]
    for s in tools.specs:
        lines.append(f"- {s.wire}: {s.description}")
        lines.append(f"  arguments (JSON Schema): {json.dumps(s.parameters, separators=(',', ':'))}")
    lines += ["", 'Reply with exactly one JSON object: {"tool": NAME, "arguments": {...}} to call a '
              'tool, or {"answer": TEXT} when you can answer.']
    return "\n".join(lines)


def parse_choice(text: str) -> tuple[str, dict[str, Any]] | str | None:
    """(tool, arguments) for a tool choice, the text for an answer choice, None when not JSON."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool"), str):
        args = value.get("arguments")
        return value["tool"], args if isinstance(args, dict) else {}
    if "answer" in value:
        answer = value["answer"]
        return answer if isinstance(answer, str) else json.dumps(answer)
    return None


def _usage(resp: Any) -> Usage:
    u = getattr(resp, "usage", None)
    if u is None:
        return Usage()
    return Usage(input_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
                 output_tokens=int(getattr(u, "completion_tokens", 0) or 0))


def _reasoning(msg: Any) -> str | None:
    """``reasoning_content`` (vLLM, llama.cpp, DeepSeek) or ``reasoning`` (Ollama, OpenRouter)."""
    extra = getattr(msg, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key)
        if isinstance(value, str) and value:
            return value
    return None
