"""A large real OpenAPI description as a source: GitHub's REST API (the npm package
@octokit/openapi, which ships it), every read operation a product.

Reports the spec's operations (read ones served, the ones that change state left out), the time
to read the spec, the time of `tether build` (profile, generate, publish: no sample calls, this
machine reaches no API), the tool count, the tokens of the whole list and what the bounded list
(serve.tool_list_token_budget) serves instead: its tools and tokens, and whether search finds an
operation and the generic listing reaches it. Nothing is called on the API itself.

    python bench/openapi.py [--spec FILE] [--version 23.0.2] [--dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from tether.config import load_project  # noqa: E402
from tether.drift.publish import build  # noqa: E402
from tether.registry import open_registry  # noqa: E402
from tether.sources.openapi import load_spec  # noqa: E402
from tether.toolgen.discovery import listed  # noqa: E402
from tether.toolgen.model import QueryPlan  # noqa: E402
from tether.toolgen.tokens import tool_tokens  # noqa: E402

QUESTIONS = {
    "list the pull requests of a repository": "pulls_list",
    "which issues are open in a repository": "issues_list_for_repo",
    "show the releases of a repository": "repos_list_releases",
    "who are the members of an organization": "orgs_list_members",
    "list the workflow runs of a repository": "actions_list_workflow_runs_for_repo",
    "what are the branches of a repository": "repos_list_branches",
    "get the commits of a repository": "repos_list_commits",
    "list the gists of a user": "gists_list_for_user",
}
"""Questions a person asks of GitHub, and the operation (table) that answers each: written
before the ranking was last changed, and not changed after."""
PACKAGE = "@octokit/openapi"
INSIDE = "package/generated/api.github.com.json"


def fetch(version: str, cache: Path) -> Path:
    """The spec from the npm registry (npm pack), kept in ``cache``."""
    out = cache / f"api.github.com-{version}.json"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", f"{PACKAGE}@{version}", "--silent"], cwd=tmp, check=True,
                       capture_output=True)
        tgz = next(Path(tmp).glob("*.tgz"))
        with tarfile.open(tgz) as tar:
            member = tar.extractfile(INSIDE)
            assert member is not None, f"{INSIDE} is not in {tgz.name}"
            out.write_bytes(member.read())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", type=Path, help="a spec file instead of the npm package")
    ap.add_argument("--version", default="23.0.2")
    ap.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "openapi")
    args = ap.parse_args()
    spec_file = args.spec or fetch(args.version, args.dir / "cache")
    digest = hashlib.sha256(spec_file.read_bytes()).hexdigest()
    t0 = time.perf_counter()
    spec = load_spec(str(spec_file), ROOT)
    read_s = time.perf_counter() - t0
    project = args.dir / "project"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    products = {name: {"table": name} for name in sorted(spec.operations)}
    (project / "tether.yaml").write_text(json.dumps({
        "sources": {"api": {"kind": "openapi", "spec": str(spec_file.resolve()),
                            "base_url": "https://api.github.com", "sample_calls": 0}},
        "products": products,
        "policies": {"roles": {"dev": {"tools": ["*"]}}, "users": {"dev": {"role": "dev"}}},
    }, indent=1))
    t0 = time.perf_counter()
    result = build(load_project(project))
    build_s = time.perf_counter() - t0
    proj = load_project(project)
    registry = open_registry(proj)
    try:
        current = registry.current()
    finally:
        registry.close()
    tools = [(v.definition, QueryPlan.model_validate(v.plan)) for v in current.values()]
    total = sum(tool_tokens(d) for d, _ in tools)
    served = listed(proj.config, [(d["name"], d, p) for d, p in tools], None)
    bounded = [d for d, _ in tools if d["name"] in served]
    bounded_tokens = sum(tool_tokens(d) for d in bounded)
    from conftest import call_tools

    found = call_tools(proj, "dev", [("find_data_for_question", {"question": q, "limit": 20})
                                     for q in QUESTIONS])
    ranks = {}
    for (q, want), r in zip(QUESTIONS.items(), found, strict=True):
        names = [m["name"] for m in (r.structured_content or {}).get("matches", [])]
        ranks[q] = {"answer": want, "rank": names.index(want) + 1 if want in names else None,
                    "first": names[:3]}
    report: dict[str, Any] = {
        "spec": f"{PACKAGE}@{args.version} {INSIDE}" if not args.spec else str(args.spec),
        "sha256": digest, "bytes": spec_file.stat().st_size,
        "read_operations": len(spec.operations), "left_out": len(spec.left_out),
        "read_spec_s": round(read_s, 2), "build_s": round(build_s, 1),
        "published": sum(1 for o in result.outcomes if o.outcome == "published"),
        "tools": len(tools), "tokens_all": total,
        "bounded_tools": len(bounded), "bounded_tokens": bounded_tokens,
        "bounded_names": sorted(d["name"] for d in bounded),
        "search": ranks,
        "first": sum(1 for x in ranks.values() if x["rank"] == 1),
        "first_three": sum(1 for x in ranks.values() if x["rank"] and x["rank"] <= 3),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
