"""The static training step compiles as one graph (torch.compile fullgraph=True: a host sync, a nonzero() or
a boolean index between the batch and the loss would break it), computes what the eager step computes,
and compiles once per input shape (one per phase).

Kept cheap: a tiny model. The aot_eager backend traces forward and backward as the real compile does,
without generating code; one test runs inductor itself (C++ code generation: ~half a minute on CPU), and one
runs it inside `bertbench pretrain`'s Lightning loop (a minute, cold).
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from bertbench.data.masking import fixed_slots
from bertbench.model.bert import BertForPreTraining, compile_step
from tests.test_packing import cfg, perturbed, ragged_batch
from tests.test_static_step import SLOTS, mlm_labels


def pair(dropout: float = 0.0, causal: bool = False):
    c = dataclasses.replace(cfg(causal), dropout=dropout, attention_dropout=dropout)
    torch.manual_seed(0)
    eager = perturbed(BertForPreTraining(c, nsp=not causal)).train()
    compiled = BertForPreTraining(c, nsp=not causal).train()
    compiled.load_state_dict(eager.state_dict())
    return eager, compiled


def batch(T: int = 23, causal: bool = False):
    ids, types, mask = ragged_batch(T=T)
    if causal:
        labels = torch.full_like(ids, -100)
        labels[:, :-1] = torch.where(mask[:, 1:].bool(), ids[:, 1:], -100)
        return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, lm_labels=labels)
    positions, labels = fixed_slots(mlm_labels(ids, mask), SLOTS)
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, lm_labels=labels, lm_positions=positions,
                nsp_labels=torch.tensor([0, 1, 1, 0, 1]))


def step(model, b, forward=None):
    """forward + loss + backward of the static step (`forward`: the model's, compiled); (loss, gradients)."""
    model.zero_grad(set_to_none=True)
    loss = (forward or model)(**b, static=True).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_same_step(a, b, atol=1e-5):
    torch.testing.assert_close(a[0], b[0], atol=atol, rtol=0)
    assert a[1].keys() == b[1].keys() and a[1]
    for n in a[1]:
        torch.testing.assert_close(a[1][n], b[1][n], atol=atol, rtol=1e-4, msg=n)


class CountingBackend:
    """A torch.compile backend that counts the graphs dynamo hands it, then runs them through aot_eager
    (forward and backward traced, as inductor would receive them)."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        from torch._dynamo.backends.common import aot_autograd
        from functorch.compile import make_boxed_func

        self.graphs += 1
        return aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g.forward))(gm, example_inputs)


@pytest.mark.parametrize("causal", [False, True], ids=["mlm+nsp", "clm"])
def test_static_step_is_one_graph_matching_eager_and_compiles_once_per_phase(causal):
    torch._dynamo.reset()
    eager, compiled = pair(causal=causal)
    backend = CountingBackend()
    forward = compile_step(compiled, backend=backend)
    phase1, phase2 = batch(23, causal), batch(16, causal)  # two phases: two sequence lengths
    assert_same_step(step(compiled, phase1, forward), step(eager, phase1))
    assert backend.graphs == 1
    for b in (phase1, phase1, phase2, phase2, phase1):
        step(compiled, b, forward)
    assert backend.graphs == 2  # one graph per phase's shape, no recompile within a phase
    assert_same_step(step(compiled, phase2, forward), step(eager, phase2))
    compiled.eval()  # evaluation calls the model itself: eager (no graph for its shapes)
    with torch.no_grad():
        torch.testing.assert_close(compiled(**phase1).loss, eager.eval()(**phase1).loss, atol=1e-5, rtol=0)
    assert backend.graphs == 2


def test_a_host_sync_in_the_static_step_fails_the_fullgraph_compile(monkeypatch):
    """What makes the test above a proof: a value read back to the host (here, the mask checked for padding,
    as the dynamic path does) breaks the graph, and fullgraph turns the break into an error."""
    import bertbench.model.bert as bert

    torch._dynamo.reset()
    original = bert.attention_mask_for_sdpa
    monkeypatch.setattr(bert, "attention_mask_for_sdpa",
                        lambda m, T, causal, dev, static=False: original(m, T, causal, dev, static=False))
    _, compiled = pair()
    forward = compile_step(compiled, backend=CountingBackend())
    with pytest.raises(Exception, match="(?i)data-dependent|graph break|item|bool"):
        step(compiled, batch(), forward)


@pytest.mark.slow
def test_inductor_compiled_step_matches_eager():
    """The real compile (inductor: C++ code generated and built on CPU, one graph), forward, loss and backward
    against the eager step. Dropout is off: with it, the compiled step draws from inductor's RNG (seeded from
    torch's generator, whose state checkpoints keep), so its numbers are not eager's."""
    torch._dynamo.reset()
    eager, compiled = pair()
    forward = compile_step(compiled)
    b = batch()
    assert_same_step(step(compiled, b, forward), step(eager, b), atol=2e-5)  # fused kernels reorder float sums
    assert_same_step(step(compiled, b, forward), step(eager, b), atol=2e-5)  # the second call runs the built graph


def test_a_compiled_pretraining_trains_the_static_step_and_resumes_exactly(tmp_path, monkeypatch):
    """`bertbench pretrain` end to end on CPU, compiled: the collator makes fixed-length, fixed-slot batches, the
    module hands the slots to the compiled forward with static=True, and a run stopped at step 4 and resumed
    ends where the straight run ends (the same losses at every step). The straight run says `--compile auto`
    beside recorded measurements that make compiling pay (a compiled step measured faster here, and 8 steps × 1 s
    eager > 4 × 0.01 s): summary.json
    says what was decided and why, and the store keeps what the run measured. An aot_eager backend stands in
    for inductor (the same traced graphs, no C++ build: inductor's numerics are test_inductor_compiled_step_matches_eager's)."""
    import csv
    import functools
    import json

    from tests.test_pretrain import TINY, pretrain, write_corpus

    import bertbench.model.bert as bert
    from bertbench.runtime.provenance import hardware
    from bertbench.training import step_times

    torch._dynamo.reset()
    monkeypatch.setenv("BERTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    shape = step_times.shape_key(8, 32, "32-true")
    step_times.record(hardware(), "tiny", shape, compile_seconds=0.01, eager_step_seconds=1.0, compiled_step_seconds=0.5)
    seen = []
    original = bert.compile_step

    def spy(model, *args, **kwargs):
        step = original(model, *args, **kwargs)

        def counted(*a, **kw):
            seen.append(kw.get("static") is True and kw.get("lm_positions") is not None and model.training)
            return step(*a, **kw)
        return counted

    monkeypatch.setattr(bert, "compile_step", spy)
    backend = CountingBackend()
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend=backend))
    corpus = write_corpus(tmp_path / "docs")
    common = ["--corpus", str(corpus), "--max-steps", "8", "--objective", "mlm", *TINY]
    r = pretrain([*common, "--compile", "auto", "--out", str(tmp_path / "straight")], monkeypatch)
    assert r.output.count("pretrain: compiled the training step in ") == 1  # the compile time, said once
    assert len(seen) == 8 and all(seen)  # every training step ran the static step with slots, compiled
    assert backend.graphs == 1  # one phase, one graph: the batches' shapes never changed
    decided = json.loads((tmp_path / "straight" / "summary.json").read_text())["step"]
    assert decided["compiled"] and decided["static"] and decided["shapes"] == "static"
    assert decided["reason"] == "planned eager time 8 s > 4 × compile time 0.01 s" and decided["planned_eager_seconds"] == 8.0
    now = step_times.measured(hardware(), "tiny", shape)
    assert now["compile_seconds"] == decided["measured"]["compile_seconds"] > 0.01  # this run's own compile, kept
    assert decided["measured"]["compiled_step_seconds"] is None and now["compiled_step_seconds"] == 0.5  # 8 steps: untimed
    pretrain([*common, "--compile", "on", "--out", str(tmp_path / "split"), "--stop-at-step", "4"], monkeypatch)
    pretrain([*common, "--compile", "on", "--out", str(tmp_path / "split"), "--resume", "auto"], monkeypatch)
    rows = [list(csv.DictReader(open(tmp_path / run / "metrics.csv"))) for run in ("straight", "split")]
    assert [r["train_loss"] for r in rows[0]] == [r["train_loss"] for r in rows[1]] and len(rows[0]) == 8
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("straight", "split")]
    assert summaries[0]["heldout"] == summaries[1]["heldout"]


@pytest.mark.slow
def test_inductor_compiled_pretraining_in_the_lightning_loop_matches_eager_and_resumes_exactly(tmp_path, monkeypatch):
    """`bertbench pretrain --compile on` on CPU with the real compile (inductor, torch.compile as compile_step
    calls it): the Lightning loop trains the static step through the one graph inductor built (one phase, one
    shape), and its curve is the eager run's (`--compile off`: the dynamic step, the same rows and masks) within
    what fused kernels' reordered float sums allow over 8 Adam steps. Dropout off: compiled, dropout draws from
    inductor's RNG, not eager's (see test_inductor_compiled_step_matches_eager). Stopped at step 4 and resumed
    (a new compile of the same graph), it ends where the straight compiled run ends, loss for loss and weight
    for weight: the same kernels on the same inputs (one thread). The graphs inductor is given are counted
    (tests/ddp_collectives.py's InductorGraphs): a step that fell back to eager, or compiled with another
    backend, fails here. Cold (inductor building its C++), about a minute; its cache makes later runs ~10 s."""
    import csv
    import json

    from tests.ddp_collectives import InductorGraphs
    from tests.ddp_runs import max_rel, weights
    from tests.test_pretrain import TINY, pretrain, write_corpus

    corpus = write_corpus(tmp_path / "docs", n_docs=8)
    common = ["--corpus", str(corpus), "--max-steps", "8", *TINY, "--lr", "3e-3", "--warmup-steps", "2",
              "--set", "model.dropout=0.0", "--set", "model.attention_dropout=0.0", "--eval-every", "4",
              "--checkpoint-every", "4"]
    pretrain([*common, "--compile", "off", "--out", str(tmp_path / "eager")], monkeypatch)
    graphs = InductorGraphs()
    undo = graphs.install()
    try:
        torch._dynamo.utils.counters.clear()
        for session, args in enumerate(([], ["--stop-at-step", "4"], ["--resume", "auto"])):
            torch._dynamo.reset()  # each session compiles its step, as a new process would (in one, dynamo's
            # cache would serve the next session's model: its parameters are the graph's inputs)
            run = "straight" if session == 0 else "split"
            r = pretrain([*common, "--compile", "on", "--out", str(tmp_path / run), *args], monkeypatch)
            assert r.output.count("pretrain: compiled the training step in ") == 1
            n = session + 1
            assert graphs.stats() == {"inductor_graphs": n, "dynamo_graphs": n}  # one phase: one graph, inductor's
    finally:
        undo()

    def rows(run):
        with open(tmp_path / run / "metrics.csv", newline="") as fh:
            return list(csv.DictReader(fh))

    eager, straight, split = rows("eager"), rows("straight"), rows("split")
    summaries = {run: json.loads((tmp_path / run / "summary.json").read_text()) for run in ("eager", "straight")}
    assert summaries["straight"]["step"]["compiled"] and summaries["straight"]["step"]["static"]
    assert not summaries["eager"]["step"]["compiled"] and not summaries["eager"]["step"]["static"]
    assert [r["train_loss"] for r in split] == [r["train_loss"] for r in straight] and len(straight) == 8
    counts = lambda rs: [(r["step"], r["tokens"], r["loss_tokens"]) for r in rs]  # noqa: E731
    assert counts(eager) == counts(straight)  # the same rows and masks, step by step
    a, b = (torch.tensor([float(r["train_loss"]) for r in rs]) for rs in (eager, straight))
    assert a[-1] < a[0] - 0.3  # it learns: a real curve to compare
    losses, rel = (a - b).abs().max().item(), max_rel(weights(tmp_path / "eager"), weights(tmp_path / "straight"))
    print(f"compiled vs eager: losses within {losses:.2e}, weights within {rel:.2e} relative")  # pytest -s
    # measured here: losses equal to metrics.csv's 5 decimals, weights within 2e-6 relative; the bounds are the
    # DDP tests' (tests/test_pretrain_ddp.py), which allow for other machines' float sums
    assert losses < 1e-3 and rel < 1e-4
    # the resumed session builds its step again: in the full suite (inductor's cache warm from other tests) its
    # kernels can sum in another order than the straight run's, so the weights agree to float32's last places
    # (1.3e-6 relative seen), not to the bit; the losses above agree to metrics.csv's 5 decimals
    assert max_rel(weights(tmp_path / "straight"), weights(tmp_path / "split")) < 1e-5
