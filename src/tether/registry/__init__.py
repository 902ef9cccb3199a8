"""The registry: immutable tool versions and publications (SQLite by default, PostgreSQL too)."""

from tether.registry.semver import FIRST, bump
from tether.registry.store import NewVersion, Registry, ToolVersion, VersionInfo, content_hash

__all__ = ["FIRST", "NewVersion", "Registry", "ToolVersion", "VersionInfo", "bump",
           "content_hash"]
