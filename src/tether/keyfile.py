"""Secret files a project keeps beside tether.yaml (cursor signing key, mask key): created once,
mode 600, never printed."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from tether.errors import ConfigError


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 600 if it does not exist (a database file, a token
    store), so that no other user can read what is written into it later."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def load_secret(path: Path, size: int = 32) -> bytes:
    """The key stored in ``path`` (hex), created with ``size`` random bytes on first use."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; a key file belongs there.",
                          hint="Remove the directory; tether creates the key on first use.")
    if path.exists():
        try:
            key = bytes.fromhex(path.read_text(encoding="ascii").strip())
        except (ValueError, UnicodeDecodeError):
            raise ConfigError(f"{path} does not hold a key tether wrote (hex text expected).",
                              hint="Restore it from a backup; removing it makes a new key, "
                              "which invalidates what the old one signed or hashed.") from None
        if len(key) < 16:
            raise ConfigError(f"{path} holds a key shorter than 16 bytes.",
                              hint="Remove it to make a new one.")
        return key
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_bytes(size)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex())
    try:
        os.link(tmp, path)  # atomic, and never replaces a key another process made first
    except FileExistsError:
        return load_secret(path, size)
    finally:
        tmp.unlink()
    return key
