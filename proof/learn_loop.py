"""The learning loop measured with the local model, written to docs/learn.md.

    python -m proof.learn_loop before [--warehouse demo|second] [--out DIR]
    python -m proof.learn_loop after  [--warehouse demo|second] [--out DIR] [--refused ID:why ...]
    python -m proof.learn_loop render [--doc docs/learn.md]

``before`` builds the warehouse's project under OUT (as `make proof` does), runs every case
against ``tether-grounded`` with the local model (the proof's agent and options), labels the run,
and runs ``tether learn --from-eval`` on it (the run's calls are in the project's call log too).
A person then reads the proposals (``tether learn --project OUT``) and applies those a reviewer
would with ``tether learn --apply ID``. ``after`` runs the same cases again against the same
project, now serving the learned definitions, labels them, and records which proposals were
applied and which refused (``--refused ID:reason``). ``render`` writes docs/learn.md from the
latest before/after pair of each warehouse: correct, correct and grounded, failures by class,
and the proposals, with the commit each run was made at.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proof.model import ProofError
from proof.render import PROOF_JSON
from proof.run import CONFIGS, ROOT, TETHER, WAREHOUSES, Config, Pipeline

GROUNDED = next(c for c in CONFIGS if c.key == "grounded")
LEARNED = Config("learned", GROUNDED.server, "tether", GROUNDED.serve)
LOOP_JSON = "learn-loop.json"


class Loop(Pipeline):
    """One phase of the loop: ``before`` (build, run, label, learn) or ``after`` (run again)."""

    def __init__(self, phase: str, out: Path, warehouse: str, refused: Sequence[str] = ()):
        super().__init__(out, "all", ROOT / "docs" / "learn.md", 2,
                         [GROUNDED if phase == "before" else LEARNED], warehouse=warehouse)
        self.phase = phase
        self.refused = list(refused)

    def _main(self) -> int:
        model, venv = self.prepare()
        if self.phase == "before":
            cases = self.demo()
        else:  # the project as `before` left it, the learned layer applied
            cases = self.out / "cases.jsonl"
            self.record["cases"] = {"selection": "all", "count": sum(
                1 for ln in cases.read_text().splitlines() if ln.strip())}
        server, venv = self.start_server_or_portable(model, venv)
        try:
            server = self.run_config(self.configs[0], cases, server, model, venv)
        finally:
            server.stop()
        run = self.run_dir / self.configs[0].key
        if self.phase == "before":
            done = self.run([TETHER, "learn", "--project", str(self.out), "--from-eval",
                             str(run), "--json"], quiet=True)
            self.record["learn"] = json.loads(done.stdout)
        else:
            self.record["applied"] = _proposals(self.out, "applied")
            self.record["refused"] = [{"id": int(r.split(":", 1)[0]),
                                       "why": r.split(":", 1)[1] if ":" in r else ""}
                                      for r in self.refused]
        self.record["metrics"] = metrics(run / "labels.jsonl")
        self.record["status"] = "complete"
        self.save()
        (self.run_dir / LOOP_JSON).write_text(json.dumps({
            "phase": self.phase, "warehouse": self.warehouse.key, "run": self.run_dir.name,
            "commit": self.record["commit"], "dirty": self.record["dirty"]}, indent=2) + "\n")
        self.say(f"{self.phase}: {self.record['metrics']}")
        return 0


def _proposals(project: Path, status: str) -> list[dict[str, Any]]:
    """The project's proposals with ``status``, as the registry holds them."""
    from tether.config import load_project
    from tether.registry import open_registry
    from tether.registry import proposals as stored

    registry = open_registry(load_project(project))
    try:
        rows = stored.proposals(registry, status)
    finally:
        registry.close()
    return [{"id": r["id"], "rule": r["rule"], "tool": r["body"]["tool"],
             "support": r["support"], "where": ".".join(r["body"]["change"]["path"]),
             "sentence": r["body"]["change"]["sentence"],
             "publication": r["publication"]} for r in rows]


def metrics(labels: Path) -> dict[str, Any]:
    lines = [json.loads(ln) for ln in labels.read_text().splitlines() if ln.strip()]
    return {"cases": len(lines), "correct": sum(x["correct"] is True for x in lines),
            "correct_and_grounded": sum(x["correct"] is True and x["grounded"] is True
                                        for x in lines),
            "failures_by_class": dict(sorted(Counter(x["failure_class"] for x in lines
                                                     if x["failure_class"]).items())),
            "correct_cases": sorted(x["case_id"] for x in lines if x["correct"] is True)}


# --- the doc --------------------------------------------------------------------------------


