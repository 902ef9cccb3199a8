"""The ``openai`` agent: any OpenAI-compatible chat-completions endpoint.

Hosted models and local servers (vLLM, Ollama, llama.cpp) speak the same protocol, each with its
own quirks; the quirks are options (docs/eval-agents.md), never a check of the model's name.
The tool loop it shares with the ``anthropic`` agent is in :mod:`tether.eval.agents.loop`.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tether.eval.agents.base import Agent, AgentContext, AgentError, Answer, register
from tether.eval.agents.loop import (
    COMMON_OPTIONS,
    Call,
    CommonOptions,
    Conversation,
    OptionReader,
    Result,
    Step,
    ToolSet,
    endpoint_error,
    error_detail,
    parse_arguments,
    run_loop,
    system_prompt,
)
from tether.eval.trace import Usage

if TYPE_CHECKING:
    import openai


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
    ask_again: bool  # constrained: after an answer choice, ask for the answer in plain text


@register
class OpenAIAgent(Agent):
    """Any OpenAI-compatible chat-completions endpoint: hosted, vLLM, Ollama, llama.cpp."""

    name: ClassVar[str] = "openai"
    known_options: ClassVar[frozenset[str]] = COMMON_OPTIONS | {
        "tool_choice", "after_tool_choice", "tool_result_role", "empty_content", "constrained",
        "constrained_format", "describe_tools", "ask_again"}

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
            describe_tools=r.choice("describe_tools", ("request", "system"), "request"),
            ask_again=r.flag("ask_again", False))

    async def run(self, ctx: AgentContext) -> Answer:
        import openai

        c = self.settings.common
        tools = ToolSet(ctx.tools, c.clarify, ctx.instructions)
        async with openai.AsyncOpenAI(api_key=c.api_key, base_url=c.base_url, timeout=c.timeout,
                                      max_retries=c.max_retries) as client:
            chat = _Chat(client, self.settings, tools, ctx.question)
            conv: Conversation = _ConstrainedChat(chat) if self.settings.constrained else chat
            return await run_loop(ctx, conv, tools, c.model, c.max_result_chars)


class _Chat:
    """Native tool calling: tools in the request, tool_calls in the answer."""

    def __init__(self, client: openai.AsyncOpenAI, settings: OpenAIOptions, tools: ToolSet, question: str):
        self.client, self.s, self.tools = client, settings, tools
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.prompt(tools)},
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

    def use_tools(self, tools: ToolSet) -> None:
        self.tools = tools
        if self.s.describe_tools == "system" and not self.s.constrained:  # the prompt lists them
            self.messages[0]["content"] = self.prompt(tools)

    def prompt(self, tools: ToolSet) -> str:
        c = self.s.common
        text = system_prompt(tools.ask, c.system, c.today, tools.instructions)
        if self.s.describe_tools == "system" and not self.s.constrained:
            text += "\n\n" + describe_tools(tools)
        return text

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


ANSWER_AGAIN = ("Now give your final answer to the question, stating the number or value clearly. "
                "Reply in plain text, not JSON.")
"""What the loop said before it took an answer choice as the answer (the ask_again option)."""


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
    def use_tools(self, tools: ToolSet) -> None:
        self.chat.use_tools(tools)
        self.__init__(self.chat)  # type: ignore[misc]  # the prompt and grammar list them

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
            return step
        picked = parse_choice(text)
        if isinstance(picked, str):
            # the model chose to answer: its answer is the one given (asking again in plain
            # text gave a second reply that could contradict the first)
            step.content = picked
            if self.chat.s.ask_again:  # measured only: the loop as it was, the draft kept
                await self._ask_again(step)
        elif picked is not None:
            name, args = picked
            step.calls = [Call(id=f"json_{turn}", name=name, arguments=args, raw=json.dumps(args))]
        return step  # not JSON at all (a server without grammar support): the text is the answer

    async def _ask_again(self, step: Step) -> None:
        """The answer asked for once more, in plain text (the reply is the answer, the choice
        its ``draft``): how this loop worked before it took the choice as the answer, kept as
        an option to measure how often the second turn changes an answer."""
        last = self.chat.messages[-1]
        asked = f"{last['content']}\n\n{ANSWER_AGAIN}"
        kw = self.chat.request(True)
        kw["messages"] = [*self.chat.messages[:-1], {**last, "content": asked}]
        resp, ms = await self.chat.send(kw)
        again = resp.choices[0].message.content or ""
        usage = _usage(resp)
        step.draft, step.content = step.content, again or step.content
        step.usage = Usage(input_tokens=step.usage.input_tokens + usage.input_tokens,
                           output_tokens=step.usage.output_tokens + usage.output_tokens)
        step.latency_ms += ms

    def add_assistant(self, step: Step) -> None:
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
    lines = [system_prompt(tools.ask, extra, today, tools.instructions), "", "Tools:"]
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
