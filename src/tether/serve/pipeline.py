"""The checks a call passes before it runs, and what is added after: lists of small steps.

:meth:`Pipeline.answer` runs a call through ``steps.admit`` (:class:`Visible`: the tool is the
caller's; an error here is not translated, as an unknown caller is a configuration error, not a
tool error), then ``steps.before`` (:func:`before_steps`, each one job: its kind runs here, no
product it reads is denied, no name it gives is restricted, its arguments are read where the
tool has them, no filter asks outside the caller's scope, the arguments fit the schema), then
the kind's runner (serve/runners.py), then ``steps.after`` (:func:`after_steps`: what was
interpreted, the window in the evidence). A step raises to refuse (a Refusal, an ArgumentError,
a ToolError); it never reads rows. A cache that serves one step only is that step's
(:class:`NoRestrictedName` keeps each product's restricted names, :class:`SchemaCheck` each
product's fingerprint); what runners share as well (the caller's masks and pinned values,
``Executor.policy_of``) stays on the executor. The server's steps around the pipeline
(identity, pin, execute, stamp, mount) are serve/calls.py's.

The order is the contract: a restricted name is refused before the arguments are interpreted
(an interpretation never turns a restricted name into a parameter), and a value outside the
caller's scope is refused after (it is refused under the parameter it was moved to).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from tether.context.meta import ToolContext
from tether.context.names import ref_column
from tether.errors import TetherError
from tether.policy.entitle import NOT_YOURS, Refusal, table_allowed
from tether.policy.model import restricted_columns, tool_visible
from tether.profiling.fingerprint import schema_fingerprint
from tether.serve import pagination, sqlguard
from tether.serve.arguments import (
    SHAPING,
    as_declared,
    definition_products,
    shown,
    validate,
    with_declared,
    without_blanks,
)
from tether.serve.executor import Executor
from tether.serve.interpret import interpret
from tether.serve.kinds import Answered, Call, SourceFailed, ToolError
from tether.serve.runners import Runner, runner
from tether.toolgen.plan import ArgumentError, chosen_route


@dataclass
class Pending:
    """A call on its way through the steps: the call as it stands (rewritten by the steps that
    read its arguments), its kind's runner, the products it reads, and what was interpreted."""

    call: Call
    kind: Runner | None = None
    reads: list[str] = field(default_factory=list)
    said: dict[str, Any] = field(default_factory=dict)


class Before(Protocol):
    name: str

    def __call__(self, ex: Executor, p: Pending) -> None: ...


class After(Protocol):
    name: str

    def __call__(self, ex: Executor, p: Pending, answered: Answered) -> None: ...


class Visible:
    """The tool is one the caller's role may call."""

    name = "visible"

    def __call__(self, ex: Executor, p: Pending) -> None:
        plan = p.call.plan
        if not tool_visible(ex.project.config, p.call.user, p.call.tool,
                            plan.action.roles if plan.action is not None else None):
            raise ToolError(f"unknown tool {p.call.tool!r} for this user")
        p.call = without_blanks(p.call)


class Runs:
    """The tool's kind has a runner in this server."""

    name = "runs"

    def __call__(self, ex: Executor, p: Pending) -> None:
        p.kind = runner(p.call.plan.kind)
        if p.kind is None or p.kind.run is None:
            raise ToolError(f"tool {p.call.tool!r} has a plan of kind {p.call.plan.kind!r}, "
                            "which this server does not run here")


class NoDeniedTable:
    """Every product the call reads is one the caller's role may read."""

    name = "no_denied_table"

    def __call__(self, ex: Executor, p: Pending) -> None:
        config, call = ex.project.config, p.call
        assert p.kind is not None
        p.reads = p.kind.reads(ex, call) if p.kind.reads else (
            definition_products(call.definition)
            or ([call.plan.product] if call.plan.product else []))
        for product in p.reads:
            if product in config.products and not table_allowed(config, call.user, product):
                raise Refusal("denied_table", f"your role may not read {product}")


