"""Console sessions: a signed cookie holding who signed in and the form token.

A person signs in with the bearer token `tether token add` gave them; the console then keeps
``{user, token fingerprint, csrf, expires}`` in a cookie signed with HMAC-SHA256. The signing key
is derived from the project's cursor key (``serve.cursor_key_file``), so a session survives a
restart and works on every replica that shares the key, and no new secret file is needed. The
token's fingerprint is checked on every request: revoking or replacing a token ends its sessions.
Every form carries the session's csrf value; a post without it is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

COOKIE = "tether_console"
SESSION_SECONDS = 12 * 3600
_CONTEXT = b"tether console session v1"


def session_key(cursor_key: bytes) -> bytes:
    """The console's signing key: the cursor key, separated by purpose (HMAC of a label)."""
    return hmac.new(cursor_key, _CONTEXT, hashlib.sha256).digest()


@dataclass(frozen=True)
class Session:
    csrf: str
    user: str | None = None
    token: str | None = None  # the fingerprint of the token the user signed in with
    expires: float = 0.0

    @classmethod
    def anonymous(cls) -> Session:
        return cls(csrf=secrets.token_urlsafe(24), expires=time.time() + SESSION_SECONDS)

    def signed_in(self, user: str, token: str) -> Session:
        """A new session for ``user``: a fresh csrf value, so one seen before sign-in is void."""
        return Session(secrets.token_urlsafe(24), user, token, time.time() + SESSION_SECONDS)


class Signer:
    def __init__(self, key: bytes):
        self.key = key

    def _mac(self, body: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self.key, body, hashlib.sha256).digest()
                                        ).decode().rstrip("=")

    def dump(self, s: Session) -> str:
        body = base64.urlsafe_b64encode(json.dumps(
            {"c": s.csrf, "u": s.user, "t": s.token, "e": int(s.expires)},
            separators=(",", ":")).encode()).decode().rstrip("=")
        return f"{body}.{self._mac(body.encode())}"

    def load(self, value: str | None) -> Session | None:
        """The session in a cookie, or None when it is absent, forged or expired."""
        if not value or value.count(".") != 1:
            return None
        body, mac = value.split(".")
        if not hmac.compare_digest(mac, self._mac(body.encode())):
            return None
        try:
            data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            session = Session(str(data["c"]), data.get("u"), data.get("t"), float(data["e"]))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > time.time() else None


def csrf_ok(session: Session, sent: object) -> bool:
    return isinstance(sent, str) and hmac.compare_digest(session.csrf, sent)
