"""The adversarial suite: bad inputs and faults, each with what bertbench must do.

One table, two runners. `tests/test_reliability.py` runs every case in-process (one torch import) and
asserts the outcome; `scripts/reliability_table.py` runs the same cases as real subprocesses and writes
the before → after table (before: `../shared/docs/reliability-cases.md`, tried at b8bcce5, for #1–105 and
F1–F11; the N cases are ours and their "before" is measured at b8bcce5 by the same script).

A case's argv may hold {T} (its scratch folder, built once by `build_scratch`), {DATA} (the shared data)
and {OUT} (a fresh output folder of its own). Outcomes:
- expect="error": a non-zero exit, exactly one `error:` line, no traceback, and every file named in
  `intact` byte-identical afterwards;
- expect="ok": exit 0 and `check(T, OUT)` returns no complaint.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
WIKI = "{DATA}/corpus/wikipedia/wiki_00"
# The prefixes of the reliability report (`PT` and `FT` there); a later flag wins over the prefix's.
PT = ("pretrain", "--model-size", "tiny", "--corpus", WIKI, "--max-documents", "40", "--vocab-size", "1500",
      "--max-seq-len", "64", "--batch-size", "8", "--max-steps", "3", "--eval-every", "3", "--out", "{OUT}")
FT = ("finetune", "--model", "{T}/base", "--max-steps", "3", "--max-train-examples", "32", "--max-eval-examples", "32",
      "--seeds", "1", "--data-dir", "{DATA}", "--out", "{OUT}")


@dataclass(frozen=True)
class Case:
    id: str
    what: str
    argv: tuple[str, ...]
    expect: str = "error"                      # "error" or "ok"
    needle: str = ""                           # must appear in the error line (case-insensitive)
    intact: tuple[str, ...] = ()               # files under {T} that must not change
    check: Optional[Callable[[Path, Path], Optional[str]]] = None  # for "ok": a complaint, or None
    pre: tuple[tuple[tuple[str, ...], dict], ...] = ()  # (argv, env) run first as subprocesses; outcome ignored
    skip_if: str = ""                          # "root" (needs an unprivileged user) or "cuda" (needs no GPU)


def _override(prefix: tuple[str, ...], extra: tuple[str, ...]) -> tuple[str, ...]:
    """The prefix with `extra`'s flags in place of its own (a repeated `--corpus` would add a corpus, not replace it)."""
    pairs, i = [], 0
    while i < len(extra):
        has_value = i + 1 < len(extra) and not extra[i + 1].startswith("--")
        pairs.append((extra[i], extra[i + 1] if has_value else None))
        i += 2 if has_value else 1
    replaced = {flag for flag, _ in pairs}
    argv, i = [prefix[0]], 1
    while i < len(prefix):
        if prefix[i] not in replaced:
            argv += [prefix[i], prefix[i + 1]]
        i += 2
    for flag, value in pairs:
        argv += [flag] if value is None else [flag, value]
    return tuple(argv)


def pt(*extra: str) -> tuple[str, ...]:
    return _override(PT, extra)


def ft(*extra: str) -> tuple[str, ...]:
    return _override(FT, extra)


# ---- checks for cases that must succeed -------------------------------------------------------------------

def _vocab_at_least(n: int, run: str):
    def check(T: Path, out: Path) -> Optional[str]:
        cfg = json.loads((T / run / "checkpoint" / "model_config.json").read_text())
        size = cfg.get("vocab_size")
        return None if size and size >= n else f"model vocab_size {size}, expected ≥ {n}"
    return check


def _one_record(T: Path, out: Path) -> Optional[str]:
    records = list(out.rglob("*.record.json"))
    if len(records) != 1:
        return f"{len(records)} records written, expected 1"
    metrics = json.loads(records[0].read_text()).get("metrics", {})
    return None if metrics and all(isinstance(v, (int, float)) for v in metrics.values()) else f"metrics {metrics}"


# ---- the cases --------------------------------------------------------------------------------------------

DOC = "b8bcce5"  # the commit the reliability report tried; its #ids are kept

