"""Typed configuration: dataclasses for model, pre-training and fine-tuning, loaded from YAML recipes.

Unknown keys are errors with a did-you-mean hint; every run directory stores the resolved config
(`save_config`), so a run can always be reproduced from its own folder.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from bertbench.config_files import _yaml_loader, from_dict
from bertbench.errors import BertbenchError, did_you_mean
from bertbench.paths import RECIPES_DIR
from bertbench.runtime.files import atomic_write_text

# layers / hidden / heads of the released small BERTs (Turc et al.) and the paper's two models.
MODEL_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

# The pre-training objectives, the one place they are named: BERT's masked LM with next-sentence prediction
# ("mlm+nsp", the paper's model), the masked LM alone on contiguous text (the paper's "No NSP") and the
# left-to-right LM (the paper's "LTR & No NSP" baseline, GPT's objective). Ask `trains_nsp`, `is_causal` and
# `is_masked` what one means rather than comparing strings.
OBJECTIVES = ("mlm+nsp", "mlm", "clm")

# The paper's masking (§3.1, the first row of Table 8): 15% of the tokens are selected for prediction; of
# those, 80% are replaced by [MASK], 10% kept and 10% replaced by a random token.
PAPER_MASK_RATIO = 0.15
PAPER_MASK_PROCEDURE = (80, 10, 10)  # % [MASK] / same / random


def setting(default: Any = None, help: str = "", *, panel: Optional[str] = None, cli: bool = True,
            factory: Optional[Callable[[], Any]] = None, flags: tuple[str, ...] = (),
            parse: Optional[Callable[[str], Any]] = None) -> Any:
    """A config field with what the command line shows for it, declared once beside the field
    (`bertbench.cli_options` makes the options): `help`, its `panel` in --help, `cli=False` for settings that
    only a recipe, a preset or `--set` can give, `flags` extra names kept as aliases (`--vocab-size`), and
    `parse` for a value written as one string (`--mask-procedure 80/10/10`)."""
    meta = {"help": help, "panel": panel, "cli": cli, "flags": flags, "parse": parse}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def required(help: str) -> Any:
    return field(metadata={"help": help, "panel": None, "cli": True, "flags": (), "parse": None})


def check_objective(objective: str, name: str = "objective") -> None:
    if objective not in OBJECTIVES:
        raise BertbenchError(f"{name} {objective!r}: expected one of {', '.join(map(repr, OBJECTIVES))}")


def check_full_sentences(data_cfg, objective: str) -> None:
    """RoBERTa's full-sentence packing is a layout of contiguous text: the masked LM without NSP only."""
    if data_cfg.full_sentences and objective != "mlm":
        raise BertbenchError(f"data.full_sentences packs contiguous text for the masked LM without NSP: it needs "
                             f"objective 'mlm', not {objective!r}")


def objective_flags(objective: Optional[str], no_nsp: bool) -> Optional[str]:
    """`--objective X` and the convenience `--no-nsp` (= `--objective mlm`) of the CLI, as one objective (None:
    neither given). Contradicting flags are an error rather than one silently winning."""
    if objective is not None:
        check_objective(objective, "--objective")
    if not no_nsp:
        return objective
    if objective not in (None, "mlm"):
        raise BertbenchError(f"--no-nsp is --objective mlm: it contradicts --objective {objective}")
    return "mlm"


def trains_nsp(objective: str) -> bool:
    """True when the objective trains next-sentence prediction (sentence-pair data, the NSP head)."""
    return objective == "mlm+nsp"


def is_causal(objective: str) -> bool:
    """True for the left-to-right LM (causal attention, next-token labels at every position)."""
    return objective == "clm"


def is_masked(objective: str) -> bool:
    """True for the masked LM, with or without NSP (the masking settings apply)."""
    return objective in ("mlm+nsp", "mlm")


_GRID_SHAPE = re.compile(r"L(\d+)-H(\d+)")  # Turc et al.'s naming of their 24 small BERTs: uncased_L-4_H-128_A-2
# what --model-size takes, as every command's help says it
MODEL_SIZE_CHOICES = ", ".join(MODEL_SIZES) + " (Turc et al.'s small BERTs and the paper's two), or any L<layers>-H<hidden> of Turc et al.'s grid, e.g. L4-H128"


