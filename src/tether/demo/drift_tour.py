"""The drift story for `make demo`: ON_HOLD arrives, the published tool still lists four statuses,
`tether check` detects it, publishes v-next with its note, and the same call is answered.
Run: python -m tether.demo.drift_tour PROJECT_DIR"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from tether.config import load_project
from tether.demo.drift import apply
from tether.demo.tour import _session
from tether.drift.check import check

CALL = ("orders_by_status_and_customer", {"status": "ON_HOLD", "limit": 50})


def _ask(project: str, label: str) -> None:
    (result,) = anyio.run(_session, project, "fin.ana", [CALL])
    if result.is_error:
        print(f"  {label}: the published tool refuses ON_HOLD: {result.content[0].text[:150]}...")
    else:
        data = result.structured_content
        print(f"  {label}: {data['row_count']} orders on hold (as_of {data['as_of']})")


def story(project_dir: str) -> None:
    d = Path(project_dir).resolve()
    print(f"  drift: {apply(d, 'on-hold')}")
    _ask(str(d), "before tether check")
    result = check(load_project(d))
    for o in result.outcomes:
        if o.outcome != "unchanged":
            print(f"  tether check: {o.tool} {o.outcome} {o.version} ({o.change_level} "
                  f"{o.change_kind}): {o.change_note}")
    print(f"  tether check exit code: {result.exit_code} (10 = drift published)")
    _ask(str(d), "after tether check ")


if __name__ == "__main__":
    story(sys.argv[1] if len(sys.argv) > 1 else ".")
