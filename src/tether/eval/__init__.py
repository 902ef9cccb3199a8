"""Evaluation: replay questions against any MCP server as a named user, label the traces, report.

Layer 5: eval reaches every server, ours included, as an MCP client; it never
imports `tether.serve`.
"""
