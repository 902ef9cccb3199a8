"""The Jinja environment of the console and of the static evaluation report.

Templates come from two folders: the console's own (``tether/web/templates``) and the
evaluation's (``tether/eval/templates``: the stylesheet, the report body, a trace as a
conversation), which the static report of ``tether eval report`` renders too: one look, one code
path. Autoescaping is on for everything, so any text from a tool, a review or a trace is shown
as text, never as markup.
"""

from __future__ import annotations

import datetime as dt
from functools import cache
from pathlib import Path

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined

from tether.eval.html import environment as eval_environment

TEMPLATES = Path(__file__).parent / "templates"


def ago(stamp: str | None, now: dt.datetime) -> str:
    """'3.5 h ago', '2 d ago': how long before ``now`` an ISO time was."""
    if not stamp:
        return ""
    t = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    t = t if t.tzinfo else t.replace(tzinfo=dt.UTC)
    hours = (now - t).total_seconds() / 3600
    if abs(hours) < 48:
        return f"{hours:.1f} h ago"
    return f"{hours / 24:.0f} d ago"


@cache
def environment() -> Environment:
    base = eval_environment()
    env = Environment(loader=ChoiceLoader([FileSystemLoader(TEMPLATES), base.loader]),  # type: ignore[list-item]
                      autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                      lstrip_blocks=True)
    env.filters.update(base.filters)
    env.globals.update(base.globals)
    env.filters["ago"] = ago
    return env
