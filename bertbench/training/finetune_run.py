"""`bertbench finetune` end to end: model source → tasks → features → train (seeds × lr grid) → decode →
metrics → predictions file + one result record per (task, seed, setting).

The per-type differences are small functions keyed by the task's `type` field (never its name).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import time
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from bertbench.config import PAPER_DROPOUT
from bertbench.errors import BertbenchError
from bertbench.paths import BERT_VOCAB, DATA_DIR_VARIABLE
from bertbench.runtime.hub import hub_unreachable
from bertbench.runtime.progress import fmt_lr
from bertbench.training.finetune_settings import FinetuneRequest, default_lrs

# ----------------------------------------------------------------------------------------------
# Model sources


@dataclass
class ModelSource:
    """What every fine-tuning run of one model starts from."""

    source: str
    tokenizer: Any
    config: Any  # ModelConfig
    state: Optional[dict]  # encoder weights; None for random init
    fingerprint: str
    pretraining: Optional[dict]
    # the seed of the pre-training that made the weights (its config's `seed`); None for random init and for a
    # model whose pre-training seed we do not know (an imported Hugging Face BERT)
    pretrain_seed: Optional[int] = None
    # a model bertbench did not pre-train: the folder's own facts (model.external.external_facts); its
    # `pretraining` is None, as nothing is known of how it was trained
    external: Optional[dict] = None
    # a Hugging Face encoder that is not a BERT (model.hf_encoder.GenericEncoder): it builds the backbone itself
    generic: Optional[Any] = None

    def backbone(self, seed: int):
        import torch

        if self.generic is not None:
            return self.generic.backbone(seed)

        from bertbench.model.checkpoint import fit_nsp_weights
        from bertbench.model.bert import BertForPreTraining

        torch.manual_seed(seed)  # random:<size>: each seed is its own initialisation
        model = BertForPreTraining(self.config, nsp=False)  # the encoder is what fine-tunes; an NSP head is not needed
        if self.state is not None:
            model.load_state_dict(fit_nsp_weights(self.state, nsp=False))
        return model.bert


def resolve_model_source(spec: str, tokenizer: Optional[str], data_dir: Path) -> ModelSource:
    from bertbench.model.checkpoint import fingerprint_checkpoint, load_checkpoint
    from bertbench.config import ModelConfig
    from bertbench.model.tokenizer import WordPieceTokenizer

    if spec.startswith("random:"):
        size = spec.split(":", 1)[1]
        tok_path = Path(tokenizer) if tokenizer else data_dir / BERT_VOCAB
        tok = WordPieceTokenizer.load(tok_path)
        cfg = ModelConfig.from_size(size, vocab_size=tok.vocab_size)
        return ModelSource(spec, tok, cfg, None, f"random:{size}:vocab{tok.vocab_size}", None)
    from bertbench.model.hf_encoder import HUB_PREFIX, hub_folder, is_generic_folder

    path = hub_folder(spec) if spec.startswith(HUB_PREFIX) else Path(spec)
    if not path.exists():
        raise BertbenchError(f"--model {spec}: not found (a bertbench checkpoint folder, a Hugging Face folder, "
                             "hub:NAME, or random:<size>)")
    if path.is_dir() and (path / "checkpoint" / "model_config.json").is_file():
        path = path / "checkpoint"  # a pre-training run directory: use its checkpoint
    if is_generic_folder(path):  # RoBERTa, ELECTRA, DeBERTa, …: transformers' own model under our heads
        return _generic_source(path, spec, tokenizer, data_dir)
    ckpt = load_checkpoint(path)
    if tokenizer:
        ckpt.tokenizer = WordPieceTokenizer.load(Path(tokenizer))
        if ckpt.tokenizer.vocab_size != ckpt.config.vocab_size:
            raise BertbenchError(f"--tokenizer {tokenizer}: {ckpt.tokenizer.vocab_size} tokens, the model has {ckpt.config.vocab_size}")
    state = {k: v.clone() for k, v in ckpt.model.state_dict().items()}
    # the paper's fine-tuning dropout whatever the pre-training used (a recipe may pre-train without any)
    cfg = dataclasses.replace(ckpt.config, dropout=PAPER_DROPOUT, attention_dropout=PAPER_DROPOUT)
    if ckpt.summary is None:  # not pre-trained by bertbench (an HF folder, an import): its own facts, no defaults
        from bertbench.model.external import external_facts
        from bertbench.paths import portable_folder

        facts = external_facts(path, spec, ckpt.config, ckpt.run_config, data_dir, tokenizer_kind="WordPiece")
        return ModelSource(portable_folder(spec, data_dir), ckpt.tokenizer, cfg, state, fingerprint_checkpoint(path),
                           None, None, facts)
    pre = ckpt.summary.pretraining_info()  # (read by results.read_summary, which refuses an older form in one line)
    seed = ckpt.run_config.get("seed") if isinstance(ckpt.run_config, dict) else None
    return ModelSource(str(path), ckpt.tokenizer, cfg, state, fingerprint_checkpoint(path), pre,
                       seed if isinstance(seed, int) and not isinstance(seed, bool) else None)


def _generic_source(path: Path, spec: str, tokenizer: Optional[str], data_dir: Path) -> ModelSource:
    """A non-BERT HF folder: its own model and fast tokenizer (model.hf_encoder), its own facts in the record."""
    from bertbench.model.checkpoint import fingerprint_checkpoint
    from bertbench.model.external import external_facts
    from bertbench.model.hf_encoder import load_generic
    from bertbench.paths import portable_folder

    if tokenizer:
        raise BertbenchError(f"--tokenizer {tokenizer}: a Hugging Face encoder uses the tokenizer saved in its folder ({spec})")
    generic = load_generic(path)
    facts = external_facts(path, spec, generic.config, None, data_dir, tokenizer_kind=generic.tokenizer.kind)
    return ModelSource(portable_folder(spec, data_dir), generic.tokenizer, generic.config, None,
                       fingerprint_checkpoint(path), None, None, facts, generic)


# ----------------------------------------------------------------------------------------------
# Per-type scoring and predictions files


# What `Scored.degenerate` means for each task type, as a run's line says it: a regression predicts values, not
# classes (issue 40: "one class" was printed for STS-B).
DEGENERATE_TEXT = {
    "classification": "one class for every example",
    "multiple_choice": "one choice for every example",
    "regression": "constant prediction: one value for every example",
    "span_qa": "one answer for every question",
    "token_classification": "no entity in any sentence",
}


def degenerate_flag(task_type: str) -> str:
    """The mark after a degenerate run's score, e.g. '  [degenerate: constant prediction: one value for every example]'."""
    return f"  [degenerate: {DEGENERATE_TEXT.get(task_type, 'one prediction for every example')}]"


