"""`python -m bertbench …` is the `bertbench` command (the benchmarks start fresh processes this way)."""
from bertbench.cli import main

main()
