"""Consoles, progress and error printing shared by every command."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

out = Console(highlight=False)
if not out.is_terminal:  # pipes and CI logs: wide enough that tables do not fold
    out = Console(highlight=False, width=200)
err = Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    """Machine output: plain JSON on stdout, nothing else there."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@contextlib.contextmanager
def progress(total: int, label: str) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr (so --json stays clean); yields a step(message) callback."""
    bar = Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
        TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
        console=err, transient=True, disable=not err.is_terminal,
    )
    with bar:
        task = bar.add_task(label, total=total)

        def step(message: str) -> None:
            bar.update(task, description=message)

        def advance() -> None:
            bar.advance(task)

        step.advance = advance  # type: ignore[attr-defined]
        yield step
