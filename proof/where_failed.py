"""Where a run's failures are: read but not answered, or never read.

For each case a labelled run got wrong, whether the gold answer appears in the text of any tool
result the model read (the number as written, or rounded to two or four places, not as part of a
longer number; a text gold as written; a gold that is a refusal, where some call was refused by
the policy: `tether/refusal` in its `_meta`). A failure whose gold the model read is the model's
choice of what to copy; one whose gold it never read is in what it asked for (the tool, the
arguments) or in what a tool answered. An observation of the traces, not of any claim in them.

    python -m proof.where_failed RUN_DIR/CONFIG [RUN_DIR/CONFIG ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tether.eval.label.answer import REFUSAL_GOLD


def spellings(gold: Any) -> set[str]:
    """The ways a gold answer may be written in a tool result's text."""
    if isinstance(gold, bool) or gold is None:
        return set()
    if isinstance(gold, int):
        return {str(gold)}
    if isinstance(gold, float):
        out = {repr(gold), f"{gold:.2f}", f"{gold:.4f}".rstrip("0").rstrip(".")}
        if gold.is_integer():
            out.add(str(int(gold)))
        return out
    if isinstance(gold, str) and gold.strip():
        return {gold.strip()}
    return set()


def read(gold: Any, text: str) -> bool:
    """Whether ``text`` holds ``gold`` (a number not inside a longer one)."""
    return any(re.search(r"(?<![\d.])" + re.escape(s) + r"(?![\d])", text)
               for s in spellings(gold))


def classify(config_dir: Path) -> dict[str, Any]:
    """``{"failed": n, "read": [case ids], "never_read": [case ids]}`` for one configuration's
    folder (its ``labels.jsonl`` and ``traces/``)."""
    labels = {}
    for line in (config_dir / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            labels[d["case_id"]] = d
    seen: list[str] = []
    never: list[str] = []
    for f in sorted((config_dir / "traces").glob("*.json")):
        t = json.loads(f.read_text(encoding="utf-8"))
        cid = t.get("case_id")
        if cid not in labels or labels[cid].get("correct"):
            continue
        gold = ((t.get("case") or {}).get("gold") or {}).get("answer")
        calls = t.get("tool_calls") or []
        if isinstance(gold, str) and gold.strip().lower() in REFUSAL_GOLD:
            hit = any((c.get("meta") or {}).get("tether/refusal") for c in calls)
        else:
            hit = read(gold, "\n".join(str(c.get("text") or "") for c in calls))
        (seen if hit else never).append(cid)
    return {"failed": len(seen) + len(never), "read": seen, "never_read": never}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m proof.where_failed",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("configs", nargs="+", type=Path, help="a run's configuration folder(s)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    out = {}
    for d in a.configs:
        if not (d / "labels.jsonl").is_file():
            print(f"{d}: no labels.jsonl here; name a labelled configuration folder "
                  "(RUN_DIR/CONFIG, after tether eval label)", file=sys.stderr)
            return 2
        out[str(d)] = classify(d)
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print("| configuration | failed | gold in a result the model read | gold in no result |")
    print("| --- | --- | --- | --- |")
    for d, c in out.items():
        print(f"| `{d}` | {c['failed']} | {len(c['read'])} | {len(c['never_read'])} |")
    for d, c in out.items():
        print(f"\n{d}\n  read, not answered: {', '.join(c['read']) or '-'}"
              f"\n  never read: {', '.join(c['never_read']) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
