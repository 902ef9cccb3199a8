"""Crash safety: `tether check` is SIGKILLed at 12 points spread over its run, while it publishes.
After each kill the registry opens cleanly, every version is readable, the set served is
entirely the old one or entirely the new one, and a check run again to its end records each
drift event exactly once (events and the state they were detected against land together)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tether.config import load_project
from tether.demo import init_demo
from tether.demo.drift import apply
from tether.drift.publish import build
from tether.registry import open_registry

KILLS = 12
TOOLS = ("order_backlog_by_status", "orders_by_status_and_customer")
TETHER = str(Path(sys.executable).parent / "tether")


def events(project_dir: Path) -> list[tuple[str, str, str]]:
    registry = open_registry(load_project(project_dir))
    try:
        return sorted((e["kind"], e["subject"], json.dumps(e["details"], sort_keys=True))
                      for e in registry.events())
    finally:
        registry.close()


def test_sigkill_during_check_never_leaves_a_mix(tmp_path: Path) -> None:
    template = tmp_path / "template"
    init_demo(template, scale=0.05)
    build(load_project(template))
    apply(template, "on-hold")
    timing = tmp_path / "timing"
    shutil.copytree(template, timing)
    started = time.monotonic()
    assert subprocess.run([TETHER, "check", "-p", str(timing)], capture_output=True
                          ).returncode == 10
    duration = time.monotonic() - started
    expected = events(timing)
    assert expected
    seen = set()
    for i in range(KILLS):
        work = tmp_path / f"kill{i}"
        shutil.copytree(template, work)
        proc = subprocess.Popen([TETHER, "check", "-p", str(work)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(duration * (0.3 + 0.7 * i / KILLS))  # from start-up to the final writes
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        registry = open_registry(load_project(work))
        try:
            versions = registry.versions()
            for v in versions:
                assert v.definition["name"] == v.name and json.dumps(v.definition)
            current = registry.current()
            served = {current[t].version for t in TOOLS}
        finally:
            registry.close()
        assert len(served) == 1, f"kill {i}: a mix of old and new: {served}"
        assert {v.version for v in versions if v.name in TOOLS} >= {"1.0.0"}
        seen |= served
        assert subprocess.run([TETHER, "check", "-p", str(work)], capture_output=True
                              ).returncode in (0, 10)
        assert events(work) == expected, f"kill {i}: drift events recorded twice or lost"
    print("served sets seen after kills:", seen)
    assert seen, "no kill observed a consistent registry"
