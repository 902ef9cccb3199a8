"""Access policy: who sees which tools, rows and columns. The model and its checks; SQL pushdown
and the independent oracle build on these."""

from tether.policy.model import (
    exposable,
    restricted_columns,
    role_of,
    tool_visible,
    user_names,
)

__all__ = ["exposable", "restricted_columns", "role_of", "tool_visible", "user_names"]
