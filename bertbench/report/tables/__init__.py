"""The report's tables that build on `report.model`: the main table, the paper's ablation Tables 5, 6 and 8,
the pre-training seeds, provenance, paired differences, the paper's claims, the fine-tuning protocol, Figure 5.
Each imports the model (and `report.stats`), never a renderer."""
