"""Profiling: one pushed-down pass per table, enums, formats, units, schema fingerprint."""

from tether.profiling.fingerprint import schema_fingerprint
from tether.profiling.profile import profile_product, profile_project

__all__ = ["profile_product", "profile_project", "schema_fingerprint"]
