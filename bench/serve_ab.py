"""Serving latency before and after a change, in one run: two trees, calls interleaved.

The same three calls as bench/serve.py (unfiltered, filtered, masked; the same users, tools and
arguments, on the same scale-1 demo project), made over stdio with the official SDK client
against two `tether serve` processes: one running the source of REF (checked out with `git
worktree` under bench/out/ab/), one running this tree's. Both use this venv's packages and the
same built project, so only tether's code differs. Each round calls every path once on each,
alternating which goes first; before timing, both sides' rows are checked equal (and whether
the whole answers are identical is said: a commit that changes answers differs there).

    python bench/serve_ab.py --before REF [--calls 500] [--dir bench/out/serve]

Prints p50, p99 and mean per path and side, and after's p50 over before's (the target of a change
that should not move serving: within 5%).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).parent))
from serve import PATHS, WARMUP, pct, prepare

ROOT = Path(__file__).resolve().parent.parent


def tree(ref: str) -> Path:
    """A worktree of ``ref`` (made once, moved to ``ref`` each time)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], check=True,
                         capture_output=True, text=True).stdout.strip()
    at = ROOT / "bench" / "out" / "ab" / sha[:12]
    if not at.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(at),
                        sha], check=True)
    return at


def server(src: Path, d: Path, user: str) -> StdioServerParameters:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(src)}
    return StdioServerParameters(command=sys.executable, env=env, args=[
        "-m", "tether", "serve", "--project", str(d), "--as-user", user])


async def interleaved(d: Path, before: Path, rounds: int, identical: dict[str, bool]
                      ) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {f"{s} {p}": [] for p in PATHS for s in ("before", "after")}
    sides = {"before": before / "src", "after": ROOT / "src"}
    clients: dict[tuple[str, str], Any] = {}
    async with AsyncExitStack() as stack:
        for side, src in sides.items():
            for path, (user, _, _) in PATHS.items():
                clients[side, path] = await stack.enter_async_context(
                    Client(server(src, d, user)))
        for path, (_, tool, arg_sets) in PATHS.items():  # the same answers both sides
            for args in arg_sets:
                a = await clients["before", path].call_tool(tool, args)
                b = await clients["after", path].call_tool(tool, args)
                if a.is_error or b.is_error:
                    raise RuntimeError(f"{path} {args}: {a.content} / {b.content}")
                if a.structured_content["rows"] != b.structured_content["rows"]:
                    raise RuntimeError(f"{path} {args}: the two trees return other rows")
                identical[path] = identical.get(path, True) and (
                    a.structured_content == b.structured_content and a.meta == b.meta
                    and [c.text for c in a.content] == [c.text for c in b.content])
        for i in range(rounds + WARMUP):
            order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
            for path, (_, tool, arg_sets) in PATHS.items():
                args = arg_sets[i % len(arg_sets)]
                for side in order:
                    start = time.perf_counter()
                    r = await clients[side, path].call_tool(tool, args)
                    took = (time.perf_counter() - start) * 1000
                    if r.is_error:
                        raise RuntimeError(f"{side} {path}: {r.content}")
                    if i >= WARMUP:
                        times[f"{side} {path}"].append(took)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit to compare with (git ref)")
    ap.add_argument("--calls", type=int, default=500, help="rounds (each: every path, both)")
    ap.add_argument("--dir", type=Path, default=Path("bench/out/serve"))
    a = ap.parse_args()
    d: Path = a.dir.resolve()
    prepare(d)
    before = tree(a.before)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True).stdout.strip()
    identical: dict[str, bool] = {}
    times = anyio.run(interleaved, d, before, a.calls, identical)
    print(f"{a.calls} rounds after {WARMUP} warm-up rounds, each calling every path once on "
          f"before ({a.before}) and after ({head}{' with uncommitted src changes' if dirty else ''}"
          "), order alternating; stdio")
    print(f"{'path':<12}{'side':<8}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    worst = 0.0
    for path in PATHS:
        for side in ("before", "after"):
            xs = times[f"{side} {path}"]
            print(f"{path:<12}{side:<8}{pct(xs, 50):>9.2f}{pct(xs, 99):>9.2f}"
                  f"{statistics.mean(xs):>9.2f}")
    for path in PATHS:
        ratio = pct(times[f"after {path}"], 50) / pct(times[f"before {path}"], 50)
        worst = max(worst, ratio)
        print(f"after p50 / before p50, {path}: {ratio:.3f}")
    print("the same rows on both sides; the whole answer (text, structured content, _meta) "
          "identical: " + ", ".join(f"{p} {'yes' if same else 'no'}" for p, same in
                                    identical.items()))
    print(f"within 5%: {'yes' if worst <= 1.05 else 'NO'} (worst {worst:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
