"""One tools/call through the server: a list of small steps, each with one job, and the result
or the error shaped for the client.

:data:`STEPS` run in order over a :class:`Turn` (the call as it stands): who calls
(:class:`Identify`), which version of which tool (:class:`Pin`), a product named by its tool's
name (:class:`ProductByTool`), its arguments given beside ``arguments`` read inside it
(:class:`ArgumentsInside`), the answer (:class:`Execute`: the server's own for search, else
the call pipeline's in a worker thread, with the schema check beside it), what the server adds
to the result (:class:`Stamp`: the probe's way to the rows, schema drift, the product read by
tool name, deprecation, a pinned shape under the current rules), and the found product mounted
in the caller's session (:class:`Mount`). :func:`handle` runs the steps, shapes the result or
the error, and logs the call whatever happened. The steps take the few operations they use of
the server (:class:`CallSite`), never the server itself. The pipeline's own checks are
serve/pipeline.py's.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types

from tether.context.meta import ToolContext, enum_of, pin_of, refusal_meta, result_meta
from tether.errors import ConfigError
from tether.serve import answer
from tether.serve.calllog import capped_details, logged_arguments
from tether.serve.interpret import INSIDE
from tether.serve.kinds import Answered, Call, SourceFailed, ToolError, Version
from tether.serve.runners import Finding, runner
from tether.serve.visibility import arguments_inside, over_products
from tether.toolgen.kinds import kind
from tether.toolgen.model import QueryPlan

NOT_ANSWERED = "Not answered: fix the arguments and call {tool} again."
"""Ends the text of a call refused for its arguments: small models answered the refusal itself
(its allowed values, a parameter's description, or 0) where a call fixed would have answered."""


class CallSite(Protocol):
    """What a call's steps ask of the server."""

    @property
    def finding(self) -> Finding: ...

    def identify(self, ctx: Any) -> tuple[str, str]: ...

    def version_for(self, user: str, name: str, pin: Any) -> Version: ...

    def reopen(self, user: str, name: str) -> bool: ...

    def product_by_tool(self, user: str, entry: Version, args: dict[str, Any]
                        ) -> tuple[dict[str, Any], dict[str, str] | None]: ...

    def call_of(self, user: str, entry: Version, args: dict[str, Any]) -> Call: ...

    def run_call(self, call: Call) -> tuple[str | None, Answered]: ...

    async def mount_found(self, ctx: Any, user: str, entry: Version, args: dict[str, Any],
                          result: dict[str, Any]) -> None: ...

    def hints(self, user: str, call: Call | None, args: dict[str, Any]) -> str: ...

    def after_failure(self, products: list[str]) -> str: ...

    async def settle(self, entry: dict[str, Any]) -> None: ...


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

    async def __call__(self, site: CallSite, turn: Turn) -> None: ...


class Identify:
    """The caller: the stdio user, or the token's subject (a runner token may act as another)."""

    name = "identify"

    async def __call__(self, site: CallSite, turn: Turn) -> None:
        turn.user, turn.role = site.identify(turn.ctx)


class Pin:
    """The tool's version: the current one, or the one the request's ``_meta`` pins."""

    name = "pin"

    async def __call__(self, site: CallSite, turn: Turn) -> None:
        pin = pin_of(turn.ctx.meta)
        try:
            turn.entry = site.version_for(turn.user, turn.name, pin)
        except ToolError:  # closed just now? its source may be back before the next sweep
            if not await anyio.to_thread.run_sync(site.reopen, turn.user, turn.name):
                raise
            turn.entry = site.version_for(turn.user, turn.name, pin)


class ProductByTool:
    """A discovery tool's ``product`` given as a product's listing tool name is that product."""

    name = "product_by_tool"

    async def __call__(self, site: CallSite, turn: Turn) -> None:
        assert turn.entry is not None
        turn.args, turn.named = site.product_by_tool(turn.user, turn.entry, turn.args)


class ArgumentsInside:
    """A product's arguments given beside ``product`` instead of inside ``arguments`` (models
    flatten the call) are read inside it, and the result says so."""

    name = "arguments_inside"

    async def __call__(self, site: CallSite, turn: Turn) -> None:
        assert turn.entry is not None
        turn.args, turn.inside = arguments_inside(turn.entry, turn.args)


class Execute:
    """The answer: the server's own for a kind it answers itself (search), else the executor's
    (schema check and answer in one worker thread)."""

    name = "execute"

    async def __call__(self, site: CallSite, turn: Turn) -> None:
        entry = turn.entry
        assert entry is not None
        here = runner(entry.plan.kind)
        if here is not None and here.answer_here is not None:
            turn.answered = await anyio.to_thread.run_sync(here.answer_here, site.finding,
                                                           turn.user, entry, turn.args)
            return
        turn.call = site.call_of(turn.user, entry, turn.args)
        turn.drift, turn.answered = await anyio.to_thread.run_sync(site.run_call, turn.call)


class Stamp:
    """What the server adds to the result: the kind's own addition (the probe's way to the
    rows), schema drift, the product read by its tool's name, and a deprecation notice."""

    name = "stamp"

    async def __call__(self, site: CallSite, turn: Turn) -> None:
        assert turn.answered is not None and turn.entry is not None and turn.plan is not None
        result = turn.answered.result
        after = runner(turn.plan.kind)
        if after is not None and after.then is not None:
            result = after.then(site.finding, turn.user, turn.args, result)
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

    async def __call__(self, site: CallSite, turn: Turn) -> None:
        assert turn.entry is not None and turn.answered is not None
        try:
            await site.mount_found(turn.ctx, turn.user, turn.entry, turn.args,
                                     turn.answered.result)
        except Exception as e:
            print(f"tether: {turn.name}: the found product was not added to the session's list "
                  f"({type(e).__name__}: {e})", file=sys.stderr, flush=True)


STEPS: tuple[Step, ...] = (Identify(), Pin(), ProductByTool(), ArgumentsInside(), Execute(),
                           Stamp(), Mount())
"""A tools/call's steps, in order."""


async def handle(site: CallSite, ctx: Any, params: types.CallToolRequestParams
                 ) -> types.CallToolResult:
    """The call through the steps, the result or the error shaped for the client, and the call
    logged whatever happened."""
    turn = Turn(ctx, params.name, dict(params.arguments or {}))
    error: str | None = None
    refusal: str | None = None
    try:
        for step in STEPS:
            await step(site, turn)
        assert turn.answered is not None and turn.plan is not None and turn.entry
        result = answer.rows_last(turn.answered.result)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.sentence(turn.plan, result)),
                     types.TextContent(type="text", text=json.dumps(
                         result, default=str, separators=(",", ":")))],
            structured_content=result,
            _meta=result_meta(turn.entry.version, turn.answered.evidence))
    except ToolError as e:
        error = await _said(site, turn, e)
        refusal = (e.refusal or {}).get("reason")
        meta = refusal_meta(e.refusal) if e.refusal else None
        return types.CallToolResult(content=[types.TextContent(type="text", text=error)],
                                    is_error=True, _meta=meta)
    except (ConfigError, Exception) as e:  # never crash the server on one call
        error = f"{type(e).__name__}: {getattr(e, 'message', None) or e}"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"the call failed: {error}")],
            is_error=True)
    finally:
        await site.settle(_entry(turn, error, refusal))


