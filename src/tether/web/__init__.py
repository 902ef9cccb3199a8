"""The console (`tether ui`): server-rendered pages over a project's reviews, tools, drift,
evaluations and policy. It sits beside the CLI and calls the same public functions."""

from tether.web.app import create_app

__all__ = ["create_app"]