CASES: list[Case] = [
    # Pre-training and data inputs (#1-54)
    Case("1", "corpus path missing", pt("--corpus", "{DATA}/corpus/does_not_exist"), needle="does not exist"),
    Case("2", "empty corpus file", pt("--corpus", "{T}/empty.txt"), needle="no text"),
    Case("3", "one-sentence corpus", pt("--corpus", "{T}/one.txt"), needle="too few"),
    Case("4", "rerun after a failed run into the same --out", pt("--out", "{T}/p03"), expect="ok",
         pre=((pt("--corpus", "{T}/one.txt", "--out", "{T}/p03"), {}),), check=_vocab_at_least(1000, "p03")),
    Case("5", "random bytes as .txt", pt("--corpus", "{T}/binary.txt"), needle="UTF-8"),
    Case("6", "unknown corpus file type", pt("--corpus", "{T}/binary.bin"), needle="unknown corpus file type"),
    Case("7", "Latin-1 corpus", pt("--corpus", "{T}/latin1.txt"), needle="UTF-8"),
    Case("8", "folder without corpus files", pt("--corpus", "{T}/notext"), needle="no corpus files"),
    Case("9", "broken JSONL line", pt("--corpus", "{T}/bad.jsonl"), needle="bad.jsonl:2"),
    Case("10", "--mask-ratio 0", pt("--mask-ratio", "0"), needle="mask_ratio"),
    Case("11", "--mask-ratio 1.5", pt("--mask-ratio", "1.5"), needle="mask_ratio"),
    Case("12", "--mask-ratio -0.1", pt("--mask-ratio", "-0.1"), needle="mask_ratio"),
    Case("13", "--mask-ratio nan", pt("--mask-ratio", "nan"), needle="mask_ratio"),
    Case("14", "--mask-procedure 80/10", pt("--mask-procedure", "80/10"), needle="mask_procedure"),
    Case("15", "--mask-procedure 80/10/20", pt("--mask-procedure", "80/10/20"), needle="mask_procedure"),
    Case("16", "--mask-procedure a/b/c", pt("--mask-procedure", "a/b/c"), needle="mask_procedure"),
    Case("17", "unknown recipe", ("pretrain", "--recipe", "no-such-recipe", "--out", "{OUT}"), needle="Unknown recipe"),
    Case("18", "unknown model size", pt("--model-size", "huge"), needle="Unknown model size"),
    Case("19", "recipe with an unknown key", ("pretrain", "--recipe", "{T}/unknown_key.yaml", "--out", "{OUT}"),
         needle="bogus_key"),
    Case("20", "recipe value of the wrong type", ("pretrain", "--recipe", "{T}/wrong_type.yaml", "--out", "{OUT}"),
         needle="expected an integer"),
    Case("21", "recipe list where an integer belongs", ("pretrain", "--recipe", "{T}/wrong_type2.yaml", "--out", "{OUT}"),
         needle="expected an integer"),
    Case("22", "recipe that is not YAML", ("pretrain", "--recipe", "{T}/badyaml.yaml", "--out", "{OUT}"),
         needle="YAML"),
    Case("23", "recipe data: 5", ("pretrain", "--recipe", "{T}/data_scalar.yaml", "--out", "{OUT}"),
         needle="expected a mapping"),
    Case("24", "recipe lr: fast", ("pretrain", "--recipe", "{T}/lr_str.yaml", "--out", "{OUT}"), needle="expected a number"),
    Case("25", "recipe file missing", ("pretrain", "--recipe", "{T}/nope.yaml", "--out", "{OUT}"), needle="not found"),
    Case("26", "--max-steps 0", pt("--max-steps", "0"), needle="max_steps 0"),
    Case("27", "--max-steps -1", pt("--max-steps", "-1"), needle="max_steps -1"),
    Case("28", "--out is a file", pt("--out", "{T}/existing_file.txt"), needle="existing_file.txt",
         intact=("existing_file.txt",)),
    Case("29", "--out under a read-only folder", pt("--out", "{T}/ro/run"), needle="ro/run", skip_if="root"),
    Case("30", "--precision fp16 on CPU", pt("--precision", "fp16"), needle="fp16"),
    Case("31", "--precision bogus", pt("--precision", "bogus"), needle="bogus"),
    Case("32", "--seed -1", pt("--seed", "-1"), needle="seed -1"),
    Case("33", "empty vocab file", pt("--tokenizer", "{T}/empty_vocab.txt"), needle="special tokens"),
    Case("34", "vocab file missing", pt("--tokenizer", "{T}/no_vocab.txt"), needle="tokenizer not found"),
    Case("35", "lr 1e6: NaN loss", pt("--max-steps", "5", "--lr", "1e6", "--warmup-steps", "0", "--set", "log_every=1"),
         needle="NaN"),
    Case("36", "--batch-size 0", pt("--batch-size", "0"), needle="batch_size 0"),
    Case("37", "--grad-accum 0", pt("--grad-accum", "0"), needle="grad_accum 0"),
    Case("38", "--max-seq-len 4", pt("--max-seq-len", "4"), needle="too short"),
    Case("39", "--set unknown key", pt("--set", "bogus=1"), needle="bogus"),
    Case("40", "--set optim.lr=abc", pt("--set", "optim.lr=abc"), needle="expected a number"),
    Case("41", "--resume yes", pt("--resume", "yes"), needle="--resume"),
    Case("42", "--accelerator gpu without a GPU", pt("--accelerator", "gpu"), needle="gpu", skip_if="cuda"),
    Case("43", "hub corpus while offline", ("pretrain", "--model-size", "tiny", "--corpus", "hub:wikitext",
                                            "--max-steps", "3", "--out", "{OUT}"), needle="hub"),
    Case("44", "--max-documents 0", pt("--max-documents", "0"), needle="max_documents 0"),
    Case("45", "--vocab-size 5 (below the alphabet)", pt("--vocab-size", "5"), needle="vocab"),
    # 46 (--devices 4) is the 2-process DDP test: tests/test_pretrain_ddp.py
    Case("47", "--budget-minutes -1", pt("--max-steps", "5", "--budget-minutes", "-1"), needle="budget_minutes -1"),
    Case("48", "--set log_every=0", pt("--set", "log_every=0"), needle="log_every 0"),
    Case("49", "--dupe-factor 0", pt("--masking", "static", "--dupe-factor", "0"), needle="dupe_factor 0"),
    Case("50", "--max-predictions-per-seq 0", pt("--max-predictions-per-seq", "0"), needle="max_predictions_per_seq 0"),
    Case("51", "--resume auto with changed flags", pt("--max-steps", "6", "--checkpoint-every", "1", "--out", "{T}/p51",
                                                      "--resume", "auto", "--lr", "0.5", "--mask-ratio", "0.4"),
         needle="lr", pre=((pt("--max-steps", "6", "--checkpoint-every", "1", "--out", "{T}/p51"),
                            {"BERTBENCH_FAULT": "after_step:3"}),)),
    Case("52", "resume from a truncated last.ckpt", pt("--max-steps", "6", "--checkpoint-every", "1", "--out", "{T}/p52",
                                                       "--resume", "auto"),
         needle="last.ckpt", pre=((pt("--max-steps", "6", "--checkpoint-every", "1", "--out", "{T}/p52"),
                                   {"BERTBENCH_FAULT": "after_step:3", "RELIABILITY_TRUNCATE": "{T}/p52/checkpoints/last.ckpt"}),)),
    Case("53", "data inspect: corpus missing", ("data", "inspect", "--corpus", "{DATA}/corpus/nope"), needle="does not exist"),
    Case("54", "data inspect: --mask-ratio 2", ("data", "inspect", "--corpus", WIKI, "--max-documents", "5",
                                                "--mask-ratio", "2"), needle="mask_ratio"),
    # Fine-tuning inputs (#55-85)
    Case("55", "--model missing", ft("--model", "{T}/nonexistent_ckpt", "--tasks", "rte"), needle="not found"),
    Case("56", "truncated model.safetensors", ft("--model", "{T}/ck_trunc", "--tasks", "rte"), needle="model.safetensors"),
    Case("57", "safetensors header overwritten", ft("--model", "{T}/ck_hdr", "--tasks", "rte"), needle="model.safetensors"),
    Case("58", "0xFF bytes in the tensor data", ft("--model", "{T}/ck_ff", "--tasks", "rte"), needle="NaN/inf"),
    Case("59", "random:huge", ft("--model", "random:huge", "--tasks", "rte"), needle="Unknown model size"),
    Case("60", "--tasks rtee", ft("--tasks", "rtee"), needle="Did you mean"),
    Case("61", "task without local data", ft("--tasks", "mnli"), needle="no task ran"),
    Case("62", "--data-dir missing", ft("--tasks", "rte", "--data-dir", "{T}/no_such_dir"), needle="no_such_dir"),
    Case("63", "RTE train.tsv cut mid-line", ft("--tasks", "rte", "--data-dir", "{T}/gd_trunc"), needle="train.tsv:"),
    Case("64", "RTE without sentence2", ft("--tasks", "rte", "--data-dir", "{T}/gd_nocol"), needle="sentence2"),
    Case("65", "RTE row missing a field", ft("--tasks", "rte", "--data-dir", "{T}/gd_short"), needle="train.tsv:5"),
    Case("66", "RTE train label 'maybe'", ft("--tasks", "rte", "--data-dir", "{T}/gd_label"), needle="maybe"),
    Case("67", "RTE dev label 'maybe'", ft("--tasks", "rte", "--data-dir", "{T}/gd_devlabel"), needle="dev.tsv:3"),
    Case("68", "RTE train.tsv 0 bytes", ft("--tasks", "rte", "--data-dir", "{T}/gd_empty"), needle="empty file"),
    Case("69", "RTE train.tsv header only", ft("--tasks", "rte", "--data-dir", "{T}/gd_hdr"), needle="no examples"),
    Case("70", "--max-train-examples 0", ft("--tasks", "rte", "--max-train-examples", "0"), needle="max-train-examples 0"),
    Case("71", "CoNLL line with 3 columns", ft("--tasks", "conll2003", "--data-dir", "{T}/cd_3col"), needle="train.txt:"),
    Case("72", "CoNLL line with 5 columns", ft("--tasks", "conll2003", "--data-dir", "{T}/cd_5col"), needle="train.txt:"),
    Case("73", "CoNLL tag B-FOO", ft("--tasks", "conll2003", "--data-dir", "{T}/cd_tag"), needle="B-FOO"),
    Case("74", "SQuAD JSON cut in half", ft("--tasks", "squad_v1_devsplit", "--data-dir", "{T}/sq_cut"),
         needle="dev-v1.1.json"),
    Case("75", "fine-tune a NaN checkpoint", ft("--model", "{T}/p35", "--tasks", "rte,stsb"), needle="NaN/inf"),
    Case("76", "fine-tune lr 1e6: NaN loss", ft("--tasks", "rte", "--lr", "1e6"), needle="NaN"),
    Case("77", "finetune --precision fp16", ft("--tasks", "rte", "--precision", "fp16"), needle="fp16"),
    Case("78", "finetune --precision bogus", ft("--tasks", "rte", "--precision", "bogus"), needle="bogus"),
    Case("79", "finetune --batch-size 0", ft("--tasks", "rte", "--batch-size", "0"), needle="batch-size 0"),
    Case("80", "finetune --out is a file", ft("--tasks", "rte", "--out", "{T}/existing_file.txt"),
         needle="existing_file.txt", intact=("existing_file.txt",)),
    Case("81", "model_config.json truncated", ft("--model", "{T}/ck_badcfg", "--tasks", "rte"), needle="model_config.json"),
    Case("82", "checkpoint without a vocabulary", ft("--model", "{T}/ck_novocab", "--tasks", "rte"), needle="vocab"),
    Case("83", "--seeds a,b", ft("--tasks", "rte", "--seeds", "a,b"), needle="--seeds"),
    Case("84", "--tasks ''", ft("--tasks", ""), needle="no tasks"),
    Case("85", "random init with a missing vocab", ft("--model", "random:tiny", "--tokenizer", "{T}/nope_vocab.txt",
                                                      "--tasks", "rte"), needle="tokenizer not found"),
    # Report, convert, run (#86-105)
    Case("86", "report on an empty folder", ("report", "{T}/emptydir"), needle="no *.record.json"),
    Case("87", "report on a missing folder", ("report", "{T}/no_such_results"), needle="no such file"),
    Case("88", "record cut in half", ("report", "{T}/rec_trunc"), needle="record.json"),
    Case("89", "metric 'high'", ("report", "{T}/rec_high"), needle="accuracy"),
    Case("90", "record without task", ("report", "{T}/rec_notask"), needle="task"),
    Case("91", "record with NaN", ("report", "{T}/rec_nan"), needle="NaN"),
    Case("92", "report --out over a hand-written file", ("report", "{T}/f00", "--out", "{T}/mynotes.md"),
         needle="mynotes.md", intact=("mynotes.md",)),
    Case("93", "report --embed without markers", ("report", "{T}/f00", "--embed", "{T}/mynotes.md"), needle="markers",
         intact=("mynotes.md",)),
    Case("94", "the same record twice", ("report", "{T}/f00", "{T}/f00_copy"), needle="same model"),
    Case("95", "convert --to-hf of a data folder", ("convert", "--to-hf", "{T}/notext", "--out", "{OUT}"),
         needle="not a bertbench checkpoint"),
    Case("96", "convert --from-hf without config.json", ("convert", "--from-hf", "{T}/hf_noconf", "--out", "{OUT}"),
         needle="config.json"),
    Case("97", "convert --to-hf of a truncated checkpoint", ("convert", "--to-hf", "{T}/ck_trunc", "--out", "{OUT}"),
         needle="model.safetensors"),
    Case("98", "convert without a direction", ("convert", "--out", "{OUT}"), needle="exactly one"),
    Case("99", "convert --from-hf with broken config.json", ("convert", "--from-hf", "{T}/hf_badconf", "--out", "{OUT}"),
         needle="config.json"),
    Case("100", "convert --from-hf of a missing folder", ("convert", "--from-hf", "{T}/nope_hf", "--out", "{OUT}"),
         needle="nope_hf"),
    Case("101", "convert --out is a file", ("convert", "--to-hf", "{T}/base/checkpoint", "--out", "{T}/existing_file.txt"),
         needle="existing_file.txt", intact=("existing_file.txt",)),
    Case("102", "convert over an existing checkpoint", ("convert", "--from-hf", "{T}/hf45", "--out", "{T}/ck_victim"),
         needle="ck_victim", intact=("ck_victim/model.safetensors", "ck_victim/summary.json")),
    Case("103", "unknown preset", ("run", "--preset", "nosuch"), needle="Unknown preset"),
    Case("104", "preset with repeated variant names", ("run", "--preset", "{T}/dup.yaml", "--validate"), needle="repeat"),
    Case("105", "preset objective gpt", ("run", "--preset", "{T}/badobj.yaml", "--validate"), needle="badobj.yaml"),
]

