"""The report's tables that build on `report.model` (`bertbench.report` lists them); each imports the model (and
`report.stats`), never a renderer."""
