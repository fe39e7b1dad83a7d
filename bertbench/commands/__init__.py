"""One module per CLI command. Modules import only typer/stdlib at top level; heavy work is imported inside."""
