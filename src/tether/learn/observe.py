"""What learn reads: the registry's call log (every replica's), the listing tools it names, and
labelled evaluation runs, each read once into plain records the rules share."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.config import Project, TetherConfig
from tether.context.names import ref_column
from tether.errors import ConfigError
from tether.eval.report import load_run
from tether.eval.trace import LabelLine, Trace
from tether.learn.model import Seen
from tether.policy.model import values_scoped
from tether.registry import Registry, ToolVersion


@dataclass
class Listing:
    """A product's listing tool as the registry publishes it."""

    tool: str
    product: str
    params: dict[str, str]  # filter parameter -> column
    props: dict[str, Any]  # inputSchema properties
    schemes: dict[str, list[str]]  # identifier parameter -> the schemes it takes, its own first
    period: bool  # takes a period
    definition: dict[str, Any] = field(default_factory=dict)  # as published (wire form)
    plan: dict[str, Any] = field(default_factory=dict)  # as published


@dataclass
class CallSeen:
    """One logged call, read as the server read it."""

    at: str
    user: str
    role: str
    tool: str  # as called
    listing: Listing | None  # the listing that answered (a product named to the generic one)
    args: dict[str, Any]  # the listing's own arguments
    given: dict[str, Any]  # the arguments as given
    rows: int | None
    latency_ms: float
    error: str | None
    interpreted: dict[str, str] = field(default_factory=dict)
    moved: dict[str, str] = field(default_factory=dict)
    refusal: str | None = None

    def filters(self) -> dict[str, Any]:
        """The arguments that choose rows: filter parameters and the period."""
        if self.listing is None:
            return {}
        return {k: v for k, v in self.args.items()
                if k in self.listing.params or (k == "period" and self.listing.period)}

    def seen(self) -> Seen:
        return Seen(at=self.at, user=self.user, tool=self.tool, arguments=self.given,
                    rows=self.rows, latency_ms=round(self.latency_ms, 1),
                    error=self.error.splitlines()[0][:300] if self.error else None)


@dataclass
class CaseSeen:
    """One labelled case of an evaluation run, with its trace when the run kept it."""

    run: str
    finished: str
    label: LabelLine
    trace: Trace | None

    @property
    def failed(self) -> bool:
        """Not both correct and grounded: what the rules that read runs learn from."""
        return not (self.label.correct is True and self.label.grounded is True)

    def seen(self, said: str | None = None, tool: str = "") -> Seen:
        return Seen(tool=tool, case_id=self.label.case_id, run=self.run, at=self.finished,
                    said=said)


@dataclass
class Observed:
    config: TetherConfig
    listings: dict[str, Listing]
    calls: list[CallSeen]
    cases: list[CaseSeen]
    timeout_s: float

    def by_product(self) -> dict[str, Listing]:
        return {la.product: la for la in self.listings.values()}

    def listing_for(self, tool: str, args: dict[str, Any]) -> tuple[Listing | None,
                                                                    dict[str, Any]]:
        return listing_for(self.listings, tool, args)

    def scoped(self, product: str, column: str | None = None) -> bool:
        """Whether a value of the column is not one every caller may read in a description
        (the same answer toolgen's enums and examples get)."""
        return values_scoped(self.config, product, column)


def listing_for(found: dict[str, Listing], tool: str, args: dict[str, Any]
                ) -> tuple[Listing | None, dict[str, Any]]:
    """The listing a call reached and its own arguments: the tool itself, or the product a
    discovery tool named (by product or tool name), with the arguments given for it."""
    if tool in found:
        return found[tool], args
    product = str(args.get("product"))
    inner = args.get("arguments")
    hit = found.get(product) or next((la for la in found.values() if la.product == product),
                                     None)
    return hit, inner if isinstance(inner, dict) else {}


def listings(current: Mapping[str, ToolVersion], products: Any = None) -> dict[str, Listing]:
    """Every listing tool of ``current`` (the registry's current versions), by name; with
    ``products``, only those of a product the project still has (a removed product's listing
    stays in the registry, retired)."""
    out: dict[str, Listing] = {}
    for name, v in current.items():
        plan = v.plan
        if plan.get("kind") != "list" or not plan.get("product"):
            continue
        if products is not None and plan["product"] not in products:
            continue
        params: dict[str, str] = {}
        schemes: dict[str, list[str]] = {}
        for f in plan.get("filters") or []:
            params[f["param"]] = ref_column(f["column"])[1]
            routes = [r.get("scheme") for r in f.get("routes") or [] if r.get("scheme")]
            if routes:
                schemes[f["param"]] = routes
        props = dict((v.definition.get("inputSchema") or {}).get("properties") or {})
        out[name] = Listing(name, plan["product"], params, props, schemes, "period" in props,
                            v.definition, plan)
    return out


def read_calls(registry: Registry, found: dict[str, Listing], since: str | None
               ) -> list[CallSeen]:
    """The call log from ``since`` on, each call tied to the listing that answered it."""
    out = []
    for r in registry.calls(since):
        given = _json(r["arguments"])
        details = _json(r.get("details"))
        listing, args = listing_for(found, r["tool"], given)
        listing = found.get(str(details.get("answered_by"))) or listing
        out.append(CallSeen(
            at=str(r["at"]), user=r["username"], role=r["role"], tool=r["tool"],
            listing=listing, args=args, given=given, rows=r["row_count"],
            latency_ms=float(r["latency_ms"]), error=r["error"],
            interpreted=_strs(details.get("interpreted")),
            moved=_strs(details.get("moved_values")), refusal=details.get("refusal")))
    return out


def read_runs(run_dirs: Sequence[Path]) -> list[CaseSeen]:
    """Every labelled case of the runs given, with its trace."""
    out = []
    for d in run_dirs:
        run = load_run(Path(d))
        finished = (run.index.finished_at or run.index.started_at).isoformat()
        for label in run.labels:
            path = run.trace_path(label.case_id)
            trace = None
            if path is not None:
                try:
                    trace = Trace.model_validate_json(path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as e:
                    raise ConfigError(f"the trace of case {label.case_id!r} cannot be read "
                                      f"({str(e).splitlines()[0]}).", where=str(path),
                                      hint="Rerun the case, or leave this run out.") from None
            out.append(CaseSeen(str(d), finished, label, trace))
    return out


def observe(project: Project, registry: Registry, current: Mapping[str, ToolVersion],
            since: str | None = None, runs: Sequence[Path] = ()) -> Observed:
    """What learn reads, once: ``current`` is the registry's current versions."""
    found = listings(current, project.config.products)
    return Observed(project.config, found, read_calls(registry, found, since), read_runs(runs),
                    project.config.serve.statement_timeout_seconds)


_RELATIVE = re.compile(r"^(\d+)\s*([dhm])$")


def since_time(text: str | None, now: dt.datetime) -> str | None:
    """``--since`` as the call log writes times: an ISO 8601 date or time (UTC unless it says),
    or a span back from now (``7d``, ``24h``, ``30m``)."""
    if not text:
        return None
    m = _RELATIVE.match(text.strip())
    if m:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[m.group(2)]
        try:
            at = now - dt.timedelta(**{unit: int(m.group(1))})
        except OverflowError:
            raise ConfigError(f"--since {text!r} reaches before the year 1.",
                              hint="Give a shorter span, or a date.") from None
    else:
        try:
            at = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise ConfigError(f"--since {text!r} is neither a date, a time nor a span.",
                              hint="Give 2026-05-01, 2026-05-01T08:00:00Z, or 7d, 24h, 30m."
                              ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return at.astimezone(dt.UTC).isoformat()


def _json(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) and "truncated" not in value else {}


def _strs(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