# Our own: at least 30 more, on the same inputs a user (or a cluster) gets wrong.
CASES += [
    Case("N1", "folder of empty .txt files", pt("--corpus", "{T}/empties"), needle="no text"),
    Case("N2", "JSONL line that is a list", pt("--corpus", "{T}/notobj.jsonl"), needle="notobj.jsonl:1"),
    Case("N3", "JSONL object without text", pt("--corpus", "{T}/notext.jsonl"), needle="notext.jsonl:1"),
    Case("N4", "JSONL text that is a number", pt("--corpus", "{T}/numtext.jsonl"), needle="numtext.jsonl:1"),
    Case("N5", "--vocab-size 0", pt("--vocab-size", "0"), needle="vocab"),
    Case("N6", "--vocab-size -5", pt("--vocab-size", "-5"), needle="vocab"),
    Case("N7", "--lr -1", pt("--lr", "-1"), needle="lr"),
    Case("N8", "--lr nan", pt("--lr", "nan"), needle="lr"),
    Case("N9", "--warmup-steps -1", pt("--warmup-steps", "-1"), needle="warmup"),
    Case("N10", "--mask-ratio inf", pt("--mask-ratio", "inf"), needle="mask_ratio"),
    Case("N11", "--dupe-factor -1", pt("--masking", "static", "--dupe-factor", "-1"), needle="dupe_factor"),
    Case("N12", "--devices 0", pt("--devices", "0"), needle="devices"),
    Case("N13", "--max-seq-len beyond the position table", pt("--max-seq-len", "100000"), needle="max_seq_len"),
    Case("N14", "empty recipe file", ("pretrain", "--recipe", "{T}/empty.yaml", "--out", "{OUT}"), needle="empty.yaml"),
    Case("N15", "recipe that is a list", ("pretrain", "--recipe", "{T}/list.yaml", "--out", "{OUT}"), needle="list.yaml"),
    Case("N16", "--set without '='", pt("--set", "lr"), needle="--set"),
    Case("N17", "--set into an unknown section", pt("--set", "nosuch.key=1"), needle="nosuch"),
    Case("N18", "vocab with a repeated token", pt("--tokenizer", "{T}/dup_vocab.txt"), needle="dup_vocab.txt"),
    Case("N19", "vocab of random bytes", pt("--tokenizer", "{T}/binary_vocab.txt"), needle="binary_vocab.txt"),
    Case("N20", "--objective gpt", pt("--objective", "gpt"), needle="gpt"),
    Case("N21", "--masking bogus", pt("--masking", "bogus"), needle="bogus"),
    Case("N22", "--warmup-steps beyond --max-steps", pt("--warmup-steps", "10"), needle="warmup"),
    Case("N23", "finetune --lr 0", ft("--tasks", "rte", "--lr", "0"), needle="lr"),
    Case("N24", "finetune --lr -1", ft("--tasks", "rte", "--lr", "-1"), needle="lr"),
    Case("N25", "finetune --seeds ''", ft("--tasks", "rte", "--seeds", ""), needle="--seeds"),
    Case("N26", "finetune --seeds -1", ft("--tasks", "rte", "--seeds", "-1"), needle="seed"),
    Case("N27", "finetune --epochs 0", ft("--tasks", "rte", "--epochs", "0"), needle="epochs"),
    Case("N28", "finetune --max-steps -5", ft("--tasks", "rte", "--max-steps", "-5"), needle="--max-steps -5"),
    Case("N29", "finetune --max-seq-len 2", ft("--tasks", "rte", "--max-seq-len", "2"), needle="--max-seq-len 2"),
    Case("N30", "finetune --batch-size -3", ft("--tasks", "rte", "--batch-size", "-3"), needle="--batch-size -3"),
    Case("N31", "finetune --data-dir is a file", ft("--tasks", "rte", "--data-dir", "{T}/existing_file.txt"),
         needle="existing_file.txt", intact=("existing_file.txt",)),
    Case("N32", "STS-B score 'abc'", ft("--tasks", "stsb", "--data-dir", "{T}/gd_stsb_abc"), needle="abc"),
    Case("N33", "STS-B score 7.5 (scale is 0-5)", ft("--tasks", "stsb", "--data-dir", "{T}/gd_stsb_range"), needle="7.5"),
    Case("N34", "CoNLL train.txt empty", ft("--tasks", "conll2003", "--data-dir", "{T}/cd_empty"), needle="train.txt"),
    Case("N35", "CoNLL train.txt only -DOCSTART-", ft("--tasks", "conll2003", "--data-dir", "{T}/cd_docstart"),
         needle="train.txt"),
    Case("N36", "SQuAD JSON without 'data'", ft("--tasks", "squad_v1_devsplit", "--data-dir", "{T}/sq_nodata"),
         needle="data"),
    Case("N37", "SQuAD answer outside its context", ft("--tasks", "squad_v1_devsplit", "--data-dir", "{T}/sq_badans"),
         needle="answer"),
    Case("N38", "GLUE TSV with CRLF line ends", ft("--tasks", "rte", "--data-dir", "{T}/gd_crlf"), expect="ok",
         check=_one_record),
    Case("N39", "GLUE TSV with a byte-order mark", ft("--tasks", "rte", "--data-dir", "{T}/gd_bom"), expect="ok",
         check=_one_record),
    Case("N40", "record that is a JSON list", ("report", "{T}/rec_list"), needle="record.json"),
    Case("N41", "report --csv onto a folder", ("report", "{T}/f00", "--csv", "{T}/emptydir"), needle="emptydir"),
    Case("N42", "report --embed with two marker pairs", ("report", "{T}/f00", "--embed", "{T}/twomarkers.md"),
         needle="markers", intact=("twomarkers.md",)),
    Case("N43", "model_config.json hidden size -8", ft("--model", "{T}/ck_negcfg", "--tasks", "rte"),
         needle="model_config.json"),
    Case("N44", "model_config.json unknown key", ft("--model", "{T}/ck_keycfg", "--tasks", "rte"),
         needle="model_config.json"),
    Case("N45", "weights of another shape", ft("--model", "{T}/ck_shape", "--tasks", "rte"), needle="ck_shape"),
    Case("N46", "preset with an unknown top-level key", ("run", "--preset", "{T}/unknown_top.yaml", "--validate"),
         needle="unknown_top.yaml"),
    Case("N47", "empty preset file", ("run", "--preset", "{T}/empty.yaml", "--validate"), needle="empty.yaml"),
    Case("N48", "data inspect of a broken JSONL", ("data", "inspect", "--corpus", "{T}/bad.jsonl"), needle="bad.jsonl:2"),
    Case("N49", "convert --to-hf of NaN weights", ("convert", "--to-hf", "{T}/p35", "--out", "{OUT}"), needle="NaN/inf"),
    Case("N50", "random init with a repeated-token vocab", ft("--model", "random:tiny", "--tokenizer", "{T}/dup_vocab.txt",
                                                               "--tasks", "rte"), needle="dup_vocab.txt"),
    Case("N51", "--resume auto on a finished run: nothing to do", pt("--out", "{T}/base", "--max-steps", "5", "--resume",
                                                                        "auto"),
         expect="ok", check=lambda T, out: None, intact=("base/checkpoint/model.safetensors", "base/summary.json")),
    Case("N52", "pretrain into a finished run without --resume", pt("--out", "{T}/base", "--max-steps", "5"),
         needle="base", intact=("base/checkpoint/model.safetensors",)),
    Case("N53", "--resume auto on a finished run with another lr", pt("--out", "{T}/base", "--max-steps", "5", "--resume",
                                                                      "auto", "--lr", "0.5"),
         needle="optim.lr", intact=("base/checkpoint/model.safetensors", "base/summary.json")),
    Case("N54", "preset variant with max_seq_len 2", ("run", "--preset", "{T}/shortseq.yaml", "--validate"),
         needle="shortseq.yaml"),
    Case("N55", "finetune --model random:tiny --max-seq-len 4096 (beyond 512 positions)",
         ft("--model", "random:tiny", "--tokenizer", "{DATA}/vocab/bert-base-uncased-vocab.txt", "--tasks", "rte",
            "--max-seq-len", "4096"), expect="ok", check=_one_record),
    Case("N56", "--vocab-size below the corpus's alphabet", pt("--vocab-size", "100"), needle="tokenizer_vocab_size 100"),
    Case("N57", "--devices two", pt("--devices", "two"), needle="devices 'two'"),
    Case("N58", "--doc-sentences -1", pt("--doc-sentences", "-1"), needle="doc_sentences -1"),
    Case("N59", "finetune --tasks-dir that does not exist", ft("--tasks", "rte", "--tasks-dir", "{T}/no_tasks_here"),
         needle="no_tasks_here"),
    Case("N60", "--accelerator bogus", pt("--accelerator", "bogus"), needle="--accelerator bogus"),
    Case("N61", "--strategy bogus", pt("--strategy", "bogus"), needle="--strategy bogus"),
    Case("N62", "--set with a value that is not YAML", pt("--set", "optim.betas=[0.9"), needle="not valid YAML"),
]

