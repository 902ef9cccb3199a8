"""Start ``llama_cpp.server`` with one fix to llama-cpp-python 0.3.36 (runs in the server's venv).

The server turns a JSON Schema into a grammar, both for a request's ``response_format`` schema
(the agent's constrained loop) and, with ``--chat_format chatml-function-calling``, for a tool
call's arguments. Its converter copies a regex shorthand such as ``\\d``
from a ``pattern`` into the grammar verbatim; llama.cpp's grammar parser rejects it ("unknown
escape") and the server process dies on that request, so every later case fails. tether's
grounded tools carry such patterns (``^FY\\d{4}-Q[1-4]$``, ``^A-\\d{7}$``). Before the schema is
converted, this launcher rewrites the shorthands as the character classes they stand for
(``\\d`` -> ``[0-9]``), which the converter handles. Only the grammar changes: the prompt still
shows the model each tool's schema exactly as the server sent it.

    python proof/llama_launch.py --model FILE --chat_format chatml ...
takes exactly the arguments of ``python -m llama_cpp.server``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

# a shorthand outside a [...] class, and inside one (negated shorthands inside a class are left)
OUTSIDE = {"d": "[0-9]", "D": "[^0-9]", "w": "[a-zA-Z0-9_]", "W": "[^a-zA-Z0-9_]",
           "s": "[ \\t\\n\\r]", "S": "[^ \\t\\n\\r]"}
INSIDE = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " \\t\\n\\r"}


def plain_classes(pattern: str) -> str:
    """The regex with its shorthand classes spelled out (``^A-\\d{7}$`` -> ``^A-[0-9]{7}$``)."""
    out: list[str] = []
    i, inside = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            table = INSIDE if inside else OUTSIDE
            if inside and nxt not in table and nxt not in "]\\":
                # an escaped literal in a class ([A-Z \\.], [a-z \\-]): the grammar knows no
                # such escape; the character itself, or its code where it means a range or a
                # negation
                out.append({"-": "\\x2D", "^": "\\x5E"}.get(nxt, nxt))
            else:
                out.append(table.get(nxt, pattern[i:i + 2]))
            i += 2
            continue
        if c == "[" and not inside:
            inside = True
        elif c == "]" and inside:
            inside = False
        out.append(c)
        i += 1
    return "".join(out)


def plain_schema(schema: Any) -> Any:
    """A copy of a JSON Schema with every ``pattern`` rewritten by :func:`plain_classes`."""
    if isinstance(schema, dict):
        return {k: plain_classes(v) if k == "pattern" and isinstance(v, str) else plain_schema(v)
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [plain_schema(v) for v in schema]
    return schema


def patch() -> None:
    """Route every JSON-Schema grammar of the server through :func:`plain_schema`."""
    from llama_cpp import llama_grammar  # type: ignore[import-not-found]

    original = llama_grammar.LlamaGrammar.from_json_schema.__func__

    def from_json_schema(cls: Any, json_schema: str, verbose: bool = True) -> Any:
        with contextlib.suppress(ValueError):  # not JSON: the original reports it
            json_schema = json.dumps(plain_schema(json.loads(json_schema)))
        return original(cls, json_schema, verbose=verbose)

    llama_grammar.LlamaGrammar.from_json_schema = classmethod(from_json_schema)


def main() -> None:
    patch()
    from llama_cpp.server.__main__ import main as serve  # type: ignore[import-not-found]

    sys.argv[0] = "llama_cpp.server"
    serve()


if __name__ == "__main__":
    main()
