"""The agent plug-in interface.

An agent gets an :class:`AgentContext` (the question, the tools the user sees, a way to call a
tool, a way to ask the simulated user, a way to record a model turn) and returns an
:class:`Answer`. The runner owns the MCP session and writes the trace; agents never touch MCP.

Plug-ins register with :func:`register` (built-ins) or the ``tether.agents`` entry-point group.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, ClassVar

from tether.errors import TetherError
from tether.eval.cases import Case
from tether.eval.trace import ModelTurn, ToolCall


@dataclass
class Answer:
    text: str
    value: Any = None  # a number, string or list when the agent has one
    model: str | None = None


@dataclass
class AgentContext:
    case: Case
    tools: list[dict[str, Any]]  # tools/list in wire form (name, description, inputSchema, ...)
    call_tool: Callable[[str, dict[str, Any], int], Awaitable[ToolCall]]  # (name, args, turn)
    ask_user: Callable[[str, int], str]  # (question, turn) -> the simulated user's answer
    record_turn: Callable[[ModelTurn], None]
    max_turns: int = 6
    trace: dict[str, Any] = field(default_factory=dict)  # the recorded trace, for `replay`
    # the tools/list again when the server has said it changed since the last one, else None
    relist: Callable[[], Awaitable[list[dict[str, Any]] | None]] | None = None
    instructions: str | None = None  # the server's (initialize result), as clients show them


    @property
    def question(self) -> str:
        return self.case.question


class Agent(abc.ABC):
    """One way of answering a case. Options come from ``--agent-option key=value``."""

    name: ClassVar[str]
    needs_model: ClassVar[bool] = True

    def __init__(self, options: dict[str, str] | None = None):
        self.options = dict(options or {})

    @abc.abstractmethod
    async def run(self, ctx: AgentContext) -> Answer: ...

    def describe(self) -> str | None:
        """The model (or instrument) name recorded in the trace."""
        return self.options.get("model")


class AgentError(TetherError):
    """An agent cannot be built or cannot reach its model."""


_REGISTRY: dict[str, type[Agent]] = {}


def register(cls: type[Agent]) -> type[Agent]:
    _REGISTRY[cls.name] = cls
    return cls


def agent_names() -> list[str]:
    _load_builtins()
    return sorted(set(_REGISTRY) | {e.name for e in entry_points(group="tether.agents")})


def make_agent(name: str, options: dict[str, str] | None = None) -> Agent:
    _load_builtins()
    if name not in _REGISTRY:
        for e in entry_points(group="tether.agents"):
            if e.name == name:
                register(e.load())
    if name not in _REGISTRY:
        raise AgentError(f"unknown agent {name!r}.",
                         hint="Agents: " + ", ".join(agent_names()) + ".")
    return _REGISTRY[name](options)


def _load_builtins() -> None:
    import importlib

    for module in ("baseline", "replay", "openai_agent", "anthropic_agent"):
        importlib.import_module(f"tether.eval.agents.{module}")
