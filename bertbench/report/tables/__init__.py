"""The report's tables that build on `report.model`: paired differences, the paper's claims, the
fine-tuning protocol, Figure 5. Each imports the model (and `report.stats`), never a renderer."""