@dataclass
class Scored:
    metrics: dict[str, Optional[float]]
    predictions_text: dict[str, str]  # file name suffix → content
    degenerate: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def near_constant(self) -> bool:
        """One label (one value) for >= 95% of the examples, or for all of them: what selection ranks last."""
        return self.degenerate or bool(self.extra.get("near_constant"))


def score(task, examples, features, outputs) -> Scored:
    """Turn raw eval outputs into the paper's metrics and a predictions file in the task's own format."""
    from bertbench import metrics as M

    t = task.type
    if t in ("classification", "multiple_choice", "regression"):
        by_example = {f["example_index"]: o for f, o in zip(features, outputs)}
        outs = [by_example[i] for i in range(len(examples))]
        gold = [ex.label for ex in examples]
        if t == "regression":
            preds = [float(np.asarray(o).reshape(-1)[0]) for o in outs]
            degenerate = float(np.std(preds)) < 1e-6
            shown = [f"{p:.4f}" for p in preds]
            gold_shown = [f"{g:.4f}" for g in gold]
        else:
            preds = [int(np.argmax(o)) for o in outs]
            degenerate = len(set(preds)) == 1
            names = task.labels if t == "classification" else None
            shown = [names[p] if names else str(p) for p in preds]
            gold_shown = [names[g] if names else str(g) for g in gold]
        metrics = M.compute(task.metrics, preds, gold)
        buf = io.StringIO()
        w = csv.writer(buf, delimiter="\t", lineterminator="\n")
        w.writerow(["index", "id", "gold", "prediction"])
        w.writerows([i, ex.id, g, p] for i, (ex, g, p) in enumerate(zip(examples, gold_shown, shown)))
        extra = per_example_extra(t, preds, gold)
        return Scored(metrics, {"predictions.tsv": buf.getvalue()}, degenerate, extra)
    if t == "span_qa":
        from bertbench.data.features import decode_qa

        h = task.hparams
        is_v2 = any(m.startswith("squad_v2") for m in task.metrics)
        dec = decode_qa(examples, features, [o[:, 0] for o in outputs], [o[:, 1] for o in outputs],
                        max_answer_len=h.max_answer_len or 30, n_best=h.n_best or 20, version_2=is_v2, null_threshold=0.0)
        refs = {ex.id: ([a.text for a in ex.answers] or [""]) if not ex.is_impossible else [""] for ex in examples}
        files = {"predictions.json": json.dumps(dec.predictions, indent=1, sort_keys=True, ensure_ascii=False) + "\n"}
        if is_v2:
            # τ = 0 as decoded; the official sweep over the null odds gives the best τ on this split
            scores = M.squad_v2_scores(dec.best_non_null, refs, no_answer_probs=dec.null_odds, threshold=0.0)
            metrics = {"squad_v2_em": scores["exact"], "squad_v2_f1": scores["f1"]}
            metrics.update({k: scores[k] for k in ("best_exact", "best_f1", "best_f1_thresh", "HasAns_f1", "NoAns_f1",
                                                   "HasAns_exact", "NoAns_exact") if k in scores})
            files["null_odds.json"] = json.dumps(dec.null_odds, indent=1, sort_keys=True) + "\n"
            extra = {}  # SQuAD v2.0 keeps no per-question scores yet: its intervals resample seeds only
        else:
            metrics = M.compute(task.metrics, dec.predictions, refs)
            extra = {"example_stats": squad_example_stats(M.squad_v1_per_question(dec.predictions, refs))}
        degenerate = len(set(dec.predictions.values())) <= 1
        extra["near_constant"] = M.near_constant(list(dec.predictions.values()))
        return Scored(metrics, files, degenerate, extra)
    if t == "token_classification":
        from bertbench.data.features import decode_tokens

        pred_tags = decode_tokens(examples, features, [np.argmax(o, -1) for o in outputs], task.labels)
        gold = [ex.tags for ex in examples]
        metrics = M.compute(task.metrics, pred_tags, gold)
        lines = []
        for ex, p in zip(examples, pred_tags):
            lines.extend(f"{w} {g} {q}" for w, g, q in zip(ex.words, ex.tags, p))
            lines.append("")
        degenerate = all(tag == "O" for seq in pred_tags for tag in seq)
        counts = " ".join(f"{tp},{p},{g}" for tp, p, g in M.entity_counts(pred_tags, gold))
        return Scored(metrics, {"predictions.conll": "\n".join(lines) + "\n"}, degenerate,
                      {"example_stats": {"seqeval_f1": counts}})
    raise BertbenchError(f"task {task.name}: no scoring for type {t!r}")


