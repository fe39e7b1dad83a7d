"""A recipe's `ddp:` section (gradient buckets, gradients as bucket views, the bf16 compression hook) reaches
the DDP strategy the Trainer runs; without one, DDP's own defaults; a bad value is one line."""
from __future__ import annotations

import pytest

from bertbench.config import PretrainConfig
from bertbench.config_files import load_config
from bertbench.errors import BertbenchError


def strategy_of(cfg: PretrainConfig, tmp_path):
    from bertbench.training.pretrain_run import _trainer

    return _trainer(cfg, tmp_path, "32", True, False, []).strategy


def test_a_recipes_ddp_section_reaches_the_strategy(tmp_path):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("strategy: ddp\ndevices: '2'\naccelerator: cpu\n"
                      "ddp:\n  bucket_cap_mb: 50\n  gradient_as_bucket_view: true\n  comm_hook: bf16\n")
    strategy = strategy_of(load_config(PretrainConfig, recipe), tmp_path)
    assert strategy._ddp_comm_hook is bf16_compress_hook
    assert strategy._ddp_kwargs == {"bucket_cap_mb": 50.0, "gradient_as_bucket_view": True}

    plain = strategy_of(PretrainConfig(strategy="ddp", devices="2", accelerator="cpu"), tmp_path)
    assert plain._ddp_comm_hook is None
    assert plain._ddp_kwargs == {"bucket_cap_mb": 25.0, "gradient_as_bucket_view": False}  # DDP's defaults


@pytest.mark.parametrize("section,needle", [("comm_hook: fp8", "ddp.comm_hook 'fp8': expected one of none, bf16"),
                                            ("bucket_cap_mb: 0", "ddp.bucket_cap_mb 0.0: expected a positive"),
                                            ("bucket_mb: 5", "bucket_mb")])
def test_a_bad_ddp_setting_is_one_line(tmp_path, section, needle):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"strategy: ddp\nddp:\n  {section}\n")
    with pytest.raises(BertbenchError, match=needle.replace("(", r"\(").replace(".", r"\.")) as e:
        load_config(PretrainConfig, recipe)
    assert "\n" not in str(e.value)
