"""`python -m tether`: the same as the `tether` command."""

from tether.cli.main import main

main()
