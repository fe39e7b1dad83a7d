"""The report turned into something to read: markdown files, terminal tables, plots."""
