"""/eval: the run folders under ``eval.runs_dir`` and those given with `tether ui --runs`; a run's
metrics (several side by side) with the same body and charts as `tether eval report`'s file;
each case's trace as a conversation; the diff of two runs (`tether eval diff`).

Traces hold the rows each case's user was shown, so only reviewers read these pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from tether.eval.conversation import conversation
from tether.eval.html import report_context
from tether.eval.report import (
    ReportError,
    build_meta,
    diff_reports,
    load_run,
    load_runs,
    load_trace,
    metrics,
)
from tether.eval.trace import RunIndex
from tether.web.console import MAX_KEY, Console, Forbidden, Viewer, name_in_url

MAX_DEPTH = 2
"""How deep under a runs folder run folders are looked for (runs/NAME, runs/GROUP/NAME)."""
MAX_RUNS = 12
"""Most runs one page shows side by side."""


@dataclass(frozen=True)
class RunRef:
    key: str
    path: Path
    index: RunIndex | None
    labelled: bool
    problem: str | None


def roots(console: Console, v: Viewer) -> list[Path]:
    return [v.project.root / v.project.config.eval.runs_dir, *console.runs]


def _ref(key: str, path: Path) -> RunRef:
    try:
        index = RunIndex.model_validate_json((path / "index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return RunRef(key, path, None, False, f"index.json is not readable ({type(e).__name__})")
    labelled = (path / "labels.jsonl").is_file()
    return RunRef(key, path, index, labelled,
                  None if labelled else f"not labelled yet: tether eval label {path}")


def discover(console: Console, v: Viewer) -> list[RunRef]:
    """Every run folder (a folder with index.json) at most two levels under each root."""
    found = []
    for i, root in enumerate(roots(console, v)):
        if not root.is_dir():
            continue
        frontier = [root]
        for _ in range(MAX_DEPTH + 1):
            nxt = []
            for d in sorted(frontier):
                if (d / "index.json").is_file():
                    rel = d.relative_to(root).as_posix()
                    found.append(_ref(f"{i}/{rel}", d))
                else:
                    nxt += [c for c in d.iterdir() if c.is_dir() and not c.name.startswith(".")]
            frontier = nxt
    return found


def resolve(console: Console, v: Viewer, key: str | None) -> Path:
    """A run key (root number / path under it) as a folder inside that root, or 404: a key
    never reaches outside the folders the console was given."""
    head, _, rel = (key or "").partition("/")
    all_roots = roots(console, v)
    if (len(key or "") > MAX_KEY or not (head.isascii() and head.isdigit()) or len(head) > 4
            or int(head) >= len(all_roots) or not rel.isprintable()):
        raise HTTPException(404, "There is no such run.")
    root = all_roots[int(head)].resolve()
    try:
        path = (root / rel).resolve()
        found = path.is_relative_to(root) and (path / "index.json").is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        found = False
    if not found:
        raise HTTPException(404, "There is no such run.")
    return path


def _require_reviewer(v: Viewer) -> None:
    if not v.reviewer:
        raise Forbidden("Evaluation traces hold the rows each case's user was shown, so only a "
                        "reviewer (a role with reviewer: true) reads them.")


def report_view(console: Console, v: Viewer, keys: list[str]) -> dict[str, Any]:
    paths = [resolve(console, v, k) for k in keys]
    runs = load_runs(paths)
    report = [metrics(r.index.run_id, r.server, r.labels) for r in runs]
    meta = build_meta(runs, report)

    def href(i: int, case: Mapping[str, Any]) -> str | None:
        return "/eval/trace?" + urlencode({"run": keys[i], "case": case["case_id"]}) if (
            runs[i].trace_path(case["case_id"])) else None

    return report_context(report, meta, href)


def routes(console: Console) -> list[Route]:
    def index(request: Request) -> Response:
        v = console.signed_in(request)
        _require_reviewer(v)
        return console.page(request, "eval_index.html", runs=discover(console, v),
                            roots=roots(console, v))

    def run(request: Request) -> Response:
        v = console.signed_in(request)
        _require_reviewer(v)
        keys = request.query_params.getlist("run")
        if not keys:
            raise HTTPException(404, "Choose a run on the evaluations page.")
        if len(keys) > MAX_RUNS:
            raise HTTPException(400, f"Choose at most {MAX_RUNS} runs to show side by side.")
        loaded = [load_run(resolve(console, v, k)) for k in keys]
        if len(loaded) == 2 and loaded[0].server == loaded[1].server:
            a, b = loaded  # one server before and after: what changed, case by case
            diff = diff_reports([metrics(a.index.run_id, a.server, a.labels)],
                                [metrics(b.index.run_id, b.server, b.labels)],
                                {a.server: a.labels}, {b.server: b.labels})
            return console.page(request, "eval_diff.html", diff=diff, keys=keys,
                                runs=[r.index for r in loaded])
        return console.page(request, "eval_run.html", **report_view(console, v, keys))

    async def compare(request: Request) -> Response:
        form = await request.form()
        v = await run_in_threadpool(console.signed_in, request)
        console.check_form(v, form)
        keys = [str(k) for k in form.getlist("run")]
        if not keys:
            raise ReportError("choose at least one run to show.")
        return RedirectResponse("/eval/run?" + urlencode([("run", k) for k in keys]), 303)

    def trace(request: Request) -> Response:
        v = console.signed_in(request)
        _require_reviewer(v)
        key = request.query_params.get("run")
        path = resolve(console, v, key)
        case = name_in_url(request.query_params.get("case", ""),
                           "That run has no trace for this case.")
        run_dir = load_run(path) if (path / "labels.jsonl").is_file() else None
        try:
            file = run_dir.trace_path(case) if run_dir else path / "traces" / f"{case}.json"
            found = file is not None and file.is_file() and file.resolve().is_relative_to(path)
        except (OSError, ValueError):  # a name the file system refuses
            found = False
        if not found or file is None:
            raise HTTPException(404, "That run has no trace for this case.")
        label = next((x for x in run_dir.labels if x.case_id == case), None) if run_dir else None
        return console.page(request, "eval_trace.html", conv=conversation(load_trace(file),
                                                                          label), key=key)

    return [Route("/eval", index, methods=["GET"]), Route("/eval/run", run, methods=["GET"]),
            Route("/eval/compare", compare, methods=["POST"]),
            Route("/eval/trace", trace, methods=["GET"])]
