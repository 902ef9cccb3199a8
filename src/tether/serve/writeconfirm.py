"""A write's confirmation (serve/write.py): short, signed with the server's key, bound to the
caller, the tool's version, the arguments and a digest of the rows as the dry run read them,
and valid until its time runs out. Nothing is stored: the server checks it by computing it
again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from typing import Any

from tether.serve.executor import Executor, jsonable
from tether.serve.kinds import Call, ToolError


def _key(ex: Executor) -> bytes:
    return hmac.new(ex.cursor_key, b"tether/write-confirmation", hashlib.sha256).digest()


def digest(rows: list[dict[str, Any]]) -> str:
    """The rows' version: what they held when read (a confirmation is bound to it)."""
    text = json.dumps([{k: jsonable(v) for k, v in sorted(r.items())} for r in rows],
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def asked(keys: list[tuple[Any, ...]], to: dict[str, Any]) -> str:
    text = json.dumps([[list(k) for k in keys], to], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _mac(ex: Executor, *parts: str, size: int) -> str:
    raw = hmac.new(_key(ex), "\x1f".join(parts).encode(), hashlib.sha256).digest()[:size]
    return base64.b32encode(raw).decode().rstrip("=").lower()


def _who(ex: Executor, call: Call, what: str, until: str) -> str:
    """The part of a confirmation bound to the caller, the tool's version, the arguments and
    the time it runs out."""
    return _mac(ex, "who", call.user, call.tool, call.version, what, until, size=8)


def _rows_mac(ex: Executor, who: str, rows: str) -> str:
    """The part bound to the rows as the dry run read them."""
    return _mac(ex, "rows", who, rows, size=6)


def sign(ex: Executor, call: Call, what: str, rows: str, until: float) -> str:
    """A short confirmation (a model copies it back): when it runs out, then two keyed MACs,
    one over the caller, tool, version and arguments, one over that and the rows' digest.
    Nothing is stored: the server checks it by computing both again."""
    when = _base36(int(until))
    who = _who(ex, call, what, when)
    return f"{when}-{who}-{_rows_mac(ex, who, rows)}"


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def confirmed(ex: Executor, call: Call, token: Any, what: str) -> Callable[[str], bool]:
    """A valid confirmation's check of the rows as they are now (True: the rows the dry run
    read), else a refusal saying why."""
    def bad(why: str) -> ToolError:
        return ToolError(f"Not allowed: {why}; call {call.tool} again with dry_run true and "
                         "use the confirmation it returns", refusal={
                             "reason": "confirmation_invalid", "detail": why})

    if not isinstance(token, str) or not token:
        raise ToolError(f"Not allowed: a write needs the confirmation of a dry run; call "
                        f"{call.tool} with dry_run true first, then again with dry_run false "
                        "and that confirmation", refusal={"reason": "confirmation_required",
                                                          "detail": "no confirmation given"})
    if not re.fullmatch(r"[0-9a-z]{1,13}-[a-z2-7]{1,26}-[a-z2-7]{1,16}", token.strip().lower()):
        raise bad("the confirmation is not one this server issued")
    parts = token.strip().lower().split("-")
    when, who, rows = parts
    try:
        until = int(when, 36)
    except ValueError:
        raise bad("the confirmation is not one this server issued") from None
    if not hmac.compare_digest(who, _who(ex, call, what, when)):
        raise bad("the confirmation was made for another user, another tool or version, or "
                  "other arguments")
    if time.time() > until:
        raise bad("the confirmation is past its time")
    return lambda digest_now: hmac.compare_digest(rows, _rows_mac(ex, who, digest_now))
