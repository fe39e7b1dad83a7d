"""Progress at a steady cadence when the output goes to a file (issue 21, issue 25 item 4): a pre-training on a
cold corpus cache prints a line at least every few seconds through the tokenizer's training, the data's
preparation and held-out evaluation, not only once training steps begin."""
from __future__ import annotations

import re
import sys
import time

from tests.test_pretrain import write_corpus

EVERY = 0.4  # BERTBENCH_PROGRESS_SECONDS here; the default is 30


class _TimedLines:
    """A stand-in for sys.stdout (not a terminal, like a file) that notes when each line arrived."""

    def __init__(self):
        self.lines: list[tuple[float, str]] = []
        self._partial = ""

    def write(self, text: str) -> int:
        self._partial += text
        *done, self._partial = self._partial.split("\n")
        self.lines += [(time.monotonic(), line) for line in done]
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_pretrain_into_a_file_prints_progress_through_the_start_up(tmp_path, monkeypatch):
    import bertbench.data.corpus as corpus_mod
    from bertbench.training import pretrain_run

    corpus = write_corpus(tmp_path / "docs", n_docs=16, seed=3)
    original = corpus_mod.iter_shard_documents

    def slow_documents(*args, **kwargs):  # a corpus that takes a while to read, without a large file
        for doc in original(*args, **kwargs):
            time.sleep(0.15)
            yield doc

    # every reader of the corpus goes through one shard at a time: the tokenizer's training and the data's
    # tokenisation (in this process: the corpus is below the size at which worker processes start) both wait
    monkeypatch.setattr(corpus_mod, "iter_shard_documents", slow_documents)
    import bertbench.training.lightning_compat  # noqa: F401 (Lightning, before the clock starts: not our time)
    monkeypatch.setenv("BERTBENCH_PROGRESS_SECONDS", str(EVERY))
    monkeypatch.setenv("BERTBENCH_PROGRESS", "1")
    timed = _TimedLines()
    monkeypatch.setattr(sys, "stdout", timed)
    t0 = time.monotonic()
    summary = pretrain_run.pretrain(_config(corpus), tmp_path / "run")
    lines = [(t0, "(start)")] + timed.lines
    assert summary["steps"] == 4
    tokenizer = [line for _, line in lines if line.startswith("pretrain: training the tokenizer: ")]
    assert len(tokenizer) >= 3 and re.fullmatch(r"pretrain: training the tokenizer: [\d,]+ sentences read, \d+ s",
                                                tokenizer[0]), tokenizer
    assert lines[1][1].startswith("pretrain: tiny mlm+nsp → ") and "ends at step 4" in lines[1][1]
    # from the start through the tokenizer and the data (the steps that grow with the corpus), never a silence of
    # more than a few intervals; what follows (the model, Lightning's set-up, the first step) does not grow with it
    last = max(i for i, (_, line) in enumerate(lines) if line.startswith("pretrain: preparing the data"))
    gaps = [b - a for (a, _), (b, _) in zip(lines[:last], lines[1:last + 1])]
    assert lines[last][0] - t0 > 6 * EVERY  # a start-up long enough for the cadence to mean something
    assert max(gaps) < 4 * EVERY, "\n".join(f"{g:.2f} {line}" for g, (_, line) in zip(gaps, lines[1:]))


def _config(corpus):
    from bertbench.commands.pretrain import build_config
    from bertbench.config import PretrainConfig

    return build_config(PretrainConfig, None, {
        "corpus": [str(corpus)], "model_size": "tiny", "tokenizer_vocab_size": 200, "max_seq_len": 32,
        "batch_size": 8, "max_steps": 4, "eval_every": 2, "checkpoint_every": 0, "precision": "32"},
        ["eval_batches=2"])