def squad_example_stats(per_question: dict[str, tuple[float, float]]) -> dict[str, str]:
    """SQuAD v1.1's per-question exact match and F1 (in [0, 1], six significant digits, eval order): what the
    report's multi-bootstrap resamples questions from."""
    return {"squad_em": " ".join(f"{em:.6g}" for em, _ in per_question.values()),
            "squad_f1": " ".join(f"{f1:.6g}" for _, f1 in per_question.values())}


def per_example_extra(task_type: str, preds: list, gold: list) -> dict[str, Any]:
    """What the report's multi-bootstrap joins on, in eval order: every example's prediction and gold (labels
    as one digit each, values to six significant digits), and whether the cell is near-constant. Compact: a string."""
    from bertbench.metrics import near_constant

    if task_type == "regression":  # six significant digits: a weak model's values differ in the fourth
        return {"example_predictions": " ".join(f"{p:.6g}" for p in preds),
                "example_gold": " ".join(f"{g:.6g}" for g in gold),
                "near_constant": near_constant([f"{p:.2f}" for p in preds])}  # one value at the scale's 0.01
    extra: dict[str, Any] = {"near_constant": near_constant(preds)}
    if max(max(preds, default=0), max(gold, default=0)) < 10:  # one digit a label (every task here has < 10)
        extra["example_predictions"] = "".join(str(p) for p in preds)
        extra["example_gold"] = "".join(str(g) for g in gold)
    return extra


