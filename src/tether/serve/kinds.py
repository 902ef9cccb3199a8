"""Serving a tool kind, registered: how a call of the kind runs, which products it reads, and how
its answer sentence opens.

The other half of each kind is its generation (toolgen/kinds.py): the two meet only in the
kind's name, since generation never imports serving. The executor runs every call through the
same checks (visibility, denied products, restricted names, scope, arguments) and then the
kind's runner; the server answers the discovery kinds that read the caller's own tool list
(search) or route to another tool (the generic listing) before the executor.

The types a runner works with live here too (a call, its answer, the error the model can fix),
so a runner module needs the executor only for the work it shares; the built-in runners are
registered by serve/builtins.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.context.meta import Evidence
from tether.toolgen.model import QueryPlan

if TYPE_CHECKING:
    from tether.serve.executor import Executor
    from tether.serve.server import TetherServer, Version


@dataclass(frozen=True)
class Runner:
    kind: str
    run: Callable[[Executor, Call], Answered] | None
    """None: answered by the server itself, before the executor (search reads the caller's
    own tool list)."""
    opening: Callable[[QueryPlan, dict[str, Any]], str] | None = None
    """The first part of the answer sentence (default: how many rows)."""
    whole: bool = False
    """The opening is the whole sentence (no window, definition or as_of follows)."""
    reads: Callable[[Executor, Call], list[str]] | None = None
    """The products a call reads, checked against the caller's role before it runs (default:
    the products its definition names, else its plan's product)."""
    answer_here: Callable[[TetherServer, str, Version, dict[str, Any]], Answered] | None = None
    """For a kind the server answers itself (user, tool, arguments): search, which reads the
    caller's own tool list."""
    then: Callable[[TetherServer, str, dict[str, Any], dict[str, Any]], dict[str, Any]] | None = (
        None)
    """What the server adds to a result (user, arguments, result): the probe's query_with,
    which needs the caller's tool list."""
    pinned: Callable[[Version, Version], Version] | None = None
    """For a kind whose version carries rules (who may do what, where a credential goes): the
    version a call pinned to a superseded one runs as (pinned, current), or a ToolError whose
    refusal reason is ``superseded``. A pin keeps an old shape, never old permissions."""


def superseded(pinned: Version, current: Version, why: str) -> ToolError:
    """The refusal of a call pinned to a version whose rules are no longer the current ones."""
    return ToolError(f"Not allowed: {pinned.name}@{pinned.version} is superseded by "
                     f"{current.version}, and {why}; call {pinned.name} without a version pin "
                     f"(see {current.version}'s definition)",
                     refusal={"reason": "superseded",
                              "detail": f"current version {current.version}"})


class ToolError(Exception):
    """A call the model can fix: the message says what was wrong and what is allowed. A policy
    refusal carries ``refusal`` ({reason, detail}) for the result's ``_meta``."""

    def __init__(self, message: str, refusal: dict[str, str] | None = None):
        super().__init__(message)
        self.refusal = refusal


class SourceFailed(ToolError):
    """A call that failed reading its source (an engine error, a timeout, a source that is
    down): the server checks the products it read (serve/health.py) and closes those that can
    no longer be read."""


@dataclass
class Answered:
    """A tool's result and the evidence of what it ran (the server puts the evidence in the
    result's ``_meta["tether/evidence"]``)."""

    result: dict[str, Any]
    evidence: Evidence


@dataclass
class Call:
    user: str
    tool: str
    version: str
    definition: dict[str, Any]
    plan: QueryPlan
    args: dict[str, Any]
    at: dt.datetime | None = None  # the clock, read once a call (Executor.now)


RUNNERS: dict[str, Runner] = {}


def register(runner: Runner) -> Runner:
    if runner.kind in RUNNERS and RUNNERS[runner.kind] != runner:
        raise ValueError(f"a runner for tool kind {runner.kind!r} is registered twice")
    RUNNERS[runner.kind] = runner
    return runner


def runner(kind: str) -> Runner | None:
    """The runner of ``kind`` (None: no kind this server can run). The built-in runners are
    registered when tether.serve loads (serve/builtins.py), as a third party's are when its
    module loads."""
    return RUNNERS.get(kind)