def model_shape(size: str) -> tuple[int, int, int]:
    """Layers, hidden size and heads of a named size, or of a shape off the names written `L4-H128` (Turc et
    al.'s grid, which has more shapes than names: heads = hidden / 64, as in every BERT they and the paper
    released)."""
    if size in MODEL_SIZES:
        return MODEL_SIZES[size]
    grid = _GRID_SHAPE.fullmatch(size)
    if grid is None:
        raise BertbenchError(did_you_mean(size, MODEL_SIZES, "model size") + " (or a shape such as L4-H128)")
    layers, hidden = int(grid.group(1)), int(grid.group(2))
    if layers < 1 or hidden < 64 or hidden % 64:
        raise BertbenchError(f"model size {size}: expected L<layers ≥ 1>-H<hidden, a multiple of 64>, e.g. L4-H128")
    return layers, hidden, hidden // 64


def check_mask_procedure(mask_procedure, shown: Optional[str] = None) -> list[int]:
    """Three percentages MASK/SAME/RND summing to 100, returned as a list; `shown`: as the user wrote it."""
    procedure = list(mask_procedure)
    if len(procedure) != 3 or sum(procedure) != 100 or min(procedure) < 0:
        raise BertbenchError(f"mask_procedure {shown or procedure}: expected three percentages MASK/SAME/RND "
                             "summing to 100, e.g. 80/10/10")
    return procedure


def parse_mask_procedure(text: str) -> list[int]:
    """"80/10/10" → [80, 10, 10] (MASK / SAME / RND percentages summing to 100)."""
    try:
        parts = [int(p) for p in text.replace(",", "/").split("/")]
    except ValueError:
        parts = []
    return check_mask_procedure(parts, repr(text))


# The shortest input that holds [CLS] A [SEP] B [SEP] with a token or two of each segment.
MIN_SEQ_LEN = 8


def check_min_seq_len(value: int, name: str) -> None:
    if value < MIN_SEQ_LEN:
        raise BertbenchError(f"{name} {value}: too short for [CLS] A [SEP] B [SEP] (expected ≥ {MIN_SEQ_LEN})")


# The paper's dropout (hidden and attention). Fine-tuning always uses it; a pre-training may set its own
# (the CPU recipes pre-train without dropout, as Cramming does: on a short budget it only slows learning).
PAPER_DROPOUT = 0.1


@dataclass
class ModelConfig:
    """The encoder's shape. Field names follow the BERT paper; `hf_compat` maps them to transformers'."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    dropout: float = PAPER_DROPOUT
    attention_dropout: float = PAPER_DROPOUT
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pad_token_id: int = 0
    causal: bool = False  # True: left-to-right attention (the paper's "LTR" baseline, GPT's bet)

    @classmethod
    def from_size(cls, size: str, **overrides: Any) -> "ModelConfig":
        layers, hidden, heads = model_shape(size)
        base = dict(num_layers=layers, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden)
        return cls(**{**base, **overrides})

    def size_name(self) -> str:
        for name, (l, h, a) in MODEL_SIZES.items():
            if (l, h, a) == (self.num_layers, self.hidden_size, self.num_heads):
                return name
        return f"L{self.num_layers}-H{self.hidden_size}"

    def __post_init__(self) -> None:
        for key in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size", "max_position_embeddings",
                    "type_vocab_size"):
            if getattr(self, key) < 1:
                raise BertbenchError(f"{key} {getattr(self, key)}: expected an integer ≥ 1")
        for key in ("dropout", "attention_dropout"):
            if not 0 <= getattr(self, key) < 1:
                raise BertbenchError(f"{key} {getattr(self, key)}: expected a probability in [0, 1)")
        if self.hidden_size % self.num_heads:
            raise BertbenchError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")


# ----------------------------------------------------------------------------------------------
# Config objects as mappings.


def to_dict(obj) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def apply_overrides(obj, overrides: list[str]):
    """`--set key=value` / `--set section.key=value`: YAML-parse the value, strict keys."""
    import yaml

    data = to_dict(obj)
    for item in overrides:
        if "=" not in item:
            raise BertbenchError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                raise BertbenchError(f"--set {item!r}: {p!r} is not a section")
            node = node[p]
        try:
            node[parts[-1]] = yaml.load(raw, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader that reads 1e-8)
        except yaml.YAMLError as err:
            raise BertbenchError(f"--set {item!r}: the value is not valid YAML ({getattr(err, 'problem', None) or err}); "
                                 "quote it for the shell as a whole, e.g. --set 'optim.betas=[0.9, 0.98]'") from None
    return from_dict(type(obj), data, "--set")


def resolve_recipe(name_or_path: str) -> Path:
    """A recipe by name (a file in recipes/) or by path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise BertbenchError(f"{p}: recipe file not found")
        return p
    known = {f.stem: f for f in RECIPES_DIR.glob("*.yaml")}
    if not known:  # $BERTBENCH_RECIPES_DIR pointing elsewhere: "Available: " and nothing would say nothing
        raise BertbenchError(f"recipe {name_or_path!r}: no recipes in {RECIPES_DIR} (the recipes folder; "
                             "$BERTBENCH_RECIPES_DIR sets another), and no such YAML file")
    if name_or_path not in known:
        raise BertbenchError(did_you_mean(name_or_path, known, "recipe"))
    return known[name_or_path]


