"""Token size of a tool definition as a model sees it (defined in toolgen, which keeps the tool
list within its budget; lint reports it)."""

from tether.toolgen.tokens import ENCODING, VISIBLE, tool_tokens, visible_part, wire_bytes

__all__ = ["ENCODING", "VISIBLE", "tool_tokens", "visible_part", "wire_bytes"]