def _latest(out: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    runs = out / "runs"
    if not runs.is_dir():
        return found
    for d in sorted(runs.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
        loop = d / LOOP_JSON
        if loop.is_file():
            info = json.loads(loop.read_text())
            found[info["phase"]] = json.loads((d / PROOF_JSON).read_text()) | info
    return found


def render(doc: Path) -> str:
    parts = [HEADER]
    for key in ("demo", "second"):
        where = WAREHOUSES[key]
        got = _latest(ROOT / "demo-out" / f"learn-{key}")
        if "before" not in got or "after" not in got:
            parts.append(f"### {where.words}\n\nNot measured yet.\n")
            continue
        b, a = got["before"], got["after"]
        mb, ma = b["metrics"], a["metrics"]
        lost = sorted(set(mb["correct_cases"]) - set(ma["correct_cases"]))
        won = sorted(set(ma["correct_cases"]) - set(mb["correct_cases"]))
        rows = [("correct", mb["correct"], ma["correct"]),
                ("correct and grounded", mb["correct_and_grounded"],
                 ma["correct_and_grounded"])]
        for cls in sorted(set(mb["failures_by_class"]) | set(ma["failures_by_class"])):
            rows.append((f"failures: {cls}", mb["failures_by_class"].get(cls, 0),
                         ma["failures_by_class"].get(cls, 0)))
        text = [f"### {where.words}", "",
                f"{mb['cases']} cases, `tether-grounded`, before (run {b['run']}, "
                f"{b['started_at']}, commit `{str(b['commit'])[:10]}`"
                f"{', dirty tree' if b['dirty'] else ''}) and after (run {a['run']}, "
                f"{a['started_at']}, commit `{str(a['commit'])[:10]}`"
                f"{', dirty tree' if a['dirty'] else ''}).",
                "", "| | before | after |", "|---|---|---|"]
        text += [f"| {name} | {x} | {y} |" for name, x, y in rows]
        text += ["", f"Cases that became correct: {', '.join(f'`{c}`' for c in won) or 'none'}. "
                 f"Cases lost: {', '.join(f'`{c}`' for c in lost) or 'none'}.", "",
                 f"`tether learn` read {b['learn']['calls']} calls and {b['learn']['cases']} "
                 f"labelled cases and proposed {len(b['learn']['proposals'])}:", ""]
        applied = {p["id"] for p in a.get("applied", [])}
        refused = {r["id"]: r["why"] for r in a.get("refused", [])}
        text += ["| id | rule | where (tool: column) | support | decision | sentence |",
                 "|---|---|---|---|---|---|"]
        for p in b["learn"]["proposals"]:
            decision = ("applied" if p["id"] in applied else
                        f"refused: {refused[p['id']]}" if p["id"] in refused else "left open")
            path = p["change"]["path"]
            place = f"`{p['tool']}`" + (f": `{path[3]}`" if len(path) == 5 else "")
            text.append(f"| {p['id']} | `{p['rule']}` | {place} | {p['support']} | "
                        f"{decision} | {p['change']['sentence']} |")
        parts.append("\n".join(text) + "\n")
    parts.append(FOOTER)
    out = "\n".join(parts)
    text = doc.read_text(encoding="utf-8") if doc.is_file() else ""
    head = text.split(BEGIN)[0].rstrip("\n") + "\n\n" if BEGIN in text else text
    doc.write_text(f"{head}{BEGIN}\n{out}{END}\n", encoding="utf-8")
    return out


BEGIN = "<!-- BEGIN the loop, written by python -m proof.learn_loop render -->"
END = "<!-- END the loop -->"


HEADER = """## The loop, measured

`tether learn` reads the call log and labelled evaluation runs and proposes sentences for the
tools' descriptions, each applied through the gate as a patch (docs/learn.md's first part says
how). This page measures the loop with the local model the proof uses (docs/proof.md): every case of
a warehouse runs against `tether-grounded`, `tether learn --from-eval` reads that run (and the
calls it made), a person applies the proposals a reviewer would, and the same cases run again
against the same project. Written by `python -m proof.learn_loop render` from the runs under
`demo-out/learn-*/`.
"""

FOOTER = """### How to run it

```
python -m proof.run --prepare-only                   # the model and server, cached
python -m proof.learn_loop before --warehouse demo   # run, label, learn
.venv/bin/tether learn --project demo-out/learn-demo # read the proposals
.venv/bin/tether learn --project demo-out/learn-demo --apply ID   # each one accepted
python -m proof.learn_loop after --warehouse demo --refused ID:why
python -m proof.learn_loop render
```
"""


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m proof.learn_loop",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("phase", choices=("before", "after", "render"))
    p.add_argument("--warehouse", choices=("demo", "second"), default="demo")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--refused", nargs="*", default=[],
                   help="ID:reason for each proposal a reviewer refused")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "learn.md")
    a = p.parse_args(argv)
    out = (a.out or ROOT / "demo-out" / f"learn-{a.warehouse}").resolve()
    try:
        if a.phase == "render":
            render(a.doc)
            print(f"wrote {a.doc}")
            return 0
        t0 = time.perf_counter()
        code = Loop(a.phase, out, a.warehouse, a.refused).main()
        print(f"{a.phase} done in {time.perf_counter() - t0:.0f} s")
        return code
    except ProofError as e:
        print(f"learn loop: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