def save_config(obj, path: Path) -> None:
    """Write the resolved config as YAML (atomically: never a half-written file)."""
    import yaml

    atomic_write_text(Path(path), yaml.safe_dump(to_dict(obj), sort_keys=False))


# ----------------------------------------------------------------------------------------------
# Pre-training.


# Panels of `bertbench pretrain --help`.
MODEL_PANEL, DATA_PANEL, OPTIM_PANEL, RUN_PANEL, HW_PANEL = (
    "Model and objective", "Data and masking", "Optimisation", "Evaluation, logging and checkpoints", "Hardware")


# DataConfig fields that change how fast the data is made, never what it is: left out of every key and
# fingerprint of a pre-training (studies.keys, training.pretrain_run.procedure_fingerprint), so that a run on
# a machine with more cores is the same run
DATA_SPEED_ONLY = ("num_proc",)

# DataConfig fields added after runs were committed, with the value that means what every run before them did:
# at that value a field is left out of every key and fingerprint (`keyed_data_fields`), so those runs keep theirs
DATA_LATER_FIELDS = {"doc_sentences": 0}


def keyed_data_fields(data: dict[str, Any]) -> dict[str, Any]:
    """A DataConfig's fields (as a dict) as keys and fingerprints take them: DATA_LATER_FIELDS at their old
    value left out (the caller drops what else it must, e.g. DATA_SPEED_ONLY)."""
    return {k: v for k, v in data.items() if not (k in DATA_LATER_FIELDS and v == DATA_LATER_FIELDS[k])}