class NoRestrictedName:
    """An argument named after a restricted column, or a count or total asked of one, is a
    `restricted` refusal: the column exists, and no one may have it through this server (an
    unknown argument otherwise; the schema's own parameters are never restricted). Each
    product's restricted names are read once (:attr:`hidden`)."""

    name = "no_restricted_name"

    def __init__(self) -> None:
        self.hidden: dict[str, set[str]] = {}

    def names(self, ex: Executor, product: str) -> set[str]:
        """Names of ``product``'s restricted columns and fields (bare, and qualified by the
        product)."""
        if product not in self.hidden:
            leaves = [c.name for col in ex.columns(product) for c in [col, *col.leaves()]]
            found = restricted_columns(ex.project.config, product, leaves)
            self.hidden[product] = {n.lower() for c in found
                                    for n in (c, c.rsplit(".", 1)[-1], f"{product}.{c}")}
        return self.hidden[product]

    def __call__(self, ex: Executor, p: Pending) -> None:
        call = p.call
        props = (call.definition.get("inputSchema") or {}).get("properties", {})
        # an object of arguments (`filter: {...}`) is read as its names (serve/interpret.py):
        # a restricted name inside one is refused as at the top
        given = {**call.args, **{k: v for x in call.args.values() if isinstance(x, dict)
                                 for k, v in x.items()}}
        asked = [k for k in given if k not in props]
        asked += [str(given[k]) for k in SHAPING if given.get(k) is not None]
        for product in p.reads:
            if product not in ex.project.config.products:
                continue
            try:
                hidden = self.names(ex, product)
            except TetherError:
                continue  # a product that is gone: the call says so
            for name in asked:
                if name.lower() in hidden:
                    raise Refusal("restricted", f"{name[:80]} is restricted: not available "
                                  "to anyone through this server")


class Interpreted:
    """Arguments as models write them, put where the tool has them (serve/interpret.py)."""

    name = "interpreted"

    def __call__(self, ex: Executor, p: Pending) -> None:
        args, p.said = interpret(p.call.definition, p.call.plan, p.call.args, ex.project.config)
        p.call = as_declared(dataclasses.replace(p.call, args=args) if p.said else p.call)


class InScope:
    """A filter on a column masked for the caller would reveal its values one guess at a time;
    a filter pinning a row-filtered column to a value outside the caller's scope asks for rows
    the caller may not see. Both are refused, not answered with nothing."""

    name = "in_scope"

    def __call__(self, ex: Executor, p: Pending) -> None:
        config, call = ex.project.config, p.call
        for f in call.plan.filters:
            value = call.args.get(f.param)
            table, column = ref_column(f.column)
            if value is None or table not in config.products:
                continue
            route = chosen_route(f, value)
            if route is not None and route.via and route.match:
                # another scheme: the value is compared with the crosswalk's column, under
                # the crosswalk's policy (its row filter applies as it is read)
                table, column = route.via, route.match
                if table not in config.products:
                    continue
                masks, _ = ex.policy_of(call.user, table)
                if column in masks:
                    raise Refusal("masked_predicate", f"{f.param}: {table}.{column} is masked "
                                  "for your role, so it cannot be used as a filter")
                continue
            masks, scope = ex.policy_of(call.user, table)
            if column in masks:
                raise Refusal("masked_predicate", f"{f.param}: {column} is masked for your "
                              "role, so it cannot be used as a filter")
            allowed = scope.get(column)
            if f.op != "eq" or allowed is None:
                continue
            outside = [v for v in (value if isinstance(value, list) else [value])
                       if str(v) not in {str(a) for a in allowed}]
            if outside:
                raise Refusal("outside_entitlement", f"{f.param} {shown(outside)} is outside "
                              "your scope "
                              f"({column}: {', '.join(sorted(map(str, allowed)))})",
                              hint=NOT_YOURS)


class Valid:
    """The arguments fit the tool's schema (with what the plan declares beside it)."""

    name = "valid"

    def __call__(self, ex: Executor, p: Pending) -> None:
        validate(with_declared(p.call.definition, p.call.plan), p.call.args)


class SaidInResult:
    """What was read as what, beside the window in the result."""

    name = "said_in_result"

    def __call__(self, ex: Executor, p: Pending, answered: Answered) -> None:
        answered.result.update(p.said)


