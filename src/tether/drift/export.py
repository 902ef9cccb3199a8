"""What a build leaves on disk and how it knows a tool is unchanged: tools/<name>.json in the
wire form of tools/list (written only where a file changed, files of tools no longer there
removed, an index of what was written), and the comparison of a generated tool with its
published version."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from tether.registry import ToolVersion, content_hash
from tether.toolgen.model import QueryPlan

TOOLS_DIR = "tools"
EXPORT_INDEX = ".tether/exported.json"


def unchanged(prev: ToolVersion, wire: dict[str, Any], plan: QueryPlan) -> bool:
    """Whether a generated tool is the published version: the same definition and the same
    plan. A governed predicate can change what a tool runs without one word of its definition
    (the values of an IN list): that is a new version, never the old one kept."""
    if prev.content_hash != content_hash(wire):
        return False
    try:  # the stored plan read as today's model reads it: a field added since is no change
        return QueryPlan.model_validate(prev.plan).model_dump(mode="json") == plan.model_dump(
            mode="json")
    except ValueError:
        return False


def export(directory: Path, definitions: list[dict[str, Any]], index: Path | None = None
           ) -> None:
    """Write one <name>.json per tool (wire form); remove files of tools no longer there.

    With ``index`` (a file beside the registry), a file whose tool and bytes on disk are as
    the last export left them is not read again: a check of thousands of unchanged tools
    otherwise rereads every file. A file edited by hand, or missing, is written anew."""
    directory.mkdir(parents=True, exist_ok=True)
    before = _read_index(index)
    after: dict[str, list[Any]] = {}
    for d in definitions:
        path = directory / f"{d['name']}.json"
        key = hashlib.sha256(json.dumps(d, ensure_ascii=False, sort_keys=True).encode()
                             ).hexdigest()[:32]
        stat = _stat(path)
        if stat is not None and before.get(path.name) == [key, *stat]:
            after[path.name] = before[path.name]
            continue
        text = json.dumps(d, indent=2, ensure_ascii=False) + "\n"
        if stat is None or path.read_text(encoding="utf-8") != text:
            # written beside it, then renamed over it: a reader never sees half a file (a
            # named temporary per process: mkstemp's random names cost a third of exporting)
            tmp = directory / f".tmp-{os.getpid()}-{threading.get_ident()}-{path.name}"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
            stat = _stat(path)
        if stat is not None:
            after[path.name] = [key, *stat]
    for stale in directory.glob("*.json"):
        if stale.name not in after and not stale.name.startswith("."):
            stale.unlink()
    for left in directory.glob(".tmp-*"):  # of an export killed between write and rename
        with contextlib.suppress(OSError):
            if time.time() - left.stat().st_mtime > 600:
                left.unlink()
    if index is not None and after != before:
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{index.name}")
        tmp.write_text(json.dumps(after, sort_keys=True), encoding="utf-8")
        os.replace(tmp, index)


def _stat(path: Path) -> list[int] | None:
    """What changes whenever the file's bytes do, however they were changed: a copy that keeps
    the times (cp -p, rsync -t) still moves the inode or the change time, which no tool sets."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def _read_index(index: Path | None) -> dict[str, list[Any]]:
    """The last export's {file: [tool key, size, mtime]}; empty when absent or unreadable
    (then every file is compared by its bytes, as without an index)."""
    if index is None:
        return {}
    try:
        found = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