# ----------------------------------------------------------------------------------------------
# The run


def _subsample(items: list, n: Optional[int], seed: int = 0) -> list:
    """The first n of a fixed shuffle: the same subset for every model and seed, so rows compare."""
    if n is None or n >= len(items):
        return items
    idx = np.sort(np.random.default_rng(seed).permutation(len(items))[:n])
    return [items[i] for i in idx]


def _task_data_available(task, data_dir: Path, source: str) -> Optional[str]:
    """None when the task can run; else one line saying why not and which file was looked for."""
    missing = task.missing_local_files(data_dir)
    if not missing:
        return None
    looked = f"no local data (looked for {', '.join(str(m) for m in missing)})"
    offline = os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1"
    if source == "local" or task.hub is None or (source == "auto" and offline):
        return looked
    if source == "auto" and (unreachable := hub_unreachable()):  # not the hub client's ~25 s of retries a task
        return f"{looked}, and the hub is out of reach ({unreachable})"
    return None


def _devsplit_hint(name: str, tasks: dict, selected: list[str], data_dir: Path, source: str) -> str:
    """For a task skipped for want of data: its devsplit variant, when that one can run and was not asked for
    (`--tasks glue` is the official tasks only, so QNLI without its train file named no way forward)."""
    variant = tasks.get(f"{name}_devsplit")
    if variant is None or variant.name in selected or _task_data_available(variant, data_dir, source):
        return ""
    return f"; {variant.name} (trained and evaluated on a split of the dev file) can run: add it to --tasks"


def run_finetune(req: FinetuneRequest, echo: Callable[[str], None] = print) -> list[Path]:
    import torch

    from bertbench.paths import default_data_dir
    from bertbench.runtime.provenance import resolve_precision
    from bertbench.runtime.run_dir import prepare_run_dir
    from bertbench.tasks import resolve_task_names, task_registry

    data_dir = Path(req.data_dir) if req.data_dir else default_data_dir()
    given = (f"--data-dir {data_dir}" if req.data_dir else
             f"{DATA_DIR_VARIABLE}={data_dir}" if os.environ.get(DATA_DIR_VARIABLE) else "")
    if given and not data_dir.is_dir():  # else every task is skipped as "no local data" and the cause is lost
        raise BertbenchError(f"{given}: {'a file, not a folder' if data_dir.exists() else 'no such folder'}")
    names = resolve_task_names(req.tasks, req.tasks_dir)  # a bad task file fails here only when it is asked for
    tasks = task_registry(req.tasks_dir).tasks
    source = resolve_model_source(req.model, req.tokenizer, data_dir)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    precision = resolve_precision(req.precision, device.type)
    if precision not in ("bf16-mixed", "32-true"):  # the loop has autocast for bf16 and no fp16 grad scaler
        raise BertbenchError(f"--precision {req.precision}: fine-tuning runs bf16-mixed, 32-true or auto")
    out = Path(req.out)
    if not req.append:
        _check_one_model(out, source)
    made_out = not out.exists()
    prepare_run_dir(out)  # a file, an unwritable folder: said now, not after the training
    try:
        return _run_tasks(req, names, tasks, source, data_dir, device, precision, out, echo)
    except BaseException:
        if made_out and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a run that wrote nothing leaves no empty folder behind (records are written whole)
        raise


