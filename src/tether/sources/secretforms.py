"""Every spelling of a credential a server can send back, and text with all of them replaced.

An API is untrusted: it may quote the request it got in an error, echo the Authorization header
in a field, or copy the credential into its next-page link. What it sends back is the secret as
sent, in another case, base64 (what a Basic header is, and what an API that encodes the header
it got sends), URL-encoded (``%2F``, or ``+`` for a space). :class:`Scrubber` replaces each of
these, case folded, wherever it stands: base64 is matched at each of the three alignments a
secret can have inside a longer encoded text (the characters that depend on the secret alone).
Text cut from a longer one loses a secret's start at the cut: :meth:`Scrubber.scrub` with
``cut`` replaces first and cuts after, and drops a trailing start of a spelling.
"""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import quote, quote_plus

SHOWN_SECRET = "<credential>"
MIN_PART = 4
"""Characters of a spelling's start that count as a partial secret at a cut."""
MIN_INNER = 6
"""Characters a base64 middle needs to be matched (shorter ones would match anything)."""


def _b64_forms(raw: bytes) -> set[str]:
    """``raw`` in base64 (standard and URL-safe, padded or not), and the characters of it that
    are the same wherever it stands inside a longer encoded text (offsets 0, 1 and 2)."""
    out: set[str] = set()
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        whole = enc(raw).decode()
        out |= {whole, whole.rstrip("=")}
        for k in range(3):
            text = enc(b"\0" * k + raw).decode().rstrip("=")
            first = -(-8 * k // 6)  # the first character made of the secret's bits alone
            last = (8 * (k + len(raw))) // 6  # characters before this end within the secret
            inner = text[first:last]
            if len(inner) >= MIN_INNER:
                out.add(inner)
    return out


def spellings(secret: str, basic: bool = False) -> list[str]:
    """The secret's spellings, longest first (basic: ``user:password``, and the password
    alone). Case is folded when matching, so one spelling stands for its upper and lower case."""
    parts = {secret}
    if basic and ":" in secret and len(secret.partition(":")[2]) >= MIN_PART:
        parts.add(secret.partition(":")[2])
    forms: set[str] = set()
    for part in filter(None, parts):
        forms |= {part, part.casefold(), part.upper(), quote(part, safe=""), quote(part),
                  quote_plus(part)}
        forms |= _b64_forms(part.encode())
    return sorted(forms, key=lambda f: (-len(f), f))


class Scrubber:
    """Replaces a credential's every spelling (:func:`spellings`) in text and in values."""

    def __init__(self, secret: str, basic: bool = False):
        self.forms = spellings(secret, basic)
        self.pattern = re.compile("|".join(re.escape(f) for f in self.forms), re.IGNORECASE
                                  ) if self.forms else None

    def scrub(self, text: str, cut: int | None = None) -> str:
        """``text`` with every spelling replaced; with ``cut``, at most that many characters
        of it after the replacing, and no trailing start of a spelling (a text the API or a
        reader already cut)."""
        if self.pattern is None:
            return text[:cut] if cut is not None else text
        text = self.pattern.sub(SHOWN_SECRET, text)
        if cut is None:
            return text
        return self._tail(self._tail(text)[:cut])

    def _tail(self, text: str) -> str:
        """``text`` less a trailing start (MIN_PART characters or more) of any spelling."""
        for form in self.forms:
            for n in range(min(len(form), len(text)), MIN_PART - 1, -1):
                if text[-n:].lower() == form[:n].lower():
                    return text[:-n] + SHOWN_SECRET
        return text

    def value(self, v: Any, depth: int = 200) -> Any:
        """A value from the API (text, or lists and objects of it, keys too) scrubbed; one
        nested more than ``depth`` levels is a ValueError (never a RecursionError)."""
        if isinstance(v, str):
            return self.scrub(v)
        if isinstance(v, list | dict) and depth <= 0:
            raise ValueError("nested too deep")
        if isinstance(v, list):
            return [self.value(x, depth - 1) for x in v]
        if isinstance(v, dict):
            return {self.scrub(k) if isinstance(k, str) else k: self.value(x, depth - 1)
                    for k, x in v.items()}
        return v

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds any spelling of the secret."""
        return self.pattern is not None and self.pattern.search(text) is not None
