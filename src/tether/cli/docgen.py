"""Reference docs generated from the code: every tether.yaml key and every CLI command.

``python -m tether.cli.docgen --write`` rewrites the generated part of docs/config.md and
docs/cli.md; a test fails when they are out of date.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

from tether.config import TetherConfig, UserConfig

BEGIN = "<!-- generated: do not edit below; python -m tether.cli.docgen --write -->"


def _type_name(annotation: Any) -> str:
    text = repr(annotation) if not isinstance(annotation, type) else annotation.__name__
    for noise in ("typing.", "tether.context.config_model.", "tether.config.", "datetime.",
                  "<class '", "'>"):
        text = text.replace(noise, "")
    return text.replace("Literal", "one of ").replace("NoneType", "None")


def _models(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    for arg in getattr(annotation, "__args__", ()):
        found.extend(_models(arg))
    return found


def config_rows(model: type[BaseModel] = TetherConfig, prefix: str = ""
                ) -> list[tuple[str, str, str, str]]:
    """(dotted key, type, description, default) for every key, depth first; ``*`` stands for a
    map key."""
    rows: list[tuple[str, str, str, str]] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        ann = field.annotation
        rows.append((key, _type_name(ann), field.description or "", _default(field)))
        origin = getattr(ann, "__origin__", None)
        sub = f"{key}.*." if origin is dict else f"{key}."
        for m in _models(ann):
            rows.extend(config_rows(m, sub))
            if m is UserConfig:
                rows.append((f"{sub}<attribute>", "scalar", "Any attribute row filters refer to "
                             "as {{ user.<attribute> }}, e.g. team.", "none"))
    return rows


def _default(field: Any) -> str:
    """The default as tether.yaml would spell it; "required" when there is none."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see below"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    return f"`{text}`"


def config_reference() -> str:
    lines = [BEGIN, "", "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, typ, desc, default in config_rows():
        lines.append(f"| `{key}` | `{typ.replace('|', '/')}` | {default.replace('|', '/')} | "
                     f"{desc.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def _walk(group: Any, prefix: str) -> list[tuple[str, Any]]:
    """(command path, command) for every leaf command, and every group that runs on its own
    (`tether learn`: it has options); groups are recognised by `.commands`."""
    out: list[tuple[str, Any]] = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        path = f"{prefix} {name}"
        if hasattr(cmd, "commands"):
            if any(p.name != "help" for p in cmd.params):
                out.append((path, cmd))
            out.extend(_walk(cmd, path))
        else:
            out.append((path, cmd))
    return out


def cli_reference() -> str:
    from tether.cli.main import app

    root = typer.main.get_command(app)
    lines = [BEGIN, ""]
    for path, cmd in _walk(root, "tether"):
        params = [p for p in cmd.params if p.name not in ("help",)]
        args = " ".join(f"[{p.name.upper()}]" for p in params if p.param_type_name == "argument")
        lines += [f"## `{path}{(' ' + args) if args else ''}`", "",
                  " ".join((cmd.help or "").split()), ""]
        for p in params:
            if p.param_type_name == "option":
                flags = ", ".join(f"`{o}`" for o in p.opts)
                lines.append(f"- {flags}: {p.help or ''}")
            else:
                lines.append(f"- `{p.name.upper()}`: {getattr(p, 'help', '') or ''}")
        lines.append("")
    return "\n".join(lines)


def _merge(path: Path, generated: str) -> str:
    head = path.read_text(encoding="utf-8").split(BEGIN)[0] if path.exists() else ""
    return head + generated


def targets(docs: Path) -> dict[Path, str]:
    return {
        docs / "config.md": _merge(docs / "config.md", config_reference()),
        docs / "cli.md": _merge(docs / "cli.md", cli_reference()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description="Regenerate the reference docs.")
    ap.add_argument("--write", action="store_true", help="Rewrite docs/config.md and docs/cli.md.")
    ap.add_argument("--docs", type=Path, default=Path("docs"))
    args = ap.parse_args()
    stale = [p for p, text in targets(args.docs).items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    if args.write:
        for p, text in targets(args.docs).items():
            p.write_text(text, encoding="utf-8")
        return 0
    for p in stale:
        print(f"{p} is out of date: run python -m tether.cli.docgen --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
