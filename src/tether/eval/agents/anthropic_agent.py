"""The ``anthropic`` agent: the Anthropic Messages API with tools.

Tool calls are ``tool_use`` blocks, results go back as ``tool_result`` blocks in the next user
message, and thinking blocks (option ``thinking``) are recorded as the turn's reasoning
and sent back unchanged, as the API requires. The loop itself is shared with the ``openai``
agent (loop.run_loop).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from tether.eval.agents.base import Agent, AgentContext, Answer, register
from tether.eval.agents.loop import (
    COMMON_OPTIONS,
    Call,
    CommonOptions,
    OptionReader,
    Result,
    Step,
    ToolSet,
    endpoint_error,
    error_detail,
    run_loop,
    system_prompt,
)
from tether.eval.trace import Usage

if TYPE_CHECKING:
    import anthropic

DEFAULT_MAX_TOKENS = 1024  # the Messages API requires max_tokens; thinking tokens come on top
ADAPTIVE_MAX_TOKENS = 8192


@register
class AnthropicAgent(Agent):
    """Claude models through the Messages API (or any server that speaks it)."""

    name: ClassVar[str] = "anthropic"
    known_options: ClassVar[frozenset[str]] = COMMON_OPTIONS | {"thinking"}

    def __init__(self, options: dict[str, str] | None = None):
        super().__init__(options)
        r = OptionReader(self.name, self.options, self.known_options)
        self.common = r.common("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
        self.thinking = self._thinking(r)
        # The Messages API (SDK 2.x) no longer takes sampling parameters: temperature is sent only
        # when asked for, in the request body, for a model or compatible server that still reads it.
        self.temperature = self.common.temperature if "temperature" in self.options else None
        budget = self.thinking.get("budget_tokens", ADAPTIVE_MAX_TOKENS if self.thinking else 0)
        self.max_tokens = self.common.max_tokens or DEFAULT_MAX_TOKENS + budget

    @staticmethod
    def _thinking(r: OptionReader) -> dict[str, Any]:
        value = r.text("thinking", "off").strip().lower()
        if value in ("off", "", "default"):
            return {}
        if value == "adaptive":
            return {"type": "adaptive"}
        if value.isdigit() and int(value) >= 1024:
            return {"type": "enabled", "budget_tokens": int(value)}
        raise r.bad("thinking", "off, adaptive or a budget of at least 1024 tokens")

    async def run(self, ctx: AgentContext) -> Answer:
        import anthropic

        c = self.common
        tools = ToolSet(ctx.tools, c.clarify, ctx.instructions)
        async with anthropic.AsyncAnthropic(api_key=c.api_key, base_url=c.base_url,
                                            timeout=c.timeout, max_retries=c.max_retries) as client:
            conv = _Messages(client, self, tools, ctx.question)
            return await run_loop(ctx, conv, tools, c.model, c.max_result_chars)


class _Messages:
    def __init__(self, client: anthropic.AsyncAnthropic, agent: AnthropicAgent, tools: ToolSet,
                 question: str):
        self.client, self.agent, self.tools = client, agent, tools
        self.system = system_prompt(tools.ask, agent.common.system, agent.common.today,
                                    tools.instructions)
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": question}]

    @property
    def c(self) -> CommonOptions:
        return self.agent.common

    def use_tools(self, tools: ToolSet) -> None:
        self.tools = tools

    def request(self, final: bool) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.c.model, "max_tokens": self.agent.max_tokens,
                              "system": self.system, "messages": self.messages}
        if self.agent.thinking:
            kw["thinking"] = self.agent.thinking
        if self.tools.specs:
            kw["tools"] = [{"name": s.wire, "description": s.description, "input_schema": s.parameters}
                           for s in self.tools.specs]
            if final:
                kw["tool_choice"] = {"type": "none"}
        extra = dict(self.c.extra_body)
        if self.agent.temperature is not None:
            extra.setdefault("temperature", self.agent.temperature)
        if extra:
            kw["extra_body"] = extra
        return kw

    async def step(self, turn: int, final: bool) -> Step:
        import anthropic

        url = str(self.client.base_url).rstrip("/")
        started = time.perf_counter()
        try:
            resp = await self.client.messages.create(**self.request(final))
        except anthropic.APIStatusError as e:
            raise endpoint_error("Anthropic", url, e.status_code, error_detail(e.body, e.message),
                                 self.c.api_key_env) from None
        except anthropic.APIConnectionError as e:
            raise endpoint_error("Anthropic", url, None, str(e) or type(e).__name__,
                                 self.c.api_key_env) from None
        ms = (time.perf_counter() - started) * 1000
        texts, thoughts, calls, blocks = [], [], [], []
        for i, b in enumerate(resp.content):
            kind = getattr(b, "type", "")
            if kind == "text":
                texts.append(b.text)
                if b.text:  # the API rejects empty text blocks in the history
                    blocks.append({"type": "text", "text": b.text})
            elif kind == "tool_use":
                args = b.input if isinstance(b.input, dict) else {}
                calls.append(Call(id=b.id or f"toolu_{turn}_{i}", name=b.name, arguments=args))
                blocks.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
            elif kind == "thinking":
                thoughts.append(b.thinking)
                blocks.append({"type": "thinking", "thinking": b.thinking, "signature": b.signature})
            elif kind == "redacted_thinking":
                thoughts.append("[redacted thinking]")
                blocks.append({"type": "redacted_thinking", "data": b.data})
        u = resp.usage
        usage = Usage(
            input_tokens=(u.input_tokens or 0) + (getattr(u, "cache_creation_input_tokens", 0) or 0)
            + (getattr(u, "cache_read_input_tokens", 0) or 0),
            output_tokens=u.output_tokens or 0) if u is not None else Usage()
        return Step(content="".join(texts) or None, calls=calls, reasoning="\n\n".join(thoughts) or None,
                    usage=usage, finish_reason=resp.stop_reason, latency_ms=ms, raw=blocks)

    def add_assistant(self, step: Step) -> None:
        self.messages.append({"role": "assistant", "content": step.raw})

    def add_results(self, results: list[Result], note: str | None) -> None:
        content: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": r.call.id, "content": r.text or "(empty result)",
             "is_error": r.is_error} for r in results]
        if note:
            content.append({"type": "text", "text": note})
        self.messages.append({"role": "user", "content": content})
