"""Data for pre-training (and, beside it, the fine-tuning task readers).

Pre-training flow, one module per step:
- `corpus`     text sources (.txt folders, WikiExtractor, .jsonl, hub:) → documents of sentences →
               word-piece ids, cached as flat arrays (`load_tokenized_corpus`)
- `sentences`  the rule-based sentence splitter
- `instances`  held-out documents, NSP pairs / packed text / causal blocks (`build_pretraining_data`)
- `masking`    the MLM masking procedure and the collators (`make_collator`)

Kept import-light on purpose: import the submodule you need.
"""

# The label of a position without a loss: what the collators and task features put where nothing is
# predicted, and what the model's losses skip (torch's cross_entropy default ignore_index).
IGNORE_INDEX = -100