# Fault runs (F1-F11 of the report): real kills and signals, in tests that already exist.
FAULT_TESTS: dict[str, tuple[str, str]] = {
    "F1": ("kill -9 after step 2 (checkpoint at 1), then --resume auto",
           "tests/test_resume_faults.py::test_kill_9_anywhere_then_resume_is_bit_identical"),
    "F2": ("kill -9 during a checkpoint write", "tests/test_resume_faults.py::test_kill_9_anywhere_then_resume_is_bit_identical"),
    "F3": ("kill -9 after the last checkpoint, before summary.json",
           "tests/test_resume_faults.py::test_kill_9_anywhere_then_resume_is_bit_identical"),
    "F4": ("run --preset smoke killed mid pre-training, rerun: same records as an uninterrupted run",
           "tests/test_run_preset.py::test_smoke_preset_end_to_end_and_rerun_skips"),
    "F5": ("run --preset smoke killed after the final checkpoint, rerun (the preset resumes through pretrain "
           "--resume auto, killed there after its last checkpoint)",
           "tests/test_resume_faults.py::test_kill_9_anywhere_then_resume_is_bit_identical"),
    "F6": ("run --preset smoke killed during fine-tuning, rerun (no fault point in fine-tuning: not re-run)", ""),
    "F7": ("two pre-trainings into one --out", "tests/test_run_safety.py::test_run_folder_lock_refuses_a_second_process"),
    "F8": ("disk full during a checkpoint", "tests/test_reliability.py::test_full_disk_keeps_the_last_good_checkpoint"),
    "F9": ("disk full during a report", "tests/test_reliability.py::test_full_disk_keeps_the_last_good_checkpoint"),
    "F10": ("SIGTERM after step 2",
            "tests/test_resume_faults.py::test_sigterm_and_ctrl_c_checkpoint_at_the_next_step_and_resume_exactly"),
    "F11": ("SIGINT after step 2",
            "tests/test_resume_faults.py::test_sigterm_and_ctrl_c_checkpoint_at_the_next_step_and_resume_exactly"),
    "F12": ("kill -9 of a study's worker mid-stage (run --workers 2): one line naming the stage and the signal",
            "tests/test_studies.py::test_a_killed_worker_is_one_line_naming_the_stage_and_the_signal"),
    "F13": ("kill -9 of an idle worker while a stage runs alone in the main process: one line naming it, exit 1",
            "tests/test_studies.py::test_an_idle_worker_killed_while_a_stage_runs_alone_ends_the_study_in_one_line"),
    "det": ("two runs of one config and seed, tokenizer trained",
            "tests/test_tokenizer.py tests/test_run_preset.py"),
    "46": ("--devices 4 on CPU: global tokens_seen", "tests/test_pretrain_ddp.py"),
}


