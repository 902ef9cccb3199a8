"""Each caller's own API credentials (``serve.credentials_file``, mode 600), by source and user.

An API source whose ``auth.credential`` is ``token_store`` reads every request's credential
from here, for the user who calls: a caller with none is refused, never given another's. Unlike
the bearer tokens tether checks (stored hashed), these are presented to the API, so they are
kept as given, in a file only the project's owner may read, as a database client keeps its
password file; they never appear in a result, evidence, the call log or an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tether.errors import ConfigError
from tether.keyfile import private_file


class CredentialStore:
    def __init__(self, path: Path):
        self.path = path
        self._read: tuple[tuple[int, int, int], dict[str, dict[str, str]]] | None = None

    def _load(self) -> dict[str, dict[str, str]]:
        """The file's credentials, read again only when the file changes (a server reads
        them on every call; another process sets and revokes them)."""
        try:
            st = self.path.stat()
            mark = (st.st_mtime_ns, st.st_size, st.st_ino)
            if self._read is not None and self._read[0] == mark:
                return {s: dict(u) for s, u in self._read[1].items()}
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as e:
            raise ConfigError(f"{self.path} is not valid JSON ({e.msg}).",
                              hint="Restore it from a backup, or remove it and set the "
                              "credentials again.") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{self.path} does not hold credentials tether wrote.")
        self._read = (mark, data)
        return {s: dict(u) for s, u in data.items()}

    def get(self, source: str, user: str) -> str | None:
        found = self._load().get(source, {}).get(user)
        return found if isinstance(found, str) and found else None

    def set(self, source: str, user: str, secret: str) -> None:
        data = self._load()
        data.setdefault(source, {})[user] = secret
        self._save(data)

    def remove(self, source: str, user: str) -> bool:
        data = self._load()
        if user not in data.get(source, {}):
            return False
        del data[source][user]
        self._save(data)
        return True

    def holders(self) -> list[tuple[str, str]]:
        """(source, user) for every credential held (never the secrets)."""
        return sorted((s, u) for s, users in self._load().items() for u in users)

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        private_file(self.path)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, self.path)
