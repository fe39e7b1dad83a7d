"""The model and what travels with it: the BERT network (`bert`), the WordPiece tokenizer (`tokenizer`),
checkpoint folders (`checkpoint`) and the Hugging Face interchange (`hf_compat`).

Import the submodule you need; this package imports nothing (the tokenizer and checkpoint code must stay
importable without torch).
"""
