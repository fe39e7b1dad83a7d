"""A cell is one defined thing (issue 42): with several pre-training seeds, the mean of their means and the
t-interval over those means; and every copy of a cell (Tables 5, 6, 8) carries the main table's marks."""
from __future__ import annotations

import pytest

from bertbench.report.model import collect, fmt_stats, seed_stats
from bertbench.report.stats import t_interval
from bertbench.report.tables.ablations import table5
from bertbench.report.tables.main import main_table

from record_factory import record

GOLD = "01" * 50


def _wrong_at(positions) -> str:
    return "".join(str(1 - int(g)) if i in positions else g for i, g in enumerate(GOLD))


def _seeded(task: str, objective, pretrain: int, finetune: int, predictions: str):
    rec = record(task, finetune, predictions, GOLD, objective=objective)
    rec.data["pretrain_seed"] = pretrain
    return rec


def test_a_cell_of_several_pre_training_seeds_is_their_means_with_their_interval():
    """3 pre-training × 3 fine-tuning seeds: the pre-training seeds differ far more than their fine-tuning seeds,
    and the interval over the 3 seed means (2 degrees of freedom) is far wider than one over 9 'independent' runs."""
    wrong = {1: 5, 2: 20, 3: 35}  # each pre-training seed's level; fine-tuning seeds move it by one example
    records = [_seeded("rte", "mlm+nsp", p, f, _wrong_at(set(range(wrong[p] + f))))
               for p in (1, 2, 3) for f in (1, 2, 3)]
    stats = seed_stats([r.data for r in records], "accuracy")
    means = [100 - (wrong[p] + 2) for p in (1, 2, 3)]  # each seed's fine-tuning mean: wrong + 1, + 2, + 3 → + 2
    assert stats.pretrain_means == pytest.approx(means)
    assert stats.mean == pytest.approx(sum(means) / 3)
    iv, naive = stats.interval, t_interval(stats.values)
    assert (iv.low, iv.high) == pytest.approx((t_interval(means).low, t_interval(means).high))
    assert iv.high - iv.low > 2 * (naive.high - naive.low)
    assert fmt_stats(stats).endswith("(n=9, P=3)")


def test_one_pre_training_seed_keeps_the_interval_over_its_fine_tuning_seeds():
    records = [_seeded("rte", "mlm+nsp", 1, f, _wrong_at(set(range(5 + f)))) for f in (1, 2, 3)]
    stats = seed_stats([r.data for r in records], "accuracy")
    assert stats.pretrain_means == () and fmt_stats(stats).endswith("(n=3)")
    assert (stats.interval.low, stats.interval.high) == pytest.approx((t_interval(stats.values).low,
                                                                        t_interval(stats.values).high))


def test_every_copy_of_a_cell_carries_its_marks():
    """A degenerate seed (one class for every example) is ⊘ in the main table and in Table 5's copy alike."""
    records = [record("qnli_devsplit", 1, "1" * 100, GOLD), record("qnli_devsplit", 2, _wrong_at({1, 2}), GOLD),
               record("qnli_devsplit", 1, _wrong_at({3}), GOLD, objective="mlm"),
               record("qnli_devsplit", 2, _wrong_at({4}), GOLD, objective="mlm")]
    data = collect(records)
    main = main_table(data)
    (qnli,) = [r for r in main.rows if r[0] == "qnli_devsplit" and r[2] == "accuracy"]
    col = main.header.index("tiny MLM+NSP")
    assert qnli[col].endswith(" ⊘ ≈")  # the constant seed is near-constant too
    t5 = table5(data)
    (ours,) = [r for r in t5.rows if r[0] == "tiny MLM+NSP"]
    qnli_col = next(i for i, h in enumerate(t5.header) if h.startswith("QNLI"))
    assert ours[qnli_col].removesuffix(" †").endswith(" ⊘ ≈")
    (other,) = [r for r in t5.rows if r[0] == "tiny MLM (no NSP)"]
    assert "⊘" not in other[qnli_col]
