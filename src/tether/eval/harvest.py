"""`tether eval harvest`: candidate cases from real traffic, not from imagination.

Two sources feed it: the server's call log (the registry's ``call_log`` table) and OpenTelemetry
GenAI/MCP spans exported as OTLP JSON (one export object, or the collector's one-per-line form).
Each becomes :class:`Candidate` cases (``gold.answer`` and ``label`` null, ``source_trace`` the call
or trace it came from). :func:`stratify` samples them by tool, role and outcome with a cap per
stratum; retries and clarifications are oversampled because that is where an agent recovers from a
grounding failure and the top-line metric never sees it. The seed makes the sample repeatable.
:func:`keep_discriminating` then keeps the cases that at least one labelled configuration failed
or passed ungrounded: a case every configuration passes grounded tells nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from tether.config import Project
from tether.errors import ConfigError, TetherError
from tether.eval.cases import Case, Gold
from tether.eval.report import load_labels
from tether.eval.trace import LabelLine
from tether.registry import open_registry

Outcome = Literal["ok", "error", "empty", "retry", "clarification"]
OUTCOMES: tuple[str, ...] = ("ok", "error", "empty", "retry", "clarification")
OVERSAMPLED: tuple[str, ...] = ("retry", "clarification")
PLACEHOLDER = "[write the question]"
NO_TOOL = "(no tool)"
ASK_TOOLS = ("ask_user",)  # the synthetic tool tether's agents ask the user through
CALL_LOG_KEYS = ("at", "username", "role", "tool", "arguments", "row_count", "error")


@dataclass(frozen=True)
class Candidate:
    """A harvested case and the stratum it was drawn from."""

    case: Case
    tool: str
    role: str
    outcome: Outcome
    at: str  # ISO time of the (first) call, or of the trace's first span
    key: str = ""  # what makes two episodes the same case (tool calls, and the question if real)
    seen: int = 1  # how many identical episodes it stands for

    @property
    def stratum(self) -> tuple[str, str, str]:
        return (self.tool, self.role, self.outcome)


@dataclass(frozen=True)
class _Call:
    """One tool call, from either source, in the shape retry detection needs."""

    ref: str
    at: str  # ISO
    t: float  # seconds since the epoch
    user: str
    role: str
    tool: str
    arguments: Any
    outcome: Literal["ok", "error", "empty"]
    detail: str | None = None  # the error, or the row count as text


# ---------------------------------------------------------------- shared pieces


def _chains(calls: Iterable[_Call], window_s: float) -> list[list[_Call]]:
    """Calls grouped into episodes: a call joins the previous one by the same user to the same tool
    when that one failed or came back empty and this one follows within ``window_s``."""
    open_: dict[tuple[str, str], list[_Call]] = {}
    out: list[list[_Call]] = []
    for c in sorted(calls, key=lambda c: (c.t, c.ref)):
        prev = open_.get((c.user, c.tool))
        if prev is not None and prev[-1].outcome != "ok" and 0 <= c.t - prev[-1].t <= window_s:
            prev.append(c)
            continue
        chain = [c]
        open_[(c.user, c.tool)] = chain
        out.append(chain)
    return out


def _describe(c: _Call) -> str:
    args = c.arguments
    inner = (", ".join(f"{k}={v!r}" for k, v in args.items()) if isinstance(args, dict)
             else repr(args))
    what = {"ok": f"{c.detail} rows" if c.detail else "ok", "empty": "no rows",
            "error": f"error: {_clip(c.detail or 'failed', 120)}"}[c.outcome]
    return f"{c.tool}({inner}) -> {what}"


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _placeholder(user: str, calls: Sequence[_Call]) -> str:
    shown = " then ".join(_describe(c) for c in calls[:6])
    more = f" (+{len(calls) - 6} more calls)" if len(calls) > 6 else ""
    return f"{PLACEHOLDER} as {user}: {shown}{more}" if calls else f"{PLACEHOLDER} as {user}"


def _signature(question: str | None, calls: Sequence[_Call]) -> str:
    return json.dumps([question, [(c.tool, c.arguments, c.outcome) for c in calls]],
                      sort_keys=True, default=str)


def _candidate(*, tool: str, role: str, user: str, outcome: Outcome, at: str, source: str,
               question: str | None, calls: Sequence[_Call]) -> Candidate:
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", tool).strip("-")[:60] or "tool"
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    case = Case(case_id=f"{slug}-{outcome}-{digest}", source_trace=source, user_role=role,
                as_user=user, question=question or _placeholder(user, calls), gold=Gold(answer=None))
    return Candidate(case, tool, role, outcome, at, _signature(question, calls))


def _positive(name: str, value: float) -> None:
    if not (value >= 1 and math.isfinite(value)):
        raise ConfigError(f"{name} must be 1 or more (got {value}).",
                          hint="E.g. --per-stratum 5 --oversample 3.")


# ---------------------------------------------------------------- sampling


def stratify(candidates: Iterable[Candidate], *, per_stratum: int = 5, oversample: float = 3,
             seed: int = 0) -> list[Candidate]:
    """At most ``per_stratum`` candidates per (tool, role, outcome), ``per_stratum * oversample`` for
    retries and clarifications; identical episodes count once (``seen`` says how often)."""
    _positive("per_stratum", per_stratum)
    _positive("oversample", oversample)
    groups: dict[tuple[str, str, str], dict[str, list[Candidate]]] = {}
    for c in sorted(candidates, key=lambda c: (c.at, c.case.case_id)):
        groups.setdefault(c.stratum, {}).setdefault(c.key or c.case.case_id, []).append(c)
    out: list[Candidate] = []
    for stratum in sorted(groups):
        pool = [replace(same[0], seen=sum(s.seen for s in same)) for same in groups[stratum].values()]
        quota = quota_for(stratum[2], per_stratum, oversample)
        if len(pool) > quota:
            # one generator per stratum: a new stratum elsewhere leaves this one's draw unchanged
            pool = random.Random(f"{seed}/{'/'.join(stratum)}").sample(pool, quota)
        out.extend(sorted(pool, key=lambda c: (c.at, c.case.case_id)))
    return _unique_ids(out)


def quota_for(outcome: str, per_stratum: int, oversample: float) -> int:
    """How many candidates a stratum of this outcome may keep."""
    return max(1, math.floor(per_stratum * oversample)) if outcome in OVERSAMPLED else per_stratum


def _unique_ids(cands: list[Candidate]) -> list[Candidate]:
    seen: dict[str, int] = {}
    out = []
    for c in cands:
        cid = c.case.case_id
        seen[cid] = seen.get(cid, 0) + 1
        if seen[cid] > 1:
            c = replace(c, case=c.case.model_copy(update={"case_id": f"{cid}-{seen[cid]}"}))
        out.append(c)
    return out


def strata(candidates: Iterable[Candidate]) -> dict[tuple[str, str, str], int]:
    """Candidates per (tool, role, outcome), in sorted order (for the CLI's summary)."""
    counts: dict[tuple[str, str, str], int] = {}
    for c in candidates:
        counts[c.stratum] = counts.get(c.stratum, 0) + 1
    return dict(sorted(counts.items()))


# ---------------------------------------------------------------- the call log


def _log_call(n: int, row: Mapping[str, Any], where: str) -> _Call:
    missing = [k for k in CALL_LOG_KEYS if k not in row]
    if missing:
        raise ConfigError(f"call log row {n} has no {', '.join(missing)}.", where=where,
                          hint="Give rows as Registry.calls() returns them.")
    try:
        at = dt.datetime.fromisoformat(str(row["at"]))
        args = json.loads(row["arguments"]) if isinstance(row["arguments"], str) else row["arguments"]
    except (ValueError, TypeError) as e:
        raise ConfigError(f"call log row {n} ({row['tool']} at {row['at']}) is unreadable: {e}.",
                          where=where, hint="The registry may be damaged; check registry.url.") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    rows = row["row_count"]
    outcome: Literal["ok", "error", "empty"] = (
        "error" if row["error"] is not None else "empty" if rows == 0 else "ok")
    detail = str(row["error"]) if row["error"] is not None else None if rows is None else str(rows)
    return _Call(f"call_log:{row['at']}:{row['username']}:{row['tool']}", str(row["at"]), at.timestamp(),
                 str(row["username"]), str(row["role"]), str(row["tool"]), args, outcome, detail)


def call_log_candidates(calls: Iterable[Mapping[str, Any]], *, retry_window_s: float = 300,
                        where: str = "call_log") -> list[Candidate]:
    """Every episode of the call log (rows as ``Registry.calls()`` returns them), unsampled.

    A call without an identity (user ``?``: it failed before the user was known) cannot be replayed
    as anyone, so it is skipped."""
    parsed = [_log_call(n, row, where) for n, row in enumerate(calls, start=1)]
    out = []
    for chain in _chains((c for c in parsed if c.user not in ("", "?")), retry_window_s):
        first = chain[0]
        outcome: Outcome = "retry" if len(chain) > 1 else first.outcome
        out.append(_candidate(tool=first.tool, role=first.role, user=first.user, outcome=outcome,
                              at=first.at, source=first.ref,
                              question=None, calls=chain))
    return out


def harvest_call_log(project: Project, *, per_stratum: int = 5, oversample: float = 3, seed: int = 0,
                     retry_window_s: float = 300) -> list[Candidate]:
    """Stratified candidates from the project's call log (the registry's ``call_log`` table)."""
    registry = open_registry(project)
    try:
        rows = registry.calls()
    finally:
        registry.close()
    found = call_log_candidates(rows, retry_window_s=retry_window_s,
                                where=f"{project.config.registry.url} (call_log)")
    return stratify(found, per_stratum=per_stratum, oversample=oversample, seed=seed)


# ---------------------------------------------------------------- keep what discriminates

T = TypeVar("T", Case, Candidate)


@dataclass
class Discrimination(Generic[T]):
    """What :func:`keep_discriminating` kept, dropped, and could not judge, each with a reason."""

    kept: list[T] = field(default_factory=list)
    dropped: list[T] = field(default_factory=list)
    unlabelled: list[T] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


def _run_labels(run_dirs: Sequence[Path]) -> dict[str, list[LabelLine]]:

    if not run_dirs:
        raise ConfigError("no labelled run folder given.",
                          hint="Give one RUN_DIR per configuration, each labelled by tether eval label.")
    out: dict[str, list[LabelLine]] = {}
    for d in map(Path, run_dirs):
        path = d / "labels.jsonl"
        if not path.is_file():
            raise ConfigError(f"run folder {str(d)!r} has no labels.jsonl.",
                              hint=f"Label it first: tether eval label {d}")
        try:
            lines = load_labels(path)
        except TetherError as e:
            raise ConfigError(e.message, where=e.where, hint=e.hint) from None
        for line in lines:
            out.setdefault(line.case_id, []).append(line)
    return out


def _exposes(line: LabelLine) -> str | None:
    if line.correct is False:
        return f"{line.server} failed" + (f" ({line.failure_class})" if line.failure_class else "")
    if line.correct and line.grounded is False:
        return f"{line.server} passed ungrounded" + (
            f" ({line.failure_class})" if line.failure_class else "")
    if line.correct is None or line.grounded is None:
        return f"{line.server} is undecided (needs review)"
    return None


def keep_discriminating(items: Sequence[T], run_dirs: Sequence[Path]) -> Discrimination[T]:
    """Keep the cases at least one configuration failed, passed ungrounded, or left undecided; drop
    those every configuration passed grounded. A case no run labelled is set aside."""
    labels = _run_labels(run_dirs)
    out: Discrimination[T] = Discrimination()
    for item in items:
        cid = (item.case if isinstance(item, Candidate) else item).case_id
        lines = labels.get(cid, [])
        why = [w for w in map(_exposes, lines) if w]
        if not lines:
            out.unlabelled.append(item)
            out.reasons[cid] = "no run labelled it"
        elif why:
            out.kept.append(item)
            out.reasons[cid] = "; ".join(why)
        else:
            out.dropped.append(item)
            out.reasons[cid] = f"every configuration passed grounded ({len(lines)})"
    return out


# ---------------------------------------------------------------- output


def write_candidates(items: Iterable[Case | Candidate], path: Path) -> int:
    """Write cases.jsonl (one Case per line); returns how many lines."""
    cases = [i.case if isinstance(i, Candidate) else i for i in items]
    ids: set[str] = set()
    for c in cases:
        if c.case_id in ids:
            raise ConfigError(f"case_id {c.case_id!r} appears twice.", where=str(path),
                              hint="Harvest into one list, or rename one of them.")
        ids.add(c.case_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(c.model_dump(mode="json"), ensure_ascii=False) + "\n" for c in cases)
    path.write_text(text, encoding="utf-8")
    return len(cases)