@dataclass
class DataConfig:
    """Corpus → instances → masked batches. Every ablation of the paper's pre-training data is a field."""

    corpus: list[str] = setting(
        help="Text source: .txt files or a folder of them (a file is one document; see --doc-sentences), "
        "WikiExtractor files, .jsonl, or hub:NAME. Repeat to mix.", panel=DATA_PANEL,
        factory=list)
    max_seq_len: int = setting(128, "Longest instance in tokens (with phases: the last phase's).", panel=DATA_PANEL)
    short_seq_prob: float = setting(
        0.1, "Share of instances with a shorter random target length (paper: 0.1).", panel=DATA_PANEL)
    # Whether sentence pairs (NSP) or contiguous text is built is the objective's (PretrainConfig.objective).
    full_sentences: bool = setting(
        False, "With --objective mlm: RoBERTa-style packing of full sentences across documents.", panel=DATA_PANEL)
    doc_sentences: int = setting(
        0, "Cut each .txt file (a whole book) at blank lines into documents of at least N sentences; 0: one .txt "
        "file is one document. A .jsonl line or a <doc> block is always one document.", panel=DATA_PANEL)
    heldout_fraction: float = setting(
        0.02, "Share of documents kept out for held-out evaluation (with --min-heldout-docs 0, 0 turns it off).",
        panel=DATA_PANEL)
    min_heldout_docs: int = setting(
        1, "Keep at least this many documents out for evaluation (2 with NSP when any are kept).", panel=DATA_PANEL)
    max_documents: Optional[int] = setting(
        None, "Use only the first N documents (quick runs; default: all).", panel=DATA_PANEL)
    masking: str = setting(
        "dynamic", "dynamic (a fresh mask every time a batch is drawn) or static (fixed at preprocessing, "
        "--dupe-factor copies).", panel=DATA_PANEL)
    dupe_factor: int = setting(
        1, "Static masking: copies of the data with different masks (the original used 10).", panel=DATA_PANEL)
    mask_ratio: float = setting(
        PAPER_MASK_RATIO, f"Share of tokens selected for prediction (the paper: {PAPER_MASK_RATIO}).", panel=DATA_PANEL)
    mask_procedure: list[int] = setting(
        help=f"MASK/SAME/RND percentages of the selected tokens ({'/'.join(map(str, PAPER_MASK_PROCEDURE))}; "
        "Table 8 of the paper).", panel=DATA_PANEL, factory=lambda: list(PAPER_MASK_PROCEDURE),
        parse=parse_mask_procedure)
    whole_word_mask: bool = setting(False, "Select whole words (every piece of a word together).", panel=DATA_PANEL)
    max_predictions_per_seq: Optional[int] = setting(
        None, "Cap on predicted positions per sequence (the paper used 20 at 128 tokens; default: the mask ratio "
        "alone).", panel=DATA_PANEL)
    seed: int = setting(12345, "Seed of the held-out split and the held-out instances.", panel=DATA_PANEL)
    num_proc: int = setting(
        0, "Processes that tokenise the corpus; 0: every core (the arrays are the same).", panel=DATA_PANEL)

    def __post_init__(self) -> None:
        check_mask_procedure(self.mask_procedure)
        if not 0.0 < self.mask_ratio < 1.0:
            raise BertbenchError(f"mask_ratio {self.mask_ratio}: expected a value in (0, 1)")
        if self.masking not in ("dynamic", "static"):
            raise BertbenchError(f"masking {self.masking!r}: expected 'dynamic' or 'static'")
        if self.dupe_factor < 1:
            raise BertbenchError(f"dupe_factor {self.dupe_factor}: expected an integer ≥ 1 (copies of the data)")
        if self.max_predictions_per_seq is not None and self.max_predictions_per_seq < 1:
            raise BertbenchError(f"max_predictions_per_seq {self.max_predictions_per_seq}: expected ≥ 1 (or none)")
        check_min_seq_len(self.max_seq_len, "max_seq_len")
        if self.doc_sentences < 0:
            raise BertbenchError(f"doc_sentences {self.doc_sentences}: expected 0 (one .txt file, one document) or "
                                 "N ≥ 1 (documents of at least N sentences)")
        if not 0 <= self.heldout_fraction < 1:
            raise BertbenchError(f"heldout_fraction {self.heldout_fraction}: expected a share in [0, 1)")
        if self.min_heldout_docs < 0:
            raise BertbenchError(f"min_heldout_docs {self.min_heldout_docs}: expected 0 or more")
        if self.max_documents is not None and self.max_documents < 2:
            # one document at least to train on and one held out
            raise BertbenchError(f"max_documents {self.max_documents}: expected 2 or more (or unset for all)")


@dataclass
class OptimConfig:
    lr: float = setting(1e-4, "Peak learning rate (AdamW).", panel=OPTIM_PANEL)
    betas: list[float] = setting(help="AdamW's betas (a recipe, or --set optim.betas=[0.9,0.98]).", cli=False,
                                 factory=lambda: [0.9, 0.999])
    eps: float = setting(1e-6, "AdamW's epsilon.", panel=OPTIM_PANEL)
    weight_decay: float = setting(0.01, "AdamW's weight decay (not on LayerNorm weights or biases).", panel=OPTIM_PANEL)
    # Warm-up: `warmup_steps` when set (the paper: 10,000 of 1M steps), else a share of the schedule.
    warmup_steps: Optional[int] = setting(
        None, "Warm-up steps (the paper: 10,000 of 1M; default: --warmup-fraction of the schedule).", panel=OPTIM_PANEL)
    warmup_fraction: float = setting(
        0.06, "Warm-up as a share of the schedule (of the steps, or of a budget's minutes).", panel=OPTIM_PANEL)
    grad_clip: float = setting(1.0, "Clip the gradient norm at this value (0: no clipping).", panel=OPTIM_PANEL)


