"""The ten-point review of any tool list, and token counts."""

from tether.lint.checks import DEFAULT_CHECKS, Check, Finding
from tether.lint.review import Review, ToolReview, review_tools

__all__ = ["DEFAULT_CHECKS", "Check", "Finding", "Review", "ToolReview", "review_tools"]