def _run_tasks(req: FinetuneRequest, names: list[str], tasks: dict, source: ModelSource, data_dir: Path, device,
               precision: str, out: Path, echo: Callable[[str], None]) -> list[Path]:
    """Each asked-for task in turn: its lr grid and seeds trained, the selection made, the records written."""
    from bertbench.training.selection import select_lr

    written: list[Path] = []
    ran = 0
    for name in names:
        task = tasks[name]
        why = _task_data_available(task, data_dir, req.source)
        if why:
            echo(f"skip {name}: {why}{_devsplit_hint(name, tasks, names, data_dir, req.source)}")
            continue
        if req.feature_based and task.type != "token_classification":
            echo(f"skip {name}: feature-based fine-tuning is for token classification (NER)")
            continue
        t_task = time.perf_counter()
        job = _prepare_task(req, task, source, data_dir, device, precision, several_tasks=len(names) > 1, echo=echo)
        if job is None:
            continue
        runs, selection_scores, near_constant = _train_grid(job, echo)
        best = select_lr(selection_scores, _higher_is_better(task), near_constant)
        paths, selection = _write_records(job, out, runs, selection_scores, near_constant, best)
        written += paths
        ran += 1
        chosen = f" selected on {selection['on']}" if selection else ""
        at = f", epoch {best[1]}" if req.select_epoch else ""
        echo(f"{task.name}: done in {time.perf_counter() - t_task:.0f} s (lr {fmt_lr(best[0])}{at}{chosen})")
    if ran == 0:
        raise BertbenchError(f"no task ran (asked for: {req.tasks}); see the skip lines above")
    return written


def _check_one_model(out: Path, source: ModelSource) -> None:
    """An --out folder is one model's: records of another model (another checkpoint fingerprint) under it are
    refused in one line naming both, before anything trains. Mixed in, they would be averaged or judged as one
    study's (`--append` says it is meant)."""
    from bertbench.results import RECORD_SUFFIX

    if not out.is_dir():
        return
    for path in sorted(out.rglob(f"*{RECORD_SUFFIX}")):
        try:
            model = json.loads(path.read_text(encoding="utf-8")).get("model") or {}
        except (OSError, ValueError, AttributeError):
            continue  # not a record this check can read; the report says what is wrong with it
        theirs = model.get("fingerprint")
        if isinstance(theirs, str) and theirs != source.fingerprint:
            def named(src, fingerprint):  # by the fingerprint too where the two are the same folder or size
                algo, _, digest = fingerprint.rpartition(":")
                return f"{src} ({algo}:{digest[:12]})" if model.get("source") == source.source else src

            raise BertbenchError(
                f"--out {out}: holds records of another model, {named(model.get('source'), theirs)} ({path}); this "
                f"one is {named(source.source, source.fingerprint)}: choose another --out, or pass --append to mix them")


@dataclass
class _TaskJob:
    """One task of a `bertbench finetune`: its examples and features, read once for every (lr, seed)."""

    req: FinetuneRequest
    task: Any  # TaskSpec
    source: ModelSource
    device: Any  # torch.device
    precision: str
    train_ex: list
    eval_ex: list
    heldout_ex: list  # the selection slice held out of train (grid heldout), else empty
    train_f: list
    eval_f: list
    heldout_f: list
    max_seq_len: int
    cap: Optional[int]  # the train-example cap that applied to this task
    lrs: list[float]
    seeds: list[int]
    fingerprint: dict

    @property
    def bf16(self) -> bool:
        return self.precision == "bf16-mixed"


