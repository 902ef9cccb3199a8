"""How often the constrained loop's old second turn changed an answer: one run labelled two ways.

A run made with the openai agent's ``ask_again`` option records, on each answer turn, the answer
the model chose (``draft``) and the plain-text reply it gave when asked again (``content``, the
one scored). :func:`measure` labels a copy of the traces whose answers are the drafts with the
same ``tether eval label`` and compares the two label files case by case: how many answers the
second turn rewrote, and how many of those it turned from right to wrong or wrong to right.

    python -m proof.second_turn RUN_DIR --project PROJECT [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tether.eval.agents.loop import parse_value

LABELS = "labels.jsonl"


def _labels(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / LABELS).read_text().splitlines()
    return {(x := json.loads(line))["case_id"]: x for line in lines if line.strip()}


def with_drafts(run_dir: Path, to: Path) -> tuple[int, int]:
    """A copy of ``run_dir`` (index and traces) whose answers are the drafts; how many answers
    had one, and how many of those the second turn rewrote."""
    shutil.copytree(run_dir / "traces", to / "traces")
    shutil.copy2(run_dir / "index.json", to / "index.json")
    drafts = rewritten = 0
    for path in sorted((to / "traces").glob("*.json")):
        trace = json.loads(path.read_text())
        answer = next((t for t in reversed(trace.get("turns") or [])
                       if t.get("kind") == "answer"), None)
        if answer is None or answer.get("draft") is None:
            continue
        drafts += 1
        rewritten += answer["draft"].strip() != (answer.get("content") or "").strip()
        trace["final_answer"] = answer["draft"]
        trace["answer"] = parse_value(answer["draft"])
        path.write_text(json.dumps(trace))
    return drafts, rewritten


def measure(run_dir: Path, project: Path, tether: str | Path = "tether") -> dict[str, Any]:
    """The run's labels (the second replies) against the same traces labelled with the drafts."""
    if not (run_dir / LABELS).exists():
        subprocess.run([str(tether), "eval", "label", str(run_dir), "--project", str(project),
                        "--json"], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        drafted = Path(tmp) / run_dir.name
        drafts, rewritten = with_drafts(run_dir, drafted)
        subprocess.run([str(tether), "eval", "label", str(drafted), "--project", str(project),
                        "--json"], check=True, capture_output=True)
        first, second = _labels(drafted), _labels(run_dir)
    changed = sorted(c for c in second if c in first
                     and first[c].get("correct") != second[c].get("correct"))
    return {
        "cases": len(second), "asked_again": drafts, "rewritten": rewritten,
        "correct_with_first_answer": sum(bool(x.get("correct")) for x in first.values()),
        "correct_with_second_reply": sum(bool(x.get("correct")) for x in second.values()),
        "label_changed": len(changed),
        "right_to_wrong": [c for c in changed if first[c].get("correct")],
        "wrong_to_right": [c for c in changed if second[c].get("correct")],
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m proof.second_turn", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("run_dir", type=Path, help="a run folder made with ask_again=true")
    p.add_argument("--project", type=Path, required=True)
    p.add_argument("--tether", default=str(Path(sys.executable).parent / "tether"))
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if not (a.run_dir / "index.json").exists():
        print(f"{a.run_dir}: not a run folder (no index.json)", file=sys.stderr)
        return 2
    got = measure(a.run_dir, a.project, a.tether)
    if a.json:
        print(json.dumps(got, indent=2))
    else:
        print(f"{got['cases']} cases, {got['asked_again']} asked again, {got['rewritten']} "
              f"answers rewritten by the second turn; correct: {got['correct_with_first_answer']}"
              f" with the first answer, {got['correct_with_second_reply']} with the second "
              f"reply; right to wrong: {', '.join(got['right_to_wrong']) or 'none'}; wrong to "
              f"right: {', '.join(got['wrong_to_right']) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
