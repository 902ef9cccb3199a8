"""Writing and refreshing import layers: checked against the source, tried, then written.

A layer is written only once the project loads with it (merged under tether.yaml, every
reference checked); any error leaves the previous layer as it was. ``tether check`` calls
:func:`refresh` first: a layer whose input's hash moved is read again, the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tether.config import Project, load_project
from tether.errors import ConfigError
from tether.imports.layer import ImportLayer, layer_path, sha256_file, write_layer
from tether.profiling.declared import declared_values, verify_layer

Reader = Callable[[Project, ImportLayer], ImportLayer]


def write_import(project: Project, layer: ImportLayer) -> tuple[Project, dict[str, Any]]:
    """Verify ``layer`` against the source, load the project with it, write it; the project as
    loaded with it and what the import found (declared values against observed ones)."""
    found = verify_layer(project, layer)
    layer.report = {**layer.report, **found}
    loaded = load_project(project.root, with_layer=layer)  # raises: nothing is written
    found["declared_values"] = declared_values(loaded) if layer.kind == "dbt" else []
    layer.report["declared_values"] = found["declared_values"]
    write_layer(project.root, layer)
    return load_project(project.root), {**layer.report}


def moved(project: Project, layer: ImportLayer) -> list[str]:
    """Inputs of ``layer`` whose file changed (or is gone) since it was read."""
    out = []
    for i in layer.inputs:
        if i.path in ("-", "http"):  # stdin and POSTed events: nothing to read again
            continue
        path = Path(i.path) if Path(i.path).is_absolute() else project.root / i.path
        if not path.is_file() or sha256_file(path) != i.sha256:
            out.append(i.path)
    if layer.kind == "dbt" and layer.options.get("read") == "schema.yml":
        base = _path(project, str(layer.options.get("path", "")))
        if (base / "target" / "manifest.json").is_file():
            out.append(str(base / "target" / "manifest.json"))  # now built: read that instead
    return out


def refresh(project: Project, readers: dict[str, Reader]) -> tuple[Project, list[str]]:
    """Read again every layer whose input moved; the project reloaded, and the kinds re-read."""
    again = []
    for layer in project.layers:
        if layer.kind not in readers or not layer_path(project.root, layer.kind).is_file():
            continue
        if moved(project, layer):
            try:
                new = readers[layer.kind](project, layer)
            except ConfigError as e:
                e.hint = ((e.hint or "") + f" (tether check re-reads {layer.kind} inputs whose "
                          "hash moved; the previous layer was kept.)").strip()
                raise
            project, _ = write_import(project, new)
            again.append(layer.kind)
    return project, again


def _reread_dbt(project: Project, layer: ImportLayer) -> ImportLayer:
    from tether.imports.dbt import read_dbt

    return read_dbt(project, _path(project, str(layer.options.get("path", "."))))


def _reread_openlineage(project: Project, layer: ImportLayer) -> ImportLayer:
    """Fold the event files whose hash moved again (stdin and HTTP events stay as folded)."""
    from tether.imports.openlineage import read_file
    from tether.textfiles import read_text

    new = layer
    for i in moved(project, layer):
        if i in ("-", "http"):
            continue
        path = _path(project, i)
        new = read_file(project, new, i, read_text(path, "the OpenLineage events", name=i))
    return new


READERS: dict[str, Reader] = {"dbt": _reread_dbt, "openlineage": _reread_openlineage}
"""How each kind of layer is read again from its recorded input."""


def refresh_all(project: Project) -> tuple[Project, list[str]]:
    """:func:`refresh` with every kind's reader."""
    return refresh(project, READERS)


def post_openlineage(root: Path, text: str, where: str = "POST /api/v1/lineage") -> int:
    """Fold POSTed OpenLineage events into the project's layer, one writer at a time (a file
    lock: two emitters posting at once must not lose one's events); the number of events."""
    import fcntl

    from tether.imports.openlineage import KIND, fold, parse_events

    events = parse_events(text, where)
    lock_path = layer_path(root, KIND).with_name(".openlineage.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        project = load_project(root)  # the layer as the last writer left it
        previous = next((la for la in project.layers if la.kind == KIND), None)
        layer = fold(project, previous, events)
        import hashlib

        from tether.imports.layer import InputFile

        digest = hashlib.sha256(text.encode()).hexdigest()
        layer.inputs = [i for i in layer.inputs if i.path != "http"] + [
            InputFile(path="http", sha256=digest)]
        write_import(project, layer)
    return len(events)


def _path(project: Project, text: str) -> Path:
    p = Path(text)
    return p if p.is_absolute() else project.root / p
