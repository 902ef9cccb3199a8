"""The schema fingerprint: sha256 over a canonical, order-independent form of the columns.

A rename, drop, retype, nullability change or added column changes it; rows, column order and
statistics do not.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tether.context.schema import Column


def canonical(columns: list[Column]) -> list[dict[str, Any]]:
    """Columns sorted by name, each as name, type, nullable and (sorted) nested fields."""
    return [
        {
            "name": c.name,
            "type": " ".join(c.type.upper().split()),
            "nullable": c.nullable,
            "children": canonical(c.children),
        }
        for c in sorted(columns, key=lambda c: c.name)
    ]


def schema_fingerprint(columns: list[Column]) -> str:
    """``sha256:<hex>`` of the canonical schema."""
    blob = json.dumps(canonical(columns), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()