def _prepare_task(req: FinetuneRequest, task, source: ModelSource, data_dir: Path, device, precision: str,
                  several_tasks: bool, echo: Callable[[str], None]) -> Optional[_TaskJob]:
    """Read, cut and featurise the task's splits; None when a hub task cannot be reached (skipped, said)."""
    from bertbench.data.features import build_features
    from bertbench.data.task_readers import data_fingerprint, read_split
    from bertbench.training.selection import split_heldout

    name = task.name
    try:
        train_ex = read_split(task, "train", data_dir, req.source)
        eval_ex = read_split(task, "eval", data_dir, req.source)
    except BertbenchError as err:
        if several_tasks and "hub" in str(err).lower():
            echo(f"skip {name}: {err}")
            return None
        raise
    heldout_ex: list = []
    if req.grid == "heldout":  # cut before any cap: the same slice whatever the budget
        train_ex, heldout_ex = split_heldout(train_ex)
    cap = req.train_cap(task.name)
    train_ex = _subsample(train_ex, cap)
    eval_ex = _subsample(eval_ex, req.max_eval_examples)
    for split, examples in (("train", train_ex), ("eval", eval_ex)):
        if not examples:  # a header-only file or --max-*-examples 0: the loop would have no batch to run
            cap = req.max_train_examples if split == "train" else req.max_eval_examples
            why = f"--max-{split}-examples {cap}" if cap is not None and cap <= 0 else "the file holds no examples"
            raise BertbenchError(f"{name}: no {split} examples ({why})")
    h = task.hparams
    max_seq_len = min(req.max_seq_len or h.max_seq_len, source.config.max_position_embeddings)
    train_f = build_features(task, train_ex, source.tokenizer, max_seq_len=max_seq_len)
    eval_f = build_features(task, eval_ex, source.tokenizer, max_seq_len=max_seq_len)
    heldout_f = build_features(task, heldout_ex, source.tokenizer, max_seq_len=max_seq_len) if heldout_ex else []
    if task.type == "span_qa":  # train on windows that hold the answer or are the no-answer [CLS] case
        train_f = [f for f in train_f if "start_positions" in f]
    by_size = default_lrs(source.config.hidden_size, h.learning_rates)  # the paper's for BERT-Base and wider
    if req.grid == "none":
        lrs = [req.lr if req.lr is not None else by_size[0]]
    else:
        lrs = list(req.lrs or by_size)
    seeds = req.seeds or list(task.seeds)
    fingerprint = {"train": data_fingerprint(task, "train", data_dir), "eval": data_fingerprint(task, "eval", data_dir)}
    return _TaskJob(req, task, source, device, precision, train_ex, eval_ex, heldout_ex, train_f, eval_f, heldout_f,
                    max_seq_len, cap, lrs, seeds, fingerprint)


def _train_grid(job: _TaskJob, echo: Callable[[str], None]):
    """Every (lr, seed) run of the task: (runs, selection scores per (lr, epoch), near-constant candidates).

    Every run's candidates: the model after each epoch with `select_epoch`, else after the last one.
    A candidate is keyed (lr, epoch); its selection score is on the held-out slice (or dev, grid paper)."""
    runs: dict[tuple[float, int], _Run] = {}  # (lr, seed) → the run
    selection_scores: dict[tuple[float, int], list[float]] = {}
    near_constant: set[tuple[float, int]] = set()  # some seed predicted one label for >= 95% of the selection examples
    task = job.task
    for lr in job.lrs:
        for seed in job.seeds:
            run, by_epoch = _train_one(job, lr, seed, echo)
            for epoch, (selected_on, _, _) in by_epoch.items():
                selection_scores.setdefault((lr, epoch), []).append(selected_on.metrics[_primary(task, selected_on.metrics)])
                if selected_on.near_constant:
                    near_constant.add((lr, epoch))
            runs[(lr, seed)] = run
            scored = by_epoch[max(by_epoch)][1]
            flag = degenerate_flag(task.type) if scored.degenerate else ""
            primary = _primary(task, scored.metrics)
            echo(f"{task.name} seed {seed} lr {fmt_lr(lr)}: {primary} {scored.metrics[primary]:.2f} ({run.wall:.0f} s){flag}")
    return runs, selection_scores, near_constant


