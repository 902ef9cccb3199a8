"""dbt in its own cached venv, for the demo and the tests (never in tether's own venv).

dbt-core 1.12 downloads a parser binary when it installs, which fails without internet beyond
the package registries; 1.11 with dbt-duckdb installs from PyPI alone. The venv lives under
$TETHER_TEST_CACHE (default ~/.cache/tether-tests) and is built once (about a minute), under a
lock so that parallel tests build it once.

    python -m tether.demo.dbtenv
prints the path of the dbt executable, building the venv first if needed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tether.demo.thirdparty import CACHE

REQUIREMENTS = ["dbt-core>=1.11,<1.12", "dbt-duckdb>=1.11,<1.12"]


def dbt_executable() -> Path:
    """The dbt console script of the cached venv, installing it on first use."""
    key = hashlib.sha256(" ".join(REQUIREMENTS).encode()).hexdigest()[:12]
    venv = CACHE / f"dbt-{key}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".dbt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".ok").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True,
                           capture_output=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                            "--disable-pip-version-check", *REQUIREMENTS], check=True,
                           capture_output=True)
            (venv / ".ok").touch()
    return venv / "bin" / "dbt"


def run_dbt(project_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``dbt ARGS`` in ``project_dir`` with its profiles.yml there; no anonymous usage stats."""
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    return subprocess.run([str(dbt_executable()), *args, "--project-dir", str(project_dir),
                           "--profiles-dir", str(project_dir)], capture_output=True, text=True,
                          env=env, cwd=project_dir, timeout=600)


if __name__ == "__main__":
    print(dbt_executable())