@dataclass
class PhaseConfig:
    """Multi-phase schedules: e.g. seq 128 for 90% of steps, then 512 (the paper's recipe). `fraction` is a
    share of max_steps, or of the training minutes when budget_minutes is set (the switch is then made on
    the clock, and the step it happened at is kept in the checkpoint, so a resume repeats it exactly)."""

    fraction: float
    max_seq_len: int
    batch_size: Optional[int] = None
    max_predictions_per_seq: Optional[int] = None


# Loader processes on a GPU when num_workers is unset: collating a BERT-Base batch of 256 × 128 (pad, mask,
# fixed slots) takes a few ms on one core (`bench pretrain` reports collate_ms_per_batch beside the step).
GPU_LOADER_WORKERS = 2


def loader_workers(cfg: "PretrainConfig", device_type: str) -> int:
    """num_workers, or when unset: GPU_LOADER_WORKERS on a GPU, 0 on CPU and under a budget with phases (whose
    switch happens on the clock in the main process)."""
    if cfg.num_workers is not None:
        return cfg.num_workers
    return GPU_LOADER_WORKERS if device_type == "cuda" and not (cfg.budget_minutes and cfg.phases) else 0


DDP_COMM_HOOKS = ("none", "bf16")


@dataclass
class DdpConfig:
    """How DDP (`strategy: ddp`) all-reduces the gradients; DDP's own defaults unless a recipe says otherwise.
    DDP groups the gradients into buckets of `bucket_cap_mb` and all-reduces each as soon as the backward pass
    has filled it (overlapping the backward of the layers before it); its C++ reducer does it, so no step waits
    on the host for it. A recipe section `ddp:` (or `--set ddp.comm_hook=bf16`) sets these."""

    bucket_cap_mb: float = setting(25.0, "Gradient bucket size in MB (DDP's default, 25).", cli=False)
    gradient_as_bucket_view: bool = setting(
        False, "Gradients as views into the buckets: no copy into them, less memory (DDP's default: off).", cli=False)
    comm_hook: str = setting(
        "none", "bf16: all-reduce the gradients in bf16 (half the bytes; each rank's gradient rounded to bf16 "
        "before the sum), DDP's bf16_compress_hook; none: in their own dtype.", cli=False)

    def __post_init__(self) -> None:
        if self.comm_hook not in DDP_COMM_HOOKS:
            raise BertbenchError(f"ddp.comm_hook {self.comm_hook!r}: expected one of {', '.join(DDP_COMM_HOOKS)}")
        if not self.bucket_cap_mb > 0:
            raise BertbenchError(f"ddp.bucket_cap_mb {self.bucket_cap_mb}: expected a positive number of MB")


COMPILE_CHOICES = ("auto", "on", "off")  # what they decide: training.step