class WindowInEvidence:
    """The one window the call resolved, stated in the evidence as in the result."""

    name = "window_in_evidence"

    def __call__(self, ex: Executor, p: Pending, answered: Answered) -> None:
        stated, w = answered.result.get("window") or {}, p.call.plan.window
        if stated.get("start") and w is not None and w.column:
            answered.evidence.window = {
                "columns": [".".join(ref_column(c)) for c in (w.column, w.end_column) if c],
                **{k: stated.get(k) for k in ("start", "end", "calendar", "label")}}


def admit_steps() -> list[Before]:
    """What runs before any error is translated into a tool error."""
    return [Visible()]


def before_steps() -> list[Before]:
    """The checks, in order (a new executor gets its own: the steps' caches are its)."""
    return [Runs(), NoDeniedTable(), NoRestrictedName(), Interpreted(), InScope(), Valid()]


def after_steps() -> list[After]:
    return [SaidInResult(), WindowInEvidence()]


class SchemaCheck:
    """With serve.fingerprint_ttl_seconds > 0: when a product below the tool no longer has the
    schema the tool was generated from, say so. Each product's fingerprint is recomputed at
    most once per TTL (:attr:`fingerprints`: product -> (when, fingerprint))."""

    name = "schema_check"

    def __init__(self) -> None:
        self.fingerprints: dict[str, tuple[float, str | None]] = {}

    def __call__(self, ex: Executor, call: Call) -> str | None:
        ttl = ex.project.config.serve.fingerprint_ttl_seconds
        ctx = ToolContext.of(call.definition)
        published = ctx.schema_fingerprint
        if not ttl or not published:
            return None
        want = {published} if isinstance(published, str) else set(published)
        now = time.monotonic()
        moved = []
        for product in ctx.products:
            at, fp = self.fingerprints.get(product, (-ttl - 1.0, None))
            if now - at > ttl:
                if product not in ex.project.config.products:
                    continue
                src = ex.source(ex.project.config.products[product].source)
                try:
                    fp = schema_fingerprint(src.describe(ex.base(product), label=product))
                except TetherError:
                    fp = None  # gone altogether: the query itself will say so
                self.fingerprints[product] = (now, fp)
            if fp is not None and fp not in want:
                moved.append(product)
        if not moved:
            return None
        return (f"the schema of {', '.join(moved)} changed since {call.tool} {call.version} was "
                "generated: results may no longer match this definition; run tether check")


@dataclass
class Steps:
    """An executor's steps: ``admit`` (before any error is translated), ``before`` (the checks,
    in order), ``after`` (what is added to an answer), and the schema check the server runs
    beside a call. A new executor gets its own: the steps' caches are its."""

    admit: list[Before] = field(default_factory=admit_steps)
    before: list[Before] = field(default_factory=before_steps)
    after: list[After] = field(default_factory=after_steps)
    schema_check: SchemaCheck = field(default_factory=SchemaCheck)


class Pipeline:
    """A call through the steps over one executor, then its kind's runner: what every call the
    executor answers passes. A new executor gets a new pipeline (the steps' caches are its)."""

    def __init__(self, ex: Executor, steps: Steps | None = None):
        self.ex = ex
        self.steps = steps or Steps()

    def run(self, call: Call) -> dict[str, Any]:
        """The call's result (see :meth:`answer` for the evidence beside it)."""
        return self.answer(call).result

    def answer(self, call: Call) -> Answered:
        """The call through the checks, its kind's runner, and what the steps after add; a
        refusal, a bad argument or a failing source as a ToolError."""
        ex, pending = self.ex, Pending(call)
        for check in self.steps.admit:
            check(ex, pending)
        try:
            for check in self.steps.before:
                check(ex, pending)
            assert pending.kind is not None and pending.kind.run is not None
            answered = pending.kind.run(ex, pending.call)
            for then in self.steps.after:
                then(ex, pending, answered)
            return answered
        except Refusal as e:
            raise ToolError(e.paragraph(), refusal=e.meta()) from None
        except (ArgumentError, pagination.CursorError, sqlguard.GuardError) as e:
            raise ToolError(str(e)) from None
        except TetherError as e:  # a timeout, a source that is down
            raise SourceFailed(e.paragraph()) from None
