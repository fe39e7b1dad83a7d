"""The CLI's glibc malloc tuning: applied in a fresh process, recorded, and switchable off."""
import os
import subprocess
import sys

PROBE = (
    "from bertbench.runtime.allocator import tune_glibc_malloc, allocator_name; "
    "ok = tune_glibc_malloc(); print(ok, allocator_name())"
)


def _probe(**env):
    full = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "BERTBENCH_MALLOC_TUNING")} | env
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=full, check=True).stdout.split()


def test_tuning_applies_on_glibc():
    assert _probe() == ["True", "glibc-tuned"]


def test_tuning_can_be_switched_off():
    assert _probe(BERTBENCH_MALLOC_TUNING="0") == ["False", "glibc"]
