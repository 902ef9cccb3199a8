"""Serving a tool kind, registered: how a call of the kind runs, which products it reads, and how
its answer sentence opens.

The other half of each kind is its generation (toolgen/kinds.py): the two meet only in the
kind's name, since generation never imports serving. The executor runs every call through the
same checks (visibility, denied products, restricted names, scope, arguments) and then the
kind's runner; the server answers the discovery kinds that read the caller's own tool list
(search) or route to another tool (the generic listing) before the executor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.serve.executor import Answered, Call, Executor
    from tether.serve.server import TetherServer, Version
    from tether.toolgen.model import QueryPlan


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


RUNNERS: dict[str, Runner] = {}


def register(runner: Runner) -> Runner:
    if runner.kind in RUNNERS and RUNNERS[runner.kind] != runner:
        raise ValueError(f"a runner for tool kind {runner.kind!r} is registered twice")
    RUNNERS[runner.kind] = runner
    return runner


def runner(kind: str) -> Runner | None:
    """The runner of ``kind`` (None: no kind this server can run)."""
    if kind not in RUNNERS:
        _builtins()
    return RUNNERS.get(kind)


@functools.cache
def _builtins() -> None:
    """The built-in runners register as their modules load (as a third party's would)."""
    from tether.serve import discovery, generic, listing, metric, probe  # noqa: F401
