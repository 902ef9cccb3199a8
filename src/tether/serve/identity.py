"""Who is calling. stdio: --as-user or TETHER_USER (whoever writes the client config chooses the
user). HTTP: a bearer token maps to a user; tokens are stored as salted sha256 hashes, shown once.
A runner token (for the evaluation harness) may act as a named user with X-Tether-As-User."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from tether.errors import ConfigError
from tether.serve.kinds import ToolError

RUNNER_SCOPE = "tether:runner"
ADMIN_SCOPE = "tether:admin"
"""An admin token may post OpenLineage events (POST /api/v1/lineage); it acts as no user."""
AS_USER_HEADER = "x-tether-as-user"
Scopes = list[str]  # named here: inside TokenStore, `list` is its method


def _hash(token: str, salt: str) -> str:
    return hashlib.sha256((salt + token).encode()).hexdigest()


class TokenStore:
    def __init__(self, path: Path):
        self.path = path
        self._read: tuple[tuple[int, int, int], dict[str, Any]] | None = None

    def _load(self) -> dict[str, Any]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return {}
        # read again whenever the file changes (a revocation is written by another process and
        # holds at the next request), not on every request
        mark = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._read is not None and self._read[0] == mark:
            return dict(self._read[1])
        try:
            data: dict[str, Any] = json.loads(self.path.read_text())
            self._read = (mark, data)
            return dict(data)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{self.path} is not valid JSON ({e.msg}).",
                              hint="Restore it from a backup or remove it and add tokens "
                              "again.") from None

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, self.path)

    def add(self, user: str, runner: bool = False, admin: bool = False) -> str:
        """A new token for ``user`` (returned once, stored hashed); replaces the user's old one."""
        token = "tt_" + secrets.token_urlsafe(32)
        salt = secrets.token_hex(8)
        data = self._load()
        data[user] = {"salt": salt, "hash": _hash(token, salt), "runner": runner,
                      "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        if admin:
            data[user]["admin"] = True
        self._save(data)
        return token

    def revoke(self, user: str) -> bool:
        data = self._load()
        if user not in data:
            return False
        del data[user]
        self._save(data)
        return True

    def list(self) -> list[dict[str, Any]]:
        return [{"user": u, "runner": bool(v.get("runner")), "admin": bool(v.get("admin")),
                 "created": v.get("created")} for u, v in sorted(self._load().items())]

    def fingerprint(self, user: str) -> str | None:
        """A short digest of ``user``'s current token record (None without one): a session
        made with the token stores it, so revoking or replacing the token ends the session."""
        v = self._load().get(user)
        if v is None:
            return None
        return hashlib.sha256(f"{v['salt']}:{v['hash']}".encode()).hexdigest()[:16]

    def lookup(self, token: str) -> tuple[str, bool] | None:
        """(user, is_runner) for a valid token; constant-time comparison."""
        found = self.scopes_of(token)
        return (found[0], RUNNER_SCOPE in found[1]) if found else None

    def scopes_of(self, token: str) -> tuple[str, Scopes] | None:
        """(user, scopes) for a valid token: runner and admin scopes as it was made with."""
        for user, v in self._load().items():
            if hmac.compare_digest(_hash(token, v["salt"]), v["hash"]):
                scopes = ([RUNNER_SCOPE] if v.get("runner") else []) + (
                    [ADMIN_SCOPE] if v.get("admin") else [])
                return user, scopes
        return None


class StoreVerifier:
    """The SDK's TokenVerifier protocol over the token store."""

    def __init__(self, store: TokenStore):
        self.store = store

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        found = self.store.scopes_of(token)
        if found is None:
            return None
        user, scopes = found
        return AccessToken(token=token, client_id=f"tether-{user}", subject=user, scopes=scopes)


def caller(ctx: Any, stdio_user: str | None) -> str:
    """Who calls: the bearer token's subject over HTTP (a runner token may act as the user its
    header names), else the stdio server's user. Raises a ToolError the call shows (the user is
    checked against the policy by the caller of this)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is None:
        if stdio_user is None:
            raise ToolError("no user: start the server with --as-user NAME or TETHER_USER")
        return stdio_user
    user = token.subject or ""
    request = getattr(ctx, "request", None) if ctx is not None else None
    acting = request.headers.get(AS_USER_HEADER) if request is not None else None
    if acting:
        if RUNNER_SCOPE not in (token.scopes or []):
            raise ToolError(f"this token may not act as another user ({AS_USER_HEADER} "
                            "needs a runner token)")
        user = acting
    return user