# ---- the scratch folder every case reads --------------------------------------------------------------------

def expand(argv, T: Path, data: Path, out: Path) -> list[str]:
    return [a.replace("{T}", str(T)).replace("{DATA}", str(data)).replace("{OUT}", str(out)) for a in argv]


def build_scratch(T: Path, data: Path, cli: Callable[[list[str]], None]) -> None:
    """Every damaged file the cases read, made from a few lines of the shared data; `cli(argv)` runs bertbench
    (for the base checkpoint, a fine-tuning record and an HF export)."""
    T.mkdir(parents=True, exist_ok=True)
    w = lambda name, text: _write(T / name, text)  # noqa: E731
    w("empty.txt", "")
    w("one.txt", "Only one sentence lives here.\n")
    (T / "binary.txt").write_bytes(os.urandom(20_000).replace(b"\n", b"\xff"))
    (T / "binary.bin").write_bytes(os.urandom(2_000))
    (T / "latin1.txt").write_bytes("Caf\xe9 cr\xe8me. Na\xefve d\xe9j\xe0 vu.\n".encode("latin-1") * 20)
    w("notext/a.csv", "a,b\n1,2\n")
    (T / "notext" / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    w("bad.jsonl", '{"text": "A first document. It has two sentences."}\n{"text": \n')
    w("empties/a.txt", "")
    w("empties/b.txt", "")
    w("notobj.jsonl", "[1, 2]\n")
    w("notext.jsonl", '{"title": "no text here"}\n')
    w("numtext.jsonl", '{"text": 5}\n')
    w("existing_file.txt", "keep me\n")
    (T / "ro").mkdir(exist_ok=True)
    os.chmod(T / "ro", 0o555)
    w("mynotes.md", "# my notes\n\nhand-written, never to be replaced\n")
    pair = "<!-- bertbench report: begin report -->\n<!-- bertbench report: end report -->\n"
    w("twomarkers.md", pair + "between\n" + pair)
    (T / "emptydir").mkdir(exist_ok=True)

    tiny = (ROOT / "recipes" / "tiny-debug.yaml").read_text()
    w("unknown_key.yaml", tiny + "bogus_key: 3\n")
    w("wrong_type.yaml", tiny.replace("batch_size: 16", "batch_size: sixteen"))
    w("wrong_type2.yaml", tiny.replace("max_seq_len: 64", "max_seq_len: [64]"))
    w("badyaml.yaml", "model_size: tiny\ndata: [\n")
    w("data_scalar.yaml", "model_size: tiny\ndata: 5\n")
    w("lr_str.yaml", "model_size: tiny\noptim:\n  lr: fast\n")
    w("empty.yaml", "")
    w("list.yaml", "- model_size: tiny\n")
    smoke = (ROOT / "recipes" / "presets" / "smoke.yaml").read_text()
    w("dup.yaml", smoke.replace("- {name: ltr, pretrain: {objective: clm}}", "- {name: mlm_nsp}"))
    w("badobj.yaml", smoke.replace("{objective: clm}", "{objective: gpt}"))
    w("unknown_top.yaml", smoke + "bogus_top: 1\n")
    w("shortseq.yaml", smoke.replace("{objective: clm}", "{objective: clm, data: {max_seq_len: 2}}"))

    vocab = (data / "vocab" / "bert-base-uncased-vocab.txt").read_text().splitlines()
    w("empty_vocab.txt", "")
    w("dup_vocab.txt", "\n".join(vocab[:2000] + vocab[1990:2000]) + "\n")
    (T / "binary_vocab.txt").write_bytes(os.urandom(4_000))

    _glue_copies(T, data)
    _conll_copies(T, data)
    _squad_copies(T, data)

    # A 5-step tiny pre-training, its damaged copies, a record and an HF export.
    cli(expand(pt("--max-steps", "5", "--out", "{T}/base"), T, data, T / "unused"))
    ck = T / "base" / "checkpoint"
    for name in ("ck_trunc", "ck_hdr", "ck_ff", "ck_badcfg", "ck_novocab", "ck_victim", "ck_negcfg", "ck_keycfg",
                 "ck_shape", "p35"):
        shutil.copytree(ck, T / name, dirs_exist_ok=True)
    weights = ck / "model.safetensors"
    blob = weights.read_bytes()
    (T / "ck_trunc" / "model.safetensors").write_bytes(blob[: len(blob) // 2])
    (T / "ck_hdr" / "model.safetensors").write_bytes(b"\xff" * 14 + blob[14:])
    data_start = 8 + struct.unpack("<Q", blob[:8])[0]
    (T / "ck_ff" / "model.safetensors").write_bytes(blob[:data_start + 1024] + b"\xff" * 65536 + blob[data_start + 1024 + 65536:])
    _nan_weights(weights, T / "p35" / "model.safetensors")
    cfg_text = (ck / "model_config.json").read_text()
    (T / "ck_badcfg" / "model_config.json").write_text(cfg_text[: len(cfg_text) // 2])
    for f in ("vocab.txt", "tokenizer.json"):
        (T / "ck_novocab" / f).unlink(missing_ok=True)
    cfg = json.loads(cfg_text)
    (T / "ck_negcfg" / "model_config.json").write_text(json.dumps({**cfg, "hidden_size": -8}))
    (T / "ck_keycfg" / "model_config.json").write_text(json.dumps({**cfg, "bogus": 1}))
    (T / "ck_shape" / "model_config.json").write_text(json.dumps({**cfg, "intermediate_size": cfg["intermediate_size"] * 2}))

    cli(expand(ft("--tasks", "rte", "--out", "{T}/f00"), T, data, T / "unused"))
    record = next((T / "f00").rglob("*.record.json"))
    rel = record.relative_to(T / "f00")
    good = record.read_text()
    shutil.copytree(T / "f00", T / "f00_copy")
    for name, text in [("rec_trunc", good[: len(good) // 2]),
                       ("rec_high", _edit_record(good, lambda r: r["metrics"].update(accuracy="high"))),
                       ("rec_notask", _edit_record(good, lambda r: r.pop("task"))),
                       ("rec_nan", good.replace(json.dumps(json.loads(good)["metrics"]["accuracy"]), "NaN", 1)),
                       ("rec_list", "[1, 2, 3]\n")]:
        _write(T / name / rel, text)

    cli(expand(("convert", "--to-hf", "{T}/base/checkpoint", "--out", "{T}/hf45"), T, data, T / "unused"))
    for name in ("hf_noconf", "hf_badconf"):
        shutil.copytree(T / "hf45", T / name)
    (T / "hf_noconf" / "config.json").unlink()
    conf = (T / "hf45" / "config.json").read_text()
    (T / "hf_badconf" / "config.json").write_text(conf[: len(conf) // 2])


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _edit_record(text: str, edit) -> str:
    record = json.loads(text)
    edit(record)
    return json.dumps(record, indent=2)


def _nan_weights(src: Path, dst: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = {k: v.clone().fill_(float("nan")) if v.is_floating_point() else v for k, v in load_file(src).items()}
    save_file(tensors, dst)


def _glue_copies(T: Path, data: Path) -> None:
    rte = data / "glue" / "RTE"
    train = (rte / "train.tsv").read_text().splitlines(keepends=True)[:41]
    dev = (rte / "dev.tsv").read_text().splitlines(keepends=True)[:33]

    def copy(name: str, train_lines, dev_lines=dev, task="RTE", mode="w") -> None:
        _write(T / name / "glue" / task / "train.tsv", "".join(train_lines))
        _write(T / name / "glue" / task / "dev.tsv", "".join(dev_lines))

    copy("gd_trunc", train[:-1] + [train[-1][: len(train[-1]) // 3]])
    copy("gd_nocol", ["\t".join(c for i, c in enumerate(line.rstrip("\n").split("\t")) if i != 2) + "\n" for line in train])
    copy("gd_short", train[:4] + ["\t".join(train[4].split("\t")[:3]) + "\n"] + train[5:])
    copy("gd_label", train[:2] + [train[2].rsplit("\t", 1)[0] + "\tmaybe\n"] + train[3:])
    copy("gd_devlabel", train, dev[:2] + [dev[2].rsplit("\t", 1)[0] + "\tmaybe\n"] + dev[3:])
    copy("gd_empty", [])
    copy("gd_hdr", train[:1])
    copy("gd_crlf", [line.replace("\n", "\r\n") for line in train], [line.replace("\n", "\r\n") for line in dev])
    copy("gd_bom", ["\ufeff" + train[0]] + train[1:], ["\ufeff" + dev[0]] + dev[1:])
    sts = data / "glue" / "STS-B"
    sts_train = (sts / "train.tsv").read_text().splitlines(keepends=True)[:41]
    sts_dev = (sts / "dev.tsv").read_text().splitlines(keepends=True)[:33]
    copy("gd_stsb_abc", sts_train[:3] + [sts_train[3].rsplit("\t", 1)[0] + "\tabc\n"] + sts_train[4:], sts_dev, task="STS-B")
    copy("gd_stsb_range", sts_train[:3] + [sts_train[3].rsplit("\t", 1)[0] + "\t7.5\n"] + sts_train[4:], sts_dev,
         task="STS-B")


def _conll_copies(T: Path, data: Path) -> None:
    src = data / "conll2003"
    train = (src / "train.txt").read_text().splitlines(keepends=True)[:200]
    small = {f: "".join((src / f).read_text().splitlines(keepends=True)[:200]) for f in ("valid.txt", "test.txt")}

    def copy(name: str, train_lines) -> None:
        _write(T / name / "conll2003" / "train.txt", "".join(train_lines))
        for f, text in small.items():
            _write(T / name / "conll2003" / f, text)

    copy("cd_3col", train[:9] + [" ".join(train[9].split()[:3]) + "\n"] + train[10:])
    copy("cd_5col", train[:10] + [train[10].rstrip("\n") + " X\n"] + train[11:])
    copy("cd_tag", train[:10] + [train[10].rsplit(" ", 1)[0] + " B-FOO\n"] + train[11:])
    copy("cd_empty", [])
    copy("cd_docstart", ["-DOCSTART- -X- O O\n", "\n"])


def _squad_copies(T: Path, data: Path) -> None:
    text = (data / "squad" / "dev-v1.1.json").read_text()
    _write(T / "sq_cut" / "squad" / "dev-v1.1.json", text[: len(text) // 2])
    full = json.loads(text)
    _write(T / "sq_nodata" / "squad" / "dev-v1.1.json", json.dumps({"version": "1.1"}))
    small = {"version": "1.1", "data": [full["data"][0]]}
    answer = small["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]
    answer["answer_start"] = 10 ** 6
    _write(T / "sq_badans" / "squad" / "dev-v1.1.json", json.dumps(small))


# ---- running a case and judging what happened -------------------------------------------------------------

CATEGORIES = ("CLEAR", "OK", "TRACEBACK", "SILENT-WRONG", "HANG", "DATA-LOSS", "UNCLEAR", "NOT RE-RUN")


@dataclass
class Outcome:
    rc: int
    output: str            # stdout and stderr together
    traceback: bool
    timed_out: bool = False


def case_env(T: Path) -> dict[str, str]:
    return {"BERTBENCH_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "BERTBENCH_CACHE_DIR": str(T / "cache")}


def run_subprocess(argv: list[str], T: Path, code: Path = ROOT, env: Optional[dict] = None, timeout: float = 300,
                   launcher: tuple[str, ...] = ()) -> Outcome:
    """`python -m bertbench.cli argv` on the checkout `code`; `launcher` goes before the interpreter (setpriv …)."""
    import subprocess
    import sys

    full_env = {**os.environ, **case_env(T), "PYTHONPATH": str(code), **(env or {})}
    try:
        r = subprocess.run([*launcher, sys.executable, "-m", "bertbench.cli", *argv], cwd=code, env=full_env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Outcome(124, out, False, timed_out=True)
    return Outcome(r.returncode, r.stdout + r.stderr, "Traceback (most recent call last)" in r.stderr)


def run_pre(case: Case, T: Path, data: Path, code: Path = ROOT) -> None:
    """A case's earlier commands (a run killed at a step, say), as subprocesses: they may kill themselves."""
    for argv, env in case.pre:
        env = {k: v.replace("{T}", str(T)) for k, v in env.items()}
        truncate = env.pop("RELIABILITY_TRUNCATE", None)
        run_subprocess(expand(argv, T, data, T / "unused"), T, code, env)
        if truncate:
            blob = Path(truncate).read_bytes()
            Path(truncate).write_bytes(blob[: len(blob) // 2])


def snapshot(case: Case, T: Path) -> dict[str, Optional[bytes]]:
    return {name: (T / name).read_bytes() if (T / name).is_file() else None for name in case.intact}


def judge(case: Case, outcome: Outcome, T: Path, out: Path, before: dict) -> tuple[str, str]:
    """(category, the line that matters): the report's categories, decided the same way for every case."""
    lines = [line.strip() for line in outcome.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    first = errors[0] if errors else (lines[-1] if lines else "")
    if outcome.timed_out:
        return "HANG", "killed by timeout"
    if outcome.traceback:
        return "TRACEBACK", lines[-1] if lines else ""
    if snapshot(case, T) != before:
        return "DATA-LOSS", f"{', '.join(case.intact)} changed"
    if outcome.rc != 0:
        return ("CLEAR", first) if len(errors) == 1 else ("UNCLEAR", first)
    if case.expect == "ok":
        try:
            complaint = case.check(T, out) if case.check else None
        except (OSError, ValueError, KeyError) as e:
            complaint = f"{type(e).__name__}: {e}"
        return ("OK", first) if complaint is None else ("SILENT-WRONG", complaint)
    return "SILENT-WRONG", f"exit 0: {first}"


def meets(case: Case, category: str, line: str) -> bool:
    if case.expect == "ok":
        return category == "OK"
    return category == "CLEAR" and case.needle.lower() in line.lower()
