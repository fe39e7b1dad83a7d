"""`bertbench report`: result records → tables beside the paper's numbers → markdown, terminal, plots.

Imports run one way, up this list (tests/test_layering.py checks it):
- `stats`     pure statistics: intervals over seeds, paired differences (no report types)
- `multibootstrap`  pure: the MultiBERTs multi-bootstrap every comparison uses, Holm, the MDE, seed plans
- `model`     the data model (`ReportData`, `Table`, `Variant`, `RowKey`, `Cell`, formatting, GLUE rows)
- `tables/`   the tables built on the model: the main table, Tables 5, 6 and 8, pre-training seeds,
              provenance, paired differences, claims, protocol, Figure 5
- `build`     the whole report (`Report`): every table in order, and the plots beside it
- `render/`   markdown, the terminal, plots
- `run`       what `bertbench report` does, as a function (files, plots, terminal); `plan` is `bertbench plan`

Import the submodule you need; this package imports nothing.
"""
