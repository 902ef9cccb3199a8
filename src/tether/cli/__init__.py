"""The command line: one module per command group, thin (parse, call, print)."""