@dataclass
class PretrainConfig:
    """A pre-training. Every field is a `bertbench pretrain` option (`bertbench.cli_options`), unless marked
    cli=False: adding a field here adds the option, with this help."""

    model_size: str = setting("mini", f"Model size: {MODEL_SIZE_CHOICES}.", panel=MODEL_PANEL)
    model: dict = setting(help="Overrides of the model's shape and dropout (a recipe, or --set model.dropout=0.0).",
                          cli=False, factory=dict)
    tokenizer: str = setting(
        "", "vocab.txt or tokenizer folder; 'train' (or empty) trains WordPiece on the corpus.", panel=MODEL_PANEL)
    tokenizer_vocab_size: int = setting(
        30522, "Vocabulary size when training a tokenizer.", panel=MODEL_PANEL, flags=("--vocab-size",))
    lowercase: bool = setting(True, "Lowercase the text before tokenising (an uncased model).", panel=MODEL_PANEL)
    objective: str = setting(
        "mlm+nsp", "mlm+nsp (BERT: masked LM + next-sentence prediction, the default), mlm (masked LM alone on "
        "contiguous text: the paper's 'No NSP') or clm (left-to-right LM: the paper's 'LTR & No NSP').",
        panel=MODEL_PANEL)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    phases: list[PhaseConfig] = setting(
        help="A multi-phase schedule, e.g. seq 128 for 90% then 512 (a recipe's `phases:` list).", cli=False,
        factory=list)
    batch_size: int = setting(
        32, "Sequences per optimiser step: the global batch, over every device and node, split by --grad-accum.",
        panel=OPTIM_PANEL)
    grad_accum: int = setting(1, "Micro-batches per device and optimiser step: each device's share of the batch, cut up "
                              "to fit its memory (the same step).", panel=OPTIM_PANEL)
    max_steps: int = setting(
        1000, "Optimiser steps; with --budget-minutes a cap: whichever is reached first ends the run.",
        panel=OPTIM_PANEL)
    # Schedule over wall-clock minutes of training instead of steps (Cramming's budget schedule): warm-up
    # for optim.warmup_fraction of the budget, linear decay to 0 when it ends. max_steps still caps the run:
    # whichever limit is reached first ends it (`limits_text` says which apply).
    budget_minutes: Optional[float] = setting(
        None, "Schedule warm-up and decay over this many minutes of training (evaluation not counted); the run "
        "ends when they are spent, or at --max-steps if that comes first.", panel=OPTIM_PANEL)
    precision: str = setting("auto", "auto (bf16 where native), 32, bf16-mixed, 16-mixed.", panel=HW_PANEL)
    eval_every: int = setting(200, "Held-out evaluation every N steps (0: at the end only).", panel=RUN_PANEL)
    eval_batches: int = setting(20, "Held-out batches per evaluation.", panel=RUN_PANEL)
    checkpoint_every: int = setting(
        200, "Write checkpoints/last.ckpt every N steps, for --resume auto (0: none mid-run).", panel=RUN_PANEL)
    # Model checkpoints kept for the paper's Figure 5 (fine-tuned score against pre-training tokens): the run
    # is cut into `snapshots` equal spans of steps and each inner boundary keeps snapshots/step-N (the last
    # point is the final checkpoint). 0: none.
    snapshots: int = setting(
        0, "Cut the run into N equal spans of steps and keep a model at each inner boundary (the paper's "
        "Figure 5; 0: none).", panel=RUN_PANEL)
    log_every: int = setting(10, "A metrics.csv row every N steps.", panel=RUN_PANEL)
    seed: int = setting(1, "Seed of the initialisation, the masks and the batch order.", panel=OPTIM_PANEL)
    devices: str = setting("1", "Devices, passed to Lightning: a count, -1 (all), or a list such as 0,1.",
                           panel=HW_PANEL)
    accelerator: str = setting("auto", "Lightning's accelerator: auto, cpu, gpu.", panel=HW_PANEL)
    strategy: str = setting("auto", "Lightning strategy: auto, ddp, fsdp, …", panel=HW_PANEL)
    ddp: DdpConfig = field(default_factory=DdpConfig)  # with strategy ddp: its gradient buckets and comm hook
    num_nodes: int = setting(1, "Machines of a multi-node run.", panel=HW_PANEL)
    num_workers: Optional[int] = setting(
        None, f"DataLoader worker processes (default: {GPU_LOADER_WORKERS} on a GPU, where batches are collated while "
        "it trains; 0 on CPU, where collating takes the cores the step would use).", panel=HW_PANEL)
    compile: str = setting(
        "auto", "torch.compile the training step: on, off, or auto (on a GPU: when the run pays back the compile time "
        "measured here; on CPU: only where a compiled step was measured faster than the eager one here). "
        "summary.json's `step` says what was decided and why.", panel=HW_PANEL)

    def with_data_dir(self, data_dir: Path) -> "PretrainConfig":
        """Expand `{data_dir}` in corpus and tokenizer paths (recipes are written against the data dir)."""
        sub = lambda s: s.replace("{data_dir}", str(data_dir))  # noqa: E731
        return dataclasses.replace(
            self, tokenizer=sub(self.tokenizer), data=dataclasses.replace(self.data, corpus=[sub(c) for c in self.data.corpus])
        )

    def __post_init__(self) -> None:
        if self.budget_minutes is not None:
            if not self.budget_minutes > 0:  # `not >` also catches NaN
                raise BertbenchError(f"budget_minutes {self.budget_minutes}: expected a positive number of minutes")
            if self.optim.warmup_steps is not None:
                raise BertbenchError(
                    "budget_minutes schedules over time: its warm-up is optim.warmup_fraction of the budget, "
                    "so optim.warmup_steps must be unset (--set optim.warmup_steps=null)"
                )
            if self.snapshots:
                raise BertbenchError("snapshots are kept at evenly spaced steps: they need max_steps, not budget_minutes")
            if self.phases and self.num_workers:  # (unset: no workers under a budget with phases, loader_workers)
                raise BertbenchError("budget_minutes with phases switches on the clock in the main process: set num_workers: 0")
        if self.compile not in COMPILE_CHOICES:
            raise BertbenchError(f"compile {self.compile!r}: expected one of {', '.join(COMPILE_CHOICES)}")
        check_objective(self.objective)
        check_full_sentences(self.data, self.objective)
        model_shape(self.model_size)  # a size the model can be built at, or the error saying what was expected
        _check_pretrain_numbers(self)


