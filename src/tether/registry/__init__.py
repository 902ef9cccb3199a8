"""The registry: immutable tool versions and publications (SQLite by default, PostgreSQL too)."""

from tether.config import Project
from tether.registry.semver import FIRST, bump
from tether.registry.store import NewVersion, Registry, ToolVersion, VersionInfo, content_hash


def open_registry(project: Project) -> Registry:
    """The project's registry (registry.url in tether.yaml; SQLite under .tether/ by default)."""
    return Registry(project.config.registry.url, project.root)


__all__ = ["FIRST", "NewVersion", "Registry", "ToolVersion", "VersionInfo", "bump",
           "content_hash", "open_registry"]