async def _said(site: CallSite, turn: Turn, e: ToolError) -> str:
    """A tool error as the caller reads it: for a product reached by name, its arguments and
    the products that take one it does not; for a generic listing without a product, the
    products its words match; what a source failure closed; and, unless it is an answer (a
    policy refusal), how to call again."""
    error = str(e)
    call = turn.call
    if call is not None and call.tool != turn.name and not e.refusal:
        error = error.rstrip(".") + schema_hint(call) + site.hints(turn.user, call, turn.args)
    elif (call is None and not e.refusal and turn.entry is not None
          and over_products(turn.entry) and kind(turn.entry.plan.kind).over_listings):
        error += await anyio.to_thread.run_sync(site.hints, turn.user, None, turn.args)
    if isinstance(e, SourceFailed):  # what can no longer be read closes, alone
        error += await anyio.to_thread.run_sync(site.after_failure, read_by(turn))
    if not e.refusal and turn.entry is not None:
        error = f"{error.rstrip('.')}. {NOT_ANSWERED.format(tool=turn.name)}"
    return error


def _entry(turn: Turn, error: str | None, refusal: str | None) -> dict[str, Any]:
    """The call as the call log keeps it."""
    entry = turn.entry
    return {"user": turn.user, "role": turn.role, "tool": turn.name[:200],
            "version": entry.version if entry is not None else None,
            "arguments": logged_arguments(turn.args),
            "latency_ms": (time.perf_counter() - turn.started) * 1000,
            "rows": turn.result.get("row_count"), "error": error,
            "as_of": turn.result.get("as_of"),
            "deprecated": int(entry is not None and entry.successor is not None),
            "details": _details(turn, refusal)}


def _details(turn: Turn, refusal: str | None) -> str | None:
    """What the server read a call as, for `tether learn`: the listing tool that answered (a
    product named to the generic listing: that product's), the product, the arguments it
    interpreted and the values it moved, and a refusal's reason."""
    plan = turn.plan
    return capped_details({
        "answered_by": turn.call.tool if turn.call is not None else None,
        "product": plan.product if plan is not None else None,
        "interpreted": turn.result.get("interpreted"),
        "moved_values": turn.result.get("moved_values"), "refusal": refusal,
        "write": _write_details(turn.result)})


def _write_details(result: dict[str, Any]) -> dict[str, Any] | None:
    """A write tool's call as the log keeps it: the write (its id in the registry's writes),
    whether it was a dry run, applied or a replay, and each row's before and after values."""
    if "action" not in result or "dry_run" not in result:
        return None
    return {k: result.get(k) for k in ("action", "write_id", "dry_run", "applied", "replayed",
                                       "row_count", "changes") if result.get(k) is not None}


def read_by(turn: Turn) -> list[str]:
    """The products a call read (or would have): its plan's and those its definition names."""
    found: list[str] = []
    for step in (turn.call, turn.entry):
        if step is not None:
            found += [*([step.plan.product] if step.plan.product else []),
                      *ToolContext.of(step.definition).products]
    return list(dict.fromkeys(found))


def schema_hint(call: Call) -> str:
    """The arguments a product's listing takes for this caller, as a refused call through the
    generic listing states them: each parameter with its type and its values where it lists
    them (one more turn fixes the call instead of a search for the product's tool)."""
    props = (call.definition.get("inputSchema") or {}).get("properties") or {}
    said = []
    for name, prop in props.items():
        values = enum_of(prop)
        typed = prop.get("type", "string") if isinstance(prop, dict) else "string"
        takes = "one of " + ", ".join(map(str, values[:12])) if values else typed
        said.append(f"{name} ({takes})")
    product = call.plan.product or call.tool
    return f". The arguments {product} takes for you: " + "; ".join(said) if said else ""