def _train_one(job: _TaskJob, lr: float, seed: int, echo: Callable[[str], None]):
    """One fine-tuning: (the run, {epoch: (scored on the selection set, scored on dev, steps by then)})."""
    from bertbench.training.finetune_loop import FinetuneHParams, predict, train
    from bertbench.training.task_model import FeatureBasedConfig, TaskModel

    req, task, source, h = job.req, job.task, job.source, job.task.hparams
    device, bf16 = job.device, job.bf16
    hp = FinetuneHParams(lr=lr, epochs=req.epochs if req.epochs is not None else h.epochs,
                         batch_size=req.batch_size or h.batch_size, weight_decay=h.weight_decay,
                         warmup_fraction=h.warmup_proportion, max_steps=req.max_steps)
    model = TaskModel(source.backbone(seed), task.type, task.num_labels,
                      FeatureBasedConfig() if req.feature_based else None)

    def candidate(entry: dict, outputs=None) -> tuple[Scored, Scored]:
        """Score the model as it is now: (on the selection set, on dev); the entry notes both."""
        if outputs is None:
            outputs = predict(model, job.eval_f, hp.eval_batch_size, device, bf16)
        scored = score(task, job.eval_ex, job.eval_f, outputs)
        selected_on = scored
        if job.heldout_f:  # the selection score: the same model on the slice held out of train
            held = predict(model, job.heldout_f, hp.eval_batch_size, device, bf16)
            selected_on = score(task, job.heldout_ex, job.heldout_f, held)
        if req.select_epoch:
            entry["selection_score"] = selected_on.metrics[_primary(task, selected_on.metrics)]
            entry["selection_near_constant"] = selected_on.near_constant  # so the rule can be recomputed
            entry["eval_score"] = scored.metrics[_primary(task, scored.metrics)]
        return selected_on, scored

    by_epoch: dict[int, tuple[Scored, Scored, int]] = {}  # epoch → (selection set, dev, steps by then)

    def keep(entry: dict, outputs) -> None:
        by_epoch[entry["epoch"]] = (*candidate(entry, outputs), entry["step"])

    t0 = time.perf_counter()
    res = train(model, job.train_f, job.eval_f, hp, seed, device, bf16,
                progress=lambda line, run=f"{task.name} seed {seed} lr {fmt_lr(lr)}": echo(f"{run}: {line}"),
                on_epoch=keep if req.select_epoch else None)
    if not req.select_epoch:
        last = res.history[-1]
        by_epoch[last["epoch"]] = (*candidate(last, res.eval_outputs), res.steps)
    wall = time.perf_counter() - t0
    run = _Run(hp, res, wall, {e: (s, st) for e, (_, s, st) in by_epoch.items()},
               model.feature_based.layers if req.feature_based else None)
    return run, by_epoch


def _write_records(job: _TaskJob, out: Path, runs: dict, selection_scores: dict, near_constant: set,
                   best: tuple) -> tuple[list[Path], Optional[dict]]:
    """The selected lr's records under OUT/TASK (what the report reads), the others' under OUT/grid/TASK;
    returns (the records written, the selection record or None)."""
    from bertbench.results import GRID_SUFFIX, RECORD_SUFFIX, record_filename, write_record
    from bertbench.runtime.files import atomic_write_text
    from bertbench.training.selection import select_lr, selection_record

    req, task = job.req, job.task
    selection = None
    if req.grid != "none":
        def key(k):  # an lr grid's record speaks of lrs alone
            return k if req.select_epoch else k[0]

        selection = selection_record(req.grid, {key(k): v for k, v in selection_scores.items()}, key(best),
                                     len(job.heldout_ex) or None, [key(k) for k in near_constant])
    written = []
    for (lr, seed), run in sorted(runs.items()):
        # the selected pair's epoch; for an lr that lost, its own best epoch by the same rule
        epoch = best[1] if lr == best[0] else select_lr(
            {k: v for k, v in selection_scores.items() if k[0] == lr}, _higher_is_better(task), near_constant)[1]
        record = _record(job, lr, seed, run, epoch, selection)
        record.extra["grid_selected"] = lr == best[0] if len(job.lrs) > 1 else None
        folder = out / task.name if lr == best[0] else out / "grid" / task.name
        scored = run.candidates[epoch][0]
        fname = record_filename(record.to_json())
        stem = fname[: -len(RECORD_SUFFIX)]
        pred_files = []
        for suffix, text in scored.predictions_text.items():
            atomic_write_text(folder / f"{stem}.{suffix}", text)
            pred_files.append(f"{stem}.{suffix}")
        record.predictions_file = pred_files[0]
        if len(pred_files) > 1:
            record.extra["other_files"] = pred_files[1:]
        if lr == best[0]:
            written.append(write_record(folder / fname, record))
        else:  # grid points that lost the selection: kept for inspection, not read by the report
            write_record(folder / f"{stem}{GRID_SUFFIX}", record)
    return written, selection


