"""Opaque, tamper-evident cursors: the last row's key, signed for one user, tool and arguments.

The signing key lives in ``serve.cursor_key_file`` (created once, 0600), so cursors survive
restarts and work across replicas that share the file.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

from tether.keyfile import load_secret


class CursorError(ValueError):
    """A cursor that was altered, or made for another user, tool, version or arguments."""


def load_key(path: Path) -> bytes:
    """The signing key, created on first use (mode 600)."""
    return load_secret(path)


# a key value keeps its type through the cursor: a date compared with text is an engine error
_TAGS: dict[str, Any] = {"dt": dt.datetime.fromisoformat, "d": dt.date.fromisoformat,
                         "t": dt.time.fromisoformat, "n": decimal.Decimal, "u": uuid.UUID}


def _tag(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return {"dt": v.isoformat()}
    if isinstance(v, dt.date):
        return {"d": v.isoformat()}
    if isinstance(v, dt.time):
        return {"t": v.isoformat()}
    if isinstance(v, decimal.Decimal):
        return {"n": str(v)}
    if isinstance(v, uuid.UUID):
        return {"u": str(v)}
    return v


def _untag(v: Any) -> Any:
    if isinstance(v, dict) and len(v) == 1:
        (tag, text), = v.items()
        if tag in _TAGS and isinstance(text, str):
            try:
                return _TAGS[tag](text)
            except (ValueError, decimal.InvalidOperation):
                raise CursorError("cursor is not one this server issued; omit it to start "
                                  "again") from None
    return v


def _scope(user: str, tool: str, version: str, args: dict[str, Any]) -> str:
    stable = {k: v for k, v in args.items() if k not in ("cursor", "limit")}
    blob = json.dumps([user, tool, version, stable], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def encode(key: bytes, user: str, tool: str, version: str, args: dict[str, Any],
           last: list[Any], total: int | None = None) -> str:
    """A cursor after ``last`` (the last row's key, or an offset); ``total``, the matching rows
    counted on the first page, travels with it so every page states it."""
    data: dict[str, Any] = {"s": _scope(user, tool, version, args), "k": [_tag(v) for v in last]}
    if total is not None:
        data["t"] = int(total)
    body = json.dumps(data, separators=(",", ":"), default=str).encode()
    sig = hmac.new(key, body, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(sig + body).decode().rstrip("=")


def decode(key: bytes, cursor: str, user: str, tool: str, version: str,
           args: dict[str, Any]) -> list[Any]:
    """The key values to continue after; CursorError if forged or out of scope."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        sig, body = raw[:16], raw[16:]
        data = json.loads(body)
    except (ValueError, json.JSONDecodeError):
        raise CursorError("cursor is not one this server issued; omit it to start again") from None
    if not hmac.compare_digest(sig, hmac.new(key, body, hashlib.sha256).digest()[:16]):
        raise CursorError("cursor signature does not match; omit it to start again")
    if data.get("s") != _scope(user, tool, version, args):
        raise CursorError("cursor belongs to another user, tool, version or set of arguments; "
                          "repeat the same call without it to start again")
    return [_untag(v) for v in data["k"]]


def total_of(cursor: str) -> int | None:
    """The total a cursor carries (read after :func:`decode` has checked its signature)."""
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    found = json.loads(raw[16:]).get("t")
    return found if isinstance(found, int) else None
