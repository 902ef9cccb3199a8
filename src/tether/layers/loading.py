"""Finding a project's layers when it loads, and naming where a merged value came from.

Layer 0, used by ``tether.config``: the glossary documents ``glossary_dir`` names are read now;
the layers ``tether import`` wrote are read from ``.tether/imports/``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tether.errors import ConfigError
from tether.layers.glossary_docs import read_glossary_dir
from tether.layers.model import KINDS, ImportLayer, layer_path, read_layers


class Origin:
    """Where a value of the loaded configuration came from: tether.yaml (``kind`` None), or an
    import layer, with the node, file and line or job it was read from."""

    def __init__(self, kind: str | None, file: str, where: str | None = None):
        self.kind = kind
        self.file = file
        self.where = where

    def __str__(self) -> str:
        if self.kind is None:
            return self.file
        if self.kind == "glossary_dir":
            return f"glossary_dir: {self.where or self.file}"
        return f"{self.kind} import ({self.file}" + (f", {self.where})" if self.where else ")")


def project_layers(root: Path, folder: Any, key_place: Callable[[], str]) -> list[ImportLayer]:
    """The layers under tether.yaml, highest first: the glossary documents ``folder`` holds
    (read now), then what `tether import` wrote. ``key_place`` names glossary_dir's line."""
    out = []
    if isinstance(folder, str) and folder:
        try:
            out.append(read_glossary_dir(root, folder))
        except ConfigError as e:
            if e.where and e.where.startswith("/"):  # the folder itself: the key's line
                e.where = key_place()
            raise
    return out + read_layers(root)


def precedence(layer: ImportLayer) -> int:
    order = ("glossary_dir", *KINDS)
    return order.index(layer.kind) if layer.kind in order else len(order)


def layer_origin(root: Path, layer: ImportLayer, path: tuple[str | int, ...]) -> Origin:
    where = layer.origin(path)
    if layer.kind == "glossary_dir":
        return Origin(layer.kind, (where or "").rsplit(":", 1)[0], where)
    return Origin(layer.kind, str(layer_path(root, layer.kind).relative_to(root)), where)
