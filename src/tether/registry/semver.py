"""Semantic versions of tools: 1.0.0 first; patch, minor, major bumps."""

from __future__ import annotations

from typing import Literal

Level = Literal["patch", "minor", "major"]
FIRST = "1.0.0"


def parse(version: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in version.split("."))
    return major, minor, patch


def bump(version: str, level: Level) -> str:
    major, minor, patch = parse(version)
    if level == "major":
        return f"{major + 1}.0.0"
    if level == "minor":
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"
