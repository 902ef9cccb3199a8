"""Serving tools over MCP with the caller's identity and policy enforced in the query."""

from tether.serve import builtins  # noqa: F401  (registers the built-in runners)
