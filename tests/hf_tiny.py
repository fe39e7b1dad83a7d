"""Tiny random Hugging Face encoders made offline (issue 57): a config and random weights from transformers, and a
tokenizer trained with `tokenizers` on a small slice of the shared corpus (the fixture corpus where that is
absent), in the kind each architecture ships: byte-level BPE for RoBERTa, WordPiece for ELECTRA and DistilBERT,
a SentencePiece-style Unigram for DeBERTa-v2. Each folder is what `save_pretrained` writes, so bertbench sees
exactly what a downloaded model gives it."""
from __future__ import annotations

from pathlib import Path

SHARED_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpus" / "gutenberg" / "alice_in_wonderland.txt"
FIXTURE_CORPUS = Path(__file__).parent / "fixtures" / "corpus"
VOCAB_SIZE = 600
# bertbench's tiny shape (2 layers, hidden 128, 2 heads: a claim pairs it with our tiny variants); 136 positions
# hold the 128 tokens of the longest task here.
SHAPE = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 256,
         "max_position_embeddings": 136}
ARCHITECTURES = ("roberta", "electra", "distilbert", "deberta-v2")


def corpus_lines(limit: int = 3000) -> list[str]:
    """A few thousand lines of real text: a book of the shared corpus, else the test fixtures' corpus."""
    files = [SHARED_CORPUS] if SHARED_CORPUS.is_file() else sorted(FIXTURE_CORPUS.rglob("*.txt"))
    lines: list[str] = []
    for f in files:
        lines.extend(line.strip() for line in f.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip())
    return lines[:limit]


def _byte_level_bpe(lines):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=False)
    return tok, dict(bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>", unk_token="<unk>",
                     pad_token="<pad>", mask_token="<mask>")


def _wordpiece(lines):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok, dict(cls_token="[CLS]", sep_token="[SEP]", unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]")


def _unigram(lines):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()  # SentencePiece's "▁word" pieces
    tok.decoder = decoders.Metaspace()
    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    tok.train_from_iterator(lines, trainers.UnigramTrainer(vocab_size=VOCAB_SIZE, special_tokens=specials,
                                                           unk_token="[UNK]"))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    return tok, dict(cls_token="[CLS]", sep_token="[SEP]", unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]",
                     bos_token="[CLS]", eos_token="[SEP]")


def make_tokenizer(architecture: str, lines):
    """(tokenizers.Tokenizer, special-token names) of the kind `architecture` ships with."""
    build = {"roberta": _byte_level_bpe, "electra": _wordpiece, "distilbert": _wordpiece, "deberta-v2": _unigram}
    return build[architecture](lines)


def make_config(transformers, architecture: str, vocab_size: int, pad_id: int):
    if architecture == "roberta":
        return transformers.RobertaConfig(vocab_size=vocab_size, pad_token_id=pad_id, bos_token_id=0, eos_token_id=2,
                                          type_vocab_size=1, **{**SHAPE, "max_position_embeddings": 138})
    if architecture == "electra":
        return transformers.ElectraConfig(vocab_size=vocab_size, embedding_size=64, pad_token_id=pad_id, **SHAPE)
    if architecture == "distilbert":
        return transformers.DistilBertConfig(vocab_size=vocab_size, dim=128, n_layers=2, n_heads=2, hidden_dim=256,
                                             max_position_embeddings=136, pad_token_id=pad_id)
    return transformers.DebertaV2Config(vocab_size=vocab_size, pad_token_id=pad_id, type_vocab_size=0,
                                        relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                                        **SHAPE)


def make_folder(folder: Path, architecture: str, lines=None, seed: int = 0) -> Path:
    """A `save_pretrained` folder of a random tiny `architecture` with a tokenizer trained on `lines`."""
    import torch
    import transformers

    tok, specials = make_tokenizer(architecture, lines if lines is not None else corpus_lines())
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=128, **specials)
    cfg = make_config(transformers, architecture, tok.get_vocab_size(), fast.pad_token_id)
    torch.manual_seed(seed)
    transformers.AutoModel.from_config(cfg).save_pretrained(folder)
    fast.save_pretrained(folder)
    return Path(folder)
