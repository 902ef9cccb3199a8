"""Serving tools over MCP with the caller's identity and policy enforced in the query."""