def _record(job: _TaskJob, lr: float, seed: int, run: "_Run", epoch: int, selection: Optional[dict]):
    """The result record (results.ResultRecord) of one (lr, seed) run as scored after `epoch`."""
    from bertbench.results import ResultRecord, provenance

    req, task, source = job.req, job.task, job.source
    scored, steps = run.candidates[epoch]
    hp, res = run.hp, run.res
    return ResultRecord(
        task=task.name, task_version=task.version, task_type=task.type,
        split={"train": task.splits.train or "train", "eval": task.splits.eval, "eval_kind": task.eval_kind,
               "train_size": len(job.train_ex), "eval_size": len(job.eval_ex)},
        metrics=scored.metrics, primary_metric=_primary(task, scored.metrics),
        model={"source": source.source, "fingerprint": source.fingerprint,
               "size": source.config.size_name(), "pretraining": source.pretraining,
               **({"external": source.external} if source.external is not None else {})},
        finetune={"lr": lr, "epochs": hp.epochs, "batch_size": hp.batch_size, "max_seq_len": job.max_seq_len,
                     "max_steps": req.max_steps, "max_train_examples": job.cap,
                     "max_eval_examples": req.max_eval_examples, "precision": job.precision,
                     "approach": "feature-based" if req.feature_based else "fine-tuning",
                     "grid": req.grid, "steps": steps,
                     # what ran, which --max-steps may have cut short of `epochs` (the loop's epoch: every feature)
                     "epochs_trained": round(steps / math.ceil(len(job.train_f) / hp.batch_size), 2),
                     "warmup_fraction": hp.warmup_fraction, "weight_decay": hp.weight_decay,
                     "batching": "length-grouped" if hp.group_by_length else "random",
                     **({"selected_epoch": epoch, "steps_trained": res.steps} if req.select_epoch else {}),
                     **({"selection": selection} if selection is not None else {})},
        seed=seed, pretrain_seed=source.pretrain_seed, wall_seconds=round(run.wall, 2),
        **provenance(),
        predictions_file=None,
        extra={"degenerate": scored.degenerate, "history": res.history,
               **({"feature_layers": run.feature_layers} if req.feature_based else {}),
               "train_loss_by_epoch": [e["train_loss"] for e in res.history],
               **scored.extra,
               "last_epoch_loss_drop": _last_epoch_drop(res.history),
               "data_fingerprint": job.fingerprint, "final_train_loss": res.final_train_loss,
               **({"task_definition": own} if (own := own_task_definition(task, req.data_dir)) else {})},
    )


def own_task_definition(task, data_dir: Optional[Path]) -> Optional[dict]:
    """A task of the user's own (its YAML outside the project's tasks/): where its file was, its sha256 and its
    version, so that `report` reads its records without --tasks-dir (results.validate_record). None for ours."""
    import hashlib

    from bertbench.paths import TASKS_DIR, default_data_dir, portable_folder

    path = Path(task.path) if task.path else None
    if path is None or not path.is_file() or path.resolve().is_relative_to(TASKS_DIR.resolve()):
        return None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return {"file": portable_folder(str(path), Path(data_dir) if data_dir else default_data_dir()), "sha256": "sha256:" + digest, "version": task.version}


@dataclass
class _Run:
    """One (lr, seed) fine-tuning, kept until the selection says which of its epochs the record reports."""

    hp: Any  # FinetuneHParams
    res: Any  # LoopResult
    wall: float
    candidates: dict[int, tuple[Scored, int]]  # epoch → (dev scored, steps by then)
    feature_layers: Optional[list[int]] = None


def _last_epoch_drop(history: list[dict]) -> Optional[float]:
    """Relative fall of the mean training loss over the last epoch (small: the loss has plateaued)."""
    if len(history) < 2 or not history[-2]["train_loss"]:
        return None
    before, last = history[-2]["train_loss"], history[-1]["train_loss"]
    return round((before - last) / before, 5)


def _higher_is_better(task) -> bool:
    from bertbench.metrics import METRICS

    spec = METRICS.get(task.primary_metric)
    return spec.higher_is_better if spec is not None else True


def _primary(task, metrics: dict) -> str:
    # SQuAD 2.0 reports under its own names
    return task.primary_metric if task.primary_metric in metrics else next(iter(metrics))
