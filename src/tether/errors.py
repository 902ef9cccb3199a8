"""One exception hierarchy. Every user-facing error says what happened, where, and what to do."""

from __future__ import annotations


class TetherError(Exception):
    """Base of every error tether reports to a user.

    ``where`` names the place (``tether.yaml:12``, a product, a source); ``hint`` says what to do.
    The CLI prints :meth:`paragraph` and exits non-zero, never a traceback.
    """

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def paragraph(self) -> str:
        """The one-paragraph form shown to people."""
        head = f"{self.where}: {self.message}" if self.where else self.message
        if not self.hint:
            return head
        head = head.rstrip()  # a reason without its full stop gets one before the hint
        return f"{head}{'' if head[-1:] in '.!?:;' else '.'} {self.hint}"

    def __str__(self) -> str:
        return self.paragraph()


class ConfigError(TetherError):
    """tether.yaml is missing, malformed, or names things that do not exist."""


class SourceError(TetherError):
    """A data source cannot be reached or answered with an error."""


class QueryError(SourceError):
    """The engine refused or failed a query; ``reason`` is the engine's own first line (which may
    quote values: scrub it before showing it to a caller who may not see every row)."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"source {source!r}: query failed: {reason}")
        self.reason = reason


class SourceUnreachable(SourceError):
    """A source could not be connected to (down, restarting, the network cut): nothing ran."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"source {source!r} cannot be reached ({reason}); nothing was read.",
                         hint="It may be down or restarting: make the call again once it is "
                              "back.")


class ProductError(TetherError):
    """A data product does not match its source (missing table, bad SQL, unknown column)."""


class UnreadableProduct(ProductError):
    """The engine fails reading a product that tether.yaml names rightly (a view whose cast
    fails on one value, a type the driver cannot return): reported, and the others go on."""


class ProjectExistsError(TetherError):
    """A command would overwrite a file a person may have edited."""


class NotPermittedError(TetherError):
    """A named person may not do what they asked (deciding a review without a reviewer role)."""
