"""Opaque, tamper-evident cursors: the last row's key, signed for one user, tool and arguments.

The signing key lives in ``serve.cursor_key_file`` (created once, 0600), so cursors survive
restarts and work across replicas that share the file.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any


class CursorError(ValueError):
    """A cursor that was altered, or made for another user, tool, version or arguments."""


def load_key(path: Path) -> bytes:
    """The signing key, created on first use."""
    if path.exists():
        return bytes.fromhex(path.read_text().strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex())
    return key


def _scope(user: str, tool: str, version: str, args: dict[str, Any]) -> str:
    stable = {k: v for k, v in args.items() if k not in ("cursor", "limit")}
    blob = json.dumps([user, tool, version, stable], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def encode(key: bytes, user: str, tool: str, version: str, args: dict[str, Any],
           last: list[Any]) -> str:
    body = json.dumps({"s": _scope(user, tool, version, args), "k": last},
                      separators=(",", ":"), default=str).encode()
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
    return list(data["k"])
