"""Serving a tool kind, registered: how a call of the kind runs, which products it reads, and how
its answer sentence opens.

The other half of each kind is its generation (toolgen/kinds.py): the two meet only in the
kind's name, since generation never imports serving. The call pipeline (serve/pipeline.py) runs
every call through the same checks (visibility, denied products, restricted names, scope,
arguments) and then the kind's runner; the server answers the discovery kinds that read the
caller's own reach (search) or route to another tool (the generic listing) before the pipeline.
A runner module registers its kind when it loads; the built-in ones are loaded by
serve/builtins.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tether.serve.kinds import Answered, Call, Version
from tether.toolgen.model import QueryPlan

if TYPE_CHECKING:
    from tether.serve.executor import Executor


class Finding(Protocol):
    """What a kind answered by the server may ask of the caller's reach (serve/corpus.py)."""

    def search(self, user: str, entry: Version, args: dict[str, Any]) -> Answered: ...

    def query_with(self, user: str, product: str) -> dict[str, Any] | None: ...


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
    answer_here: Callable[[Finding, str, Version, dict[str, Any]], Answered] | None = None
    """For a kind the server answers itself (user, tool, arguments): search, which reads the
    caller's own tool list."""
    then: Callable[[Finding, str, dict[str, Any], dict[str, Any]], dict[str, Any]] | None = (
        None)
    """What the server adds to a result (user, arguments, result): the probe's query_with,
    which needs the caller's tool list."""
    pinned: Callable[[Version, Version], Version] | None = None
    """For a kind whose version carries rules (who may do what, where a credential goes): the
    version a call pinned to a superseded one runs as (pinned, current), or a ToolError whose
    refusal reason is ``superseded``. A pin keeps an old shape, never old permissions."""


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
