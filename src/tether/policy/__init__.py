"""Access policy: who sees which tools, products, rows and columns. The model and its checks
(model.py), the one policy path every read goes through (entitle.py), and the independent oracle
(oracle.py) that checks results without it."""

from tether.policy.entitle import (
    Entitled,
    MaskKey,
    Refusal,
    entitle,
    table_allowed,
)
from tether.policy.model import (
    exposable,
    require_reviewer,
    restricted_columns,
    reviewers,
    role_of,
    tool_visible,
    user_names,
)
from tether.policy.projection import role_projection, role_sees_tool

__all__ = ["Entitled", "MaskKey", "Refusal", "entitle", "exposable",
           "require_reviewer", "restricted_columns", "reviewers", "role_of", "role_projection",
           "role_sees_tool", "table_allowed", "tool_visible", "user_names"]