def limits_text(cfg: "PretrainConfig") -> str:
    """What ends a pre-training, for its start-up line: 'at step 1,000', or '10 min of training or step 20,
    whichever comes first'."""
    steps = f"step {cfg.max_steps:,}"
    if cfg.budget_minutes is None:
        return f"at {steps}"
    return f"after {cfg.budget_minutes:g} min of training or at {steps}, whichever comes first"


# Precision strings a pre-training accepts (bertbench's aliases and Lightning's own names).
PRECISIONS = ("auto", "32", "32-true", "fp32", "bf16", "bf16-mixed", "bf16-true", "16", "16-mixed", "fp16")


def _check_pretrain_numbers(cfg: "PretrainConfig") -> None:
    """Numbers checked where they enter (flags, recipes, --set): one line each, before any work starts."""
    at_least = {"batch_size": 1, "grad_accum": 1, "max_steps": 1, "log_every": 1, "eval_batches": 1, "num_nodes": 1,
                "eval_every": 0, "checkpoint_every": 0, "snapshots": 0, "num_workers": 0, "seed": 0, "tokenizer_vocab_size": 6}
    for key, low in at_least.items():
        value = getattr(cfg, key)
        if value is not None and value < low:  # None: num_workers unset (loader_workers)
            raise BertbenchError(f"{key} {value}: expected an integer ≥ {low}")
    if cfg.seed >= 2**32:
        raise BertbenchError(f"seed {cfg.seed}: expected an integer < 2**32")
    if cfg.precision not in PRECISIONS:
        raise BertbenchError(f"precision {cfg.precision!r}: expected one of {', '.join(PRECISIONS)}")
    if not cfg.optim.lr > 0:
        raise BertbenchError(f"optim.lr {cfg.optim.lr}: expected a positive number")
    if cfg.optim.warmup_steps is not None and cfg.optim.warmup_steps < 0:
        raise BertbenchError(f"optim.warmup_steps {cfg.optim.warmup_steps}: expected an integer ≥ 0")
    if cfg.optim.warmup_steps is not None and cfg.budget_minutes is None and cfg.optim.warmup_steps > cfg.max_steps:
        # the learning rate would never reach its peak, and the decay would never start
        raise BertbenchError(f"optim.warmup_steps {cfg.optim.warmup_steps}: longer than max_steps {cfg.max_steps}")
    positions = cfg.model.get("max_position_embeddings", ModelConfig.max_position_embeddings)
    for where, seq in [("max_seq_len", cfg.data.max_seq_len)] + [(f"phases[{i}].max_seq_len", p.max_seq_len)
                                                                 for i, p in enumerate(cfg.phases)]:
        if seq > positions:
            raise BertbenchError(f"{where} {seq}: longer than the model's {positions} position embeddings")
    devices = cfg.devices.strip()
    well_formed = devices == "auto" or re.fullmatch(r"-?\d+|\d+(,\d+)+,?|\d+,", devices) is not None
    if not well_formed or (devices.lstrip("-").isdigit() and (int(devices) == 0 or int(devices) < -1)):
        # Lightning's own check of a bad value is a 65-line traceback, after the corpus is tokenised
        raise BertbenchError(f"devices {cfg.devices!r}: expected a count ≥ 1, -1 (all), auto, or a list such as 0,1")
