"""Third-party MCP servers for tests and benchmarks: see tether.demo.thirdparty."""

from tether.demo.thirdparty import CACHE, SERVERS, duckdb15_copy, server_command, sqlite_copy

__all__ = ["CACHE", "SERVERS", "duckdb15_copy", "server_command", "sqlite_copy"]
