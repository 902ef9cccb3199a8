"""Retiring a tool and rolling one back: both are new versions, through the one gate.

A tool is never deleted from the registry (versions are immutable). It is *retired*: a new
major version of the same definition whose ``_meta["tether/context"].retired`` says why; the
server keeps serving it, with the reason and the date in its description, for
``drift.deprecation_days`` after that version is published, then lists it no more and answers a
call with when it was retired. A tool that disappears from tether.yaml (renamed, its product
removed) is retired by `tether check` through a review; `tether retire TOOL` asks for the same
explicitly. `tether rollback TOOL --to VERSION` republishes an old definition as a new version,
classified against the current one like any other change.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from tether.context.meta import RETIRED_KEY, context_of, stamp_publication
from tether.registry import ToolVersion, bump
from tether.registry.semver import Level
from tether.registry.store import CHANGE_SENTENCE

_PUBLICATION_SENTENCES = ("Changed in ", "Retired in ")
"""Sentences a publication adds to a description (and its sources); a republished definition
drops the old ones and states its own."""


def publication_stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _republished(definition: dict[str, Any], sentence: str, head: dict[str, Any],
                 extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of ``definition`` as a new version: the earlier publication sentences and fields
    gone, ``sentence`` at the end of its description (sourced), ``head`` first in its context,
    ``extra`` last."""
    wire: dict[str, Any] = json.loads(json.dumps(definition))
    base = CHANGE_SENTENCE.sub("", str(wire.get("description", ""))).strip()
    wire["description"] = f"{base} {sentence}"
    ctx = context_of(wire)
    sources = {k: v for k, v in (ctx.get("sources") or {}).items()
               if not k.startswith(_PUBLICATION_SENTENCES)}
    sources[sentence] = "schema"
    dropped = {"change_note", "deprecation", "review", "supersedes", RETIRED_KEY, "sources"}
    stamp_publication(wire, head, drop=dropped, tail={"sources": sources} | (extra or {}))
    return wire


def retirement(prev: ToolVersion, reason: str, at: dt.datetime) -> tuple[dict[str, Any], str]:
    """(wire definition, version) retiring ``prev``'s tool: the same definition, a major
    version, the reason in its context and its description. The window is counted by the
    server from the day this version is published."""
    version = bump(prev.version, "major")
    why = reason.rstrip(".")
    head = {"version": version, "supersedes": prev.version, "change_level": "major",
            "change_kind": "breaking", "change_note": f"Retired: {why}.",
            "review": {"mode": "human", "at": publication_stamp(at)}, "generated_at": publication_stamp(at)}
    wire = _republished(prev.definition,
                        f"Retired in {version}: {why}; do not use it for new work.", head,
                        {RETIRED_KEY: {"reason": why}})
    return wire, version


def rollback(current: ToolVersion, target: ToolVersion, at: dt.datetime,
             level: Level, kind: str) -> tuple[dict[str, Any], str]:
    """(wire definition, version): ``target``'s definition republished after ``current``,
    with the bump its difference from ``current`` calls for."""
    version = bump(current.version, level)
    note = f"Rolled back to the definition of {target.version}."
    head = {"version": version, "supersedes": current.version, "change_level": level,
            "change_kind": kind, "change_note": note, "generated_at": publication_stamp(at)}
    return _republished(target.definition, f"Changed in {version}: {note}", head), version
