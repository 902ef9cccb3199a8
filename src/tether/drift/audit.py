"""The audit trail: every publication committed to a git repository (`drift.audit_repo`).

Git is the trail behind the registry, not the system of record: one commit per publication,
the published definitions as files, the change notes as the message. A failure to commit is
reported and never undoes a publication.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tether.config import Project
from tether.policy.versions import POLICY_KIND
from tether.registry import Registry


def record(project: Project, registry: Registry, message: str) -> bool:
    """Write the current definitions (tools/NAME.json) and the access policy now enforced
    (policy.json) into the audit repo and commit; False if not configured or git failed (the
    reason goes to stderr)."""
    target = project.config.drift.audit_repo
    if not target:
        return False
    definitions = [v.definition for v in registry.current().values()]
    policy = registry.current_policy()
    repo = Path(target) if Path(target).is_absolute() else project.root / target
    try:
        if not (repo / ".git").exists():
            repo.mkdir(parents=True, exist_ok=True)
            _git(repo, "init", "-q")
        tools = repo / "tools"
        tools.mkdir(exist_ok=True)
        names = set()
        for d in definitions:
            names.add(f"{d['name']}.json")
            (tools / f"{d['name']}.json").write_text(
                json.dumps(d, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        for stale in tools.glob("*.json"):
            if stale.name not in names:
                stale.unlink()
        if policy is not None:
            (repo / "policy.json").write_text(
                json.dumps(policy.definition, indent=2, ensure_ascii=False) + "\n",
                encoding="utf-8")
        _git(repo, "add", "-A")
        if not _git(repo, "status", "--porcelain"):
            return False
        _git(repo, "-c", "user.name=tether", "-c", "user.email=tether@localhost", "commit",
             "-q", "-m", message)
        return True
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"tether: the audit repository {repo} was not updated: {e}", file=sys.stderr)
        return False


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, timeout=60).stdout


def message(rule: str, notes: dict[str, str | None]) -> str:
    """First line: what was published and by which rule; then one line per tool's note (the
    access policy's among them, not counted as a tool)."""
    tools = sum(1 for name in notes if name != POLICY_KIND)
    parts = [f"{tools} tool version(s)"] if tools else []
    if POLICY_KIND in notes:
        parts.append("the access policy")
    head = f"publish {' and '.join(parts) or 'nothing'} ({rule})"
    return "\n\n".join([head, "\n".join(f"{name}: {note or 'published'}"
                                        for name, note in sorted(notes.items()))])
