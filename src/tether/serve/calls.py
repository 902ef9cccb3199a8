"""One tools/call through the server: a list of small steps, each with one job.

:data:`STEPS` run in order over a :class:`Turn` (the call as it stands): who calls
(:class:`Identify`), which version of which tool (:class:`Pin`), a product named by its tool's
name (:class:`ProductByTool`), its arguments given beside ``arguments`` read inside it
(:class:`ArgumentsInside`), the answer (:class:`Execute`: the server's own for search, else
the executor's policy path in a worker thread, with the schema check beside it), what the server
adds to the result (:class:`Stamp`: the probe's way to the rows, schema drift, the product read
by tool name, deprecation), and the found product mounted in the caller's session
(:class:`Mount`). serve/server.py's ``call_tool`` runs the steps, shapes the result or the error,
and logs the call whatever happened. The executor's own checks are serve/pipeline.py's.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from tether.context.meta import pin_of
from tether.policy.model import role_of
from tether.serve.interpret import INSIDE
from tether.serve.kinds import Answered, Call, runner

if TYPE_CHECKING:
    from tether.serve.server import TetherServer, Version
    from tether.toolgen.model import QueryPlan


@dataclass
class Turn:
    """A call on its way: what it was asked, what each step found, and what the log records."""

    ctx: Any
    name: str
    args: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)
    user: str = "?"
    role: str = "?"
    entry: Version | None = None
    named: dict[str, str] | None = None
    inside: list[str] = field(default_factory=list)  # given beside `arguments`, read inside
    call: Call | None = None  # the call the executor ran (None: answered by the server)
    drift: str | None = None
    answered: Answered | None = None

    @property
    def plan(self) -> QueryPlan | None:
        """The plan that answered: the executed call's (a product's, through the generic
        listing), else the tool's own."""
        if self.call is not None:
            return self.call.plan
        return self.entry.plan if self.entry is not None else None

    @property
    def result(self) -> dict[str, Any]:
        """The answer so far (empty before one): what the call log reads rows and as_of from."""
        return self.answered.result if self.answered is not None else {}


class Step(Protocol):
    name: str

    async def __call__(self, server: TetherServer, turn: Turn) -> None: ...


class Identify:
    """The caller: the stdio user, or the token's subject (a runner token may act as another)."""

    name = "identify"

    async def __call__(self, server: TetherServer, turn: Turn) -> None:
        turn.user = server.current_user(turn.ctx)
        turn.role = role_of(server.project.config, turn.user)[0]


class Pin:
    """The tool's version: the current one, or the one the request's ``_meta`` pins."""

    name = "pin"

    async def __call__(self, server: TetherServer, turn: Turn) -> None:
        turn.entry = server.version_for(turn.user, turn.name, pin_of(turn.ctx.meta))


class ProductByTool:
    """A discovery tool's ``product`` given as a product's listing tool name is that product."""

    name = "product_by_tool"

    async def __call__(self, server: TetherServer, turn: Turn) -> None:
        assert turn.entry is not None
        turn.args, turn.named = server.product_by_tool(turn.user, turn.entry, turn.args)


class ArgumentsInside:
    """A product's arguments given beside ``product`` instead of inside ``arguments`` (models
    flatten the call) are read inside it, and the result says so."""

    name = "arguments_inside"

    async def __call__(self, server: TetherServer, turn: Turn) -> None:
        assert turn.entry is not None
        turn.args, turn.inside = server.arguments_inside(turn.entry, turn.args)


class Execute:
    """The answer: the server's own for a kind it answers itself (search), else the executor's
    (schema check and answer in one worker thread)."""

    name = "execute"

    async def __call__(self, server: TetherServer, turn: Turn) -> None:
        entry = turn.entry
        assert entry is not None
        here = runner(entry.plan.kind)
        if here is not None and here.answer_here is not None:
            turn.answered = await anyio.to_thread.run_sync(here.answer_here, server, turn.user,
                                                           entry, turn.args)
            return
        turn.call = server.call_of(turn.user, entry, turn.args)
        turn.drift, turn.answered = await anyio.to_thread.run_sync(server.run_call, turn.call)


class Stamp:
    """What the server adds to the result: the kind's own addition (the probe's way to the
    rows), schema drift, the product read by its tool's name, and a deprecation notice."""

    name = "stamp"

    async def __call__(self, server: TetherServer, turn: Turn) -> None:
        assert turn.answered is not None and turn.entry is not None and turn.plan is not None
        result = turn.answered.result
        after = runner(turn.plan.kind)
        if after is not None and after.then is not None:
            result = after.then(server, turn.user, turn.args, result)
        if turn.drift:
            result["schema_drift"] = turn.drift
        if turn.named is not None:
            result["product_from_tool"] = turn.named
        if turn.inside:  # said as the product's parameter each was read as, inside arguments
            read = dict(result.get("interpreted") or {})
            result["interpreted"] = {**{k: INSIDE + read.pop(k, k) for k in turn.inside},
                                     **read}
        entry = turn.entry
        if entry.asked is not None:
            result["pinned"] = {"asked": entry.asked, "ran": entry.version, "why": (
                f"version {entry.asked} is superseded; what {entry.version} allows and "
                "requires is what applies")}
        if entry.successor is not None:
            result["deprecation"] = (
                f"version {entry.version} is deprecated; served until "
                f"{entry.served_until:%Y-%m-%d}; use {entry.successor}")
        turn.answered.result = result


class Mount:
    """A product found, explained or read by name joins the caller's session list; the answer
    stands whatever happens to the list (a client gone, values unreadable just now)."""

    name = "mount"

    async def __call__(self, server: TetherServer, turn: Turn) -> None:
        assert turn.entry is not None and turn.answered is not None
        try:
            await server.mount_found(turn.ctx, turn.user, turn.entry, turn.args,
                                     turn.answered.result)
        except Exception as e:
            print(f"tether: {turn.name}: the found product was not added to the session's list "
                  f"({type(e).__name__}: {e})", file=sys.stderr, flush=True)


STEPS: tuple[Step, ...] = (Identify(), Pin(), ProductByTool(), ArgumentsInside(), Execute(),
                           Stamp(), Mount())
"""A tools/call's steps, in order."""
