"""Writing and refreshing import layers: checked against the source, tried, then written.

A layer is written only once the project loads with it (merged under tether.yaml, every
reference checked); any error leaves the previous layer as it was. ``tether check`` calls
:func:`refresh` first: a layer whose input's hash moved is read again, the same way.

Every writer of a layer holds its kind's lock (:func:`layer_lock`) from the moment it reads the
layer it builds on to the moment it writes: folding events into the OpenLineage layer is a
read-modify-write, and two writers at once (a POST, `tether import openlineage`, the re-read of
`tether check`) would otherwise lose one another's events.
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tether.config import Project, load_project
from tether.errors import ConfigError
from tether.imports.dbt import read_dbt
from tether.imports.dbt_files import listing_digest
from tether.imports.openlineage import KIND, fold, parse_events, read_file, rederive
from tether.layers.model import (
    IMPORTS_DIR,
    MAX_IMPORT_BYTES,
    ImportLayer,
    InputFile,
    layer_path,
    sha256_file,
    write_layer,
)
from tether.profiling.declared import declared_values, verify_layer
from tether.textfiles import read_text

Reader = Callable[[Project, ImportLayer], ImportLayer]
_HELD = threading.local()


@contextmanager
def layer_lock(root: Path, kind: str) -> Iterator[None]:
    """Hold the file lock of ``kind``'s layer (across processes); re-entrant within a thread,
    so the shared write path may take it again under a caller that already holds it."""
    key = (str(root.resolve()), kind)
    held: set[tuple[str, str]] = _HELD.__dict__.setdefault("keys", set())
    if key in held:
        yield
        return
    path = layer_path(root, kind).with_name(f".{kind}.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:  # closing the file releases the lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


def write_import(project: Project, layer: ImportLayer) -> tuple[Project, dict[str, Any]]:
    """Verify ``layer`` against the source, load the project with it, write it; the project as
    loaded with it and what the import found (declared values against observed ones)."""
    with layer_lock(project.root, layer.kind):
        found = verify_layer(project, layer)
        layer.report = {**layer.report, **found}
        loaded = load_project(project.root, with_layer=layer)  # raises: nothing is written
        found["declared_values"] = declared_values(loaded) if layer.kind == "dbt" else []
        layer.report["declared_values"] = found["declared_values"]
        write_layer(project.root, layer)
    return load_project(project.root), {**layer.report}


def _where(project: Project, i: InputFile) -> Path:
    return _path(project, i.path)


def gone(project: Project, layer: ImportLayer) -> list[str]:
    """Inputs of ``layer`` that are no longer there (stdin and POSTed events never are)."""
    out = []
    for i in layer.inputs:
        if i.path in ("-", "http"):
            continue
        path = _where(project, i)
        if not (path.is_dir() if i.listing else path.is_file()):
            out.append(i.path)
    return out


def moved(project: Project, layer: ImportLayer) -> list[str]:
    """Inputs of ``layer`` whose file changed (or is gone) since it was read."""
    missing = set(gone(project, layer))
    out = []
    for i in layer.inputs:
        if i.path in ("-", "http"):  # stdin and POSTed events: nothing to read again
            continue
        path = _where(project, i)
        if i.path in missing or i.sha256 != (listing_digest(path) if i.listing
                                             else sha256_file(path)):
            out.append(i.path)
    if layer.kind == "dbt" and layer.options.get("read") == "schema.yml":
        base = _path(project, str(layer.options.get("path", "")))
        if (base / "target" / "manifest.json").is_file():
            out.append(str(base / "target" / "manifest.json"))  # now built: read that instead
    return out


def refresh(project: Project, readers: dict[str, Reader]
            ) -> tuple[Project, list[str], list[str]]:
    """Read again every layer whose input moved; the project reloaded, the kinds re-read, and
    warnings (an events file that is gone: its events stay folded in the layer)."""
    again: list[str] = []
    warnings: list[str] = []
    project = _rederive_openlineage(project)
    for kind in [la.kind for la in project.layers]:
        if kind not in readers or not layer_path(project.root, kind).is_file():
            continue
        layer = next((la for la in project.layers if la.kind == kind), None)
        if layer is None or not moved(project, layer):  # looked at without the lock: cheap
            continue
        with layer_lock(project.root, kind):
            project = load_project(project.root)  # the layer as the last writer left it
            latest = next((la for la in project.layers if la.kind == kind), None)
            if latest is None or not moved(project, latest):
                continue
            project, _ = write_import(project, _read_again(project, latest, readers[kind],
                                                           warnings))
            again.append(kind)
    return project, again, warnings


def _rederive_openlineage(project: Project) -> Project:
    """The OpenLineage layer's edges rebuilt from its jobs when the project changed under them
    (a product added, another layer's lineage moved): it keeps only edges that lead to a
    product, so what leads to one can change without a new event. Cheap: no input is read."""
    layer = next((la for la in project.layers if la.kind == KIND), None)
    if layer is None or not rederive(project, layer.model_copy(deep=True)):
        return project
    with layer_lock(project.root, KIND):
        project = load_project(project.root)  # the layer as the last writer left it
        latest = next((la for la in project.layers if la.kind == KIND), None)
        if latest is None:
            return project
        latest = latest.model_copy(deep=True)
        if rederive(project, latest):
            project, _ = write_import(project, latest)
    return project


def _read_again(project: Project, layer: ImportLayer, reader: Reader, warnings: list[str]
                ) -> ImportLayer:
    """``layer`` read again by ``reader``; a vanished input is an error naming what to do (a dbt
    project) or a warning (an events file: its events are already folded in)."""
    where = str(IMPORTS_DIR / f"{layer.kind}.json")
    missing = gone(project, layer)
    if layer.kind == "dbt" and not _path(project, str(layer.options.get("path", "."))).exists():
        raise ConfigError(f"the dbt project this layer was imported from is gone "
                          f"({layer.options.get('path')}).", where=where,
                          hint=f"Import it again from where it is now with `tether import dbt "
                          f"PATH`, or delete {where} to drop what it imported.")
    if layer.kind == "openlineage" and missing:
        for name in missing:
            warnings.append(f"the OpenLineage events file {name} is gone: its events stay "
                            f"folded in {where}, and it is no longer watched")
        layer = layer.model_copy(deep=True)
        layer.inputs = [i for i in layer.inputs if i.path not in missing]
    try:
        return reader(project, layer)
    except ConfigError as e:
        e.hint = ((e.hint or "") + f" (tether check re-reads {layer.kind} inputs whose hash "
                  f"moved; the previous layer was kept: import again, or delete {where}.)"
                  ).strip()
        raise


def _reread_dbt(project: Project, layer: ImportLayer) -> ImportLayer:

    return read_dbt(project, _path(project, str(layer.options.get("path", "."))),
                    new_products=layer.options.get("new_products") is True)


def _reread_openlineage(project: Project, layer: ImportLayer) -> ImportLayer:
    """Fold the event files whose hash moved again (stdin and HTTP events stay as folded)."""
    new = layer
    for i in moved(project, layer):
        if i in ("-", "http"):
            continue
        path = _path(project, i)
        new = read_file(project, new, i, read_text(path, "the OpenLineage events", name=i,
                                                   max_bytes=MAX_IMPORT_BYTES))
    return new


READERS: dict[str, Reader] = {"dbt": _reread_dbt, "openlineage": _reread_openlineage}
"""How each kind of layer is read again from its recorded input."""


def refresh_all(project: Project) -> tuple[Project, list[str], list[str]]:
    """:func:`refresh` with every kind's reader."""
    return refresh(project, READERS)


def fold_openlineage(root: Path, text: str, shown: str, where: str | None = None
                     ) -> tuple[ImportLayer, int]:
    """Fold OpenLineage events (``text``, from the input ``shown``: a file, ``-`` or ``http``)
    into the project's layer under its lock, so two writers never lose one another's events;
    the layer written and the number of events. Invalid events raise before anything is
    read or written (``where`` names them in the error; default ``shown``)."""
    events = parse_events(text, where or shown)
    with layer_lock(root, KIND):
        project = load_project(root)  # the layer as the last writer left it
        previous = next((la for la in project.layers if la.kind == KIND), None)
        layer = fold(project, previous, events)
        digest = hashlib.sha256(text.encode()).hexdigest()
        layer.inputs = [i for i in layer.inputs if i.path != shown] + [
            InputFile(path=shown, sha256=digest)]
        write_import(project, layer)
    return layer, len(events)


def post_openlineage(root: Path, text: str, where: str = "POST /api/v1/lineage") -> int:
    """Fold POSTed OpenLineage events into the project's layer; the number of events."""
    return fold_openlineage(root, text, "http", where)[1]


def _path(project: Project, text: str) -> Path:
    p = Path(text)
    return p if p.is_absolute() else project.root / p
