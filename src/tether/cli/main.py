"""`tether`: entry point, global error handling, and the command groups."""

from __future__ import annotations

import sys

import typer

from tether import __version__
from tether.cli import build as build_cmd
from tether.cli import demo as demo_cmd
from tether.cli import doctor as doctor_cmd
from tether.cli import drift as drift_cmd
from tether.cli import eval as eval_cmd
from tether.cli import imports as imports_cmd
from tether.cli import init as init_cmd
from tether.cli import learn as learn_cmd
from tether.cli import lint as lint_cmd
from tether.cli import profile as profile_cmd
from tether.cli import serve as serve_cmd
from tether.cli import ui as ui_cmd
from tether.cli.output import err
from tether.errors import TetherError

app = typer.Typer(
    name="tether",
    help="Keep the tools an AI agent calls tied to the data they describe.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("init")(init_cmd.init)
app.command("profile")(profile_cmd.profile)
app.command("build")(build_cmd.build)
app.command("tools")(build_cmd.tools)
app.command("lint")(lint_cmd.lint)
app.command("serve")(serve_cmd.serve)
app.command("doctor")(doctor_cmd.doctor)
app.command("versions")(serve_cmd.versions)
app.add_typer(serve_cmd.token_app, name="token")
app.command("check")(drift_cmd.check)
app.command("retire")(drift_cmd.retire)
app.command("rollback")(drift_cmd.rollback)
app.add_typer(drift_cmd.review_app, name="review")
app.add_typer(drift_cmd.drift_app, name="drift")
app.command("watch")(drift_cmd.watch)
app.command("diff")(drift_cmd.diff)
app.command("ci")(drift_cmd.ci)
app.add_typer(eval_cmd.eval_app, name="eval")
app.add_typer(imports_cmd.import_app, name="import")
app.add_typer(learn_cmd.learn_app, name="learn")
app.command("explain")(imports_cmd.explain)
app.command("ui")(ui_cmd.ui)
app.add_typer(demo_cmd.app, name="demo")


def _version(value: bool) -> None:
    if value:
        print(f"tether {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """tether: generate, serve, watch and evaluate grounded MCP tools."""


def main() -> None:
    """Console script: run the app; a TetherError is one paragraph on stderr, never a traceback.

    Usage errors (an unknown flag) are the CLI framework's own message, also exit code 2.
    """
    try:
        app()
    except TetherError as e:
        err.print(f"[bold red]error:[/] {e.paragraph()}", markup=True, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
