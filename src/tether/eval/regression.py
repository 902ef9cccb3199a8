"""The regression suite: after each publication, replay the recorded calls against the new tools
and report the cases whose labels flipped.

``eval.regression_suite`` in tether.yaml names a labelled run folder (index.json, traces/,
labels.jsonl), typically kept from `tether eval run` + `tether eval label` on cases that expose
grounding. `tether check` reruns it with the ``replay`` agent against `tether serve` on the
project (as each case's user, over stdio), labels the new traces, and compares.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.config import Project
from tether.errors import ConfigError
from tether.eval.agents import make_agent
from tether.eval.label.pipeline import LABELS_FILE, label_run
from tether.eval.prices import load_prices
from tether.eval.report import load_labels
from tether.eval.runner import INDEX, TRACES, Identity, RunOptions, run_cases
from tether.eval.trace import RunIndex, Trace

OUTCOME = ("correct", "grounded", "failure_class")


@dataclass
class RegressionResult:
    suite: Path
    run_dir: Path
    cases: int = 0
    flipped: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"suite": str(self.suite), "run_dir": str(self.run_dir), "cases": self.cases,
                "flipped": self.flipped}


def suite_dir(project: Project) -> Path | None:
    name = project.config.eval.regression_suite
    if not name:
        return None
    d = (project.root / name).resolve()
    missing = [f for f in (INDEX, LABELS_FILE) if not (d / f).is_file()]
    if missing or not (d / TRACES).is_dir():
        raise ConfigError(
            f"eval.regression_suite {name!r} is not a labelled run folder (missing "
            f"{', '.join(missing) or TRACES + '/'} in {d}).",
            where=project.where("eval", "regression_suite"),
            hint="Record one: tether eval run ... --out DIR, then tether eval label DIR.")
    return d


def rerun(project: Project, publication: int) -> RegressionResult | None:
    """Replay the suite against the project's current tools; None when no suite is named."""
    suite = suite_dir(project)
    if suite is None:
        return None
    index = RunIndex.model_validate_json((suite / INDEX).read_text(encoding="utf-8"))
    cases = []
    for entry in index.entries:
        f = suite / entry.file
        if f.is_file():
            cases.append(Trace.model_validate_json(f.read_text(encoding="utf-8")).case)
    out = project.root / ".tether" / "regression" / f"publication-{publication}"
    target = f"stdio:{sys.executable} -m tether serve --project {project.root}"
    opts = RunOptions(target=target, server_name=index.server,
                      identity=Identity.parse("env:TETHER_USER", target), out=out,
                      concurrency=2, cases_file=str(suite), recorded=suite)
    asyncio.run(run_cases(cases, make_agent("replay"), opts))
    prices = project.config.eval.price_table
    new = {lab.case_id: lab for lab in label_run(
        out, project, load_prices(project.root / prices if prices else None))}
    old = {lab.case_id: lab for lab in load_labels(suite / LABELS_FILE)}
    result = RegressionResult(suite, out, cases=len(cases))
    for cid, before in sorted(old.items()):
        after = new.get(cid)
        if after is None:
            continue
        changed = {k: [getattr(before, k), getattr(after, k)] for k in OUTCOME
                   if getattr(before, k) != getattr(after, k)}
        if changed:
            result.flipped.append({"case_id": cid, "changed": changed,
                                   "symptoms": after.symptoms})
    return result
