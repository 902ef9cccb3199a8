"""Token sizes and ten-point scores of tool lists on the same demo warehouse, side by side.

tether's grounded, bare and generic modes, and two third-party database MCP servers pointed at
the same data (mcp-server-sqlite on a SQLite copy, mcp-server-motherduck on a DuckDB 1.5 copy),
read over stdio as any client would. Tokens: the model-visible part (name, description,
inputSchema, outputSchema) as compact JSON, cl100k_base.

    python bench/tokens.py [--dir bench/out/tokens]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from tether.config import load_project
from tether.demo import init_demo
from tether.lint import review_tools
from tether.lint.targets import load_server_tools
from tether.profiling import profile_project
from tether.toolgen import generate
from thirdparty import duckdb15_copy, server_command, sqlite_copy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path("bench/out/tokens"))
    args = ap.parse_args()
    d: Path = args.dir
    if not (d / "tether.yaml").exists():
        init_demo(d, scale=1, force=True)
    project = load_project(d)
    profiles = {p.product: p for p in profile_project(project)}
    lists = {f"tether {m}": [t.wire() for t in generate(project, profiles, m)]
             for m in ("grounded", "bare", "generic")}
    wh = d / "warehouse.duckdb"
    sq = d / "demo.sqlite"
    if not sq.exists():
        sqlite_copy(wh, sq)
    lists["mcp-server-sqlite 2025.4.25"] = load_server_tools(
        f"stdio:{server_command('sqlite')} --db-path {sq}")
    d15 = d / "demo15.duckdb"
    if not d15.exists():
        duckdb15_copy(wh, d15)
    lists["mcp-server-motherduck 1.1.0"] = load_server_tools(
        f"stdio:{server_command('motherduck')} --db-path {d15}")
    print(f"{'server':<30}{'tools':>6}{'tokens':>8}{'per tool':>10}{'max':>6}{'score avg':>10}"
          f"{'min':>5}")
    for name, tools in lists.items():
        r = review_tools(tools, name)
        n = len(r.tools)
        print(f"{name:<30}{n:>6}{r.total_tokens:>8}{r.total_tokens / n:>10.0f}"
              f"{max(t.tokens for t in r.tools):>6}{r.average_score:>10.2f}"
              f"{min(t.score for t in r.tools):>5}")
    grounded = review_tools(lists["tether grounded"], "g")
    avg = grounded.total_tokens / len(grounded.tools)
    print(f"targets: grounded average <= 400 tokens: {'met' if avg <= 400 else 'NOT met'} "
          f"({avg:.0f}); whole list < 6000: "
          f"{'met' if grounded.total_tokens < 6000 else 'NOT met'} ({grounded.total_tokens}); "
          f"all 10/10: {'met' if min(t.score for t in grounded.tools) == 10 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
