"""The attack corpus against an HTTP API source: data, not code (tests/test_api_attacks.py runs
it against tests/hostileapi.py and tests/apiserver.py).

An API is untrusted: it may echo the caller's credential back (in any encoding), send more bytes
than a server can hold, or answer a sampling user with rows no other caller may see. Each case
says what it does and what tether must do:

- ``scrubbed``: no spelling of the secret (nor its first characters) reaches the error, the
  result, the evidence, the call log or the tool definitions;
- ``bounded``: the server reads at most ``serve.max_api_call_bytes`` for the call and its
  memory grows within that cap and a fixed margin;
- ``withheld``: what one user's sampled responses held never reaches another user's tool list;
- ``refused``: the CLI exits 2 with a message naming the file, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiAttack:
    id: str
    kind: str
    """echo | page_bomb | sample_leak | deep_spec"""
    expect: str
    """scrubbed | bounded | withheld | refused"""
    scheme: str = "bearer"
    """bearer or basic: how the credential travels (basic: base64 of user:password)."""
    tool: str | None = None
    form: str | None = None
    """How the API echoes the secret: sent, upper, lower, base64, url, plus, password."""
    spec: str | None = None
    """deep_spec: json, yaml or ref (a chain of $ref)."""


ECHO_FORMS = {"bearer": ("sent", "upper", "lower", "base64", "url", "plus"),
              "basic": ("sent", "upper", "base64", "url", "password")}
"""The encodings a server echoes a credential in; basic's base64 is its Authorization header."""

ECHOES = [ApiAttack(f"echo-{channel}-{scheme}-{form}", "echo", "scrubbed", scheme,
                    f"echo_{channel}", form)
          for scheme, forms in ECHO_FORMS.items() for form in forms
          for channel in ("error", "rows")]
"""``echo_error``: an error message of 190 characters, then the secret. ``echo_rows``: a row
whose fields hold the secret, and a next-page link (followed, so in the evidence) that does."""

API_ATTACKS = [
    *ECHOES,
    ApiAttack("page-bomb", "page_bomb", "bounded", tool="bomb_rows"),
    ApiAttack("sample-leak", "sample_leak", "withheld", tool="tickets_by_status"),
    ApiAttack("deep-spec-json", "deep_spec", "refused", spec="json"),
    ApiAttack("deep-spec-yaml", "deep_spec", "refused", spec="yaml"),
    ApiAttack("deep-spec-ref", "deep_spec", "refused", spec="ref"),
]

SECRETS = {"bearer": "sk/Live+7Qx9=Zr2Vb8Pn4Wm6",
           "basic": "amy:Pw/7Qx9+Zr2Vb8=Pn4Wm6"}
"""The credential each scheme's caller holds: mixed case, and characters URL-encoding changes."""

DEEP = 100_000
"""How deep the deep specs nest."""


def of_kind(kind: str) -> list[ApiAttack]:
    return [a for a in API_ATTACKS if a.kind == kind]
