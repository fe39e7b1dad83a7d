from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never touch the network: hub look-ups fail at once instead of retrying for ~23 s.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("BERTBENCH_DATA_DIR", ROOT.parent / "shared" / "data"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def absolute_paths(value, where: str = "") -> list[str]:
    """Every string in a JSON value that is an absolute path (a machine's folder), with where it sits."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in absolute_paths(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in absolute_paths(v, f"{where}[{i}]")]
    return [f"{where}: {value}"] if isinstance(value, str) and Path(value).is_absolute() else []


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Tokenised-corpus caches of the tests go to a temporary folder, not ~/.cache/bertbench."""
    if "BERTBENCH_CACHE_DIR" not in os.environ:
        os.environ["BERTBENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("bertbench-cache"))
    yield


@pytest.fixture(autouse=True)
def _no_step_times_from_other_tests(_isolated_cache):
    """`compile: auto` decides from the step and compile times earlier runs recorded in the cache
    (training.step_times); the tests share one cache folder for its tokenised corpora, so each test starts
    without the times another test's runs measured (one that patches torch.compile records a compile of ~0 s)."""
    from bertbench.training.step_times import store_path

    store_path().unlink(missing_ok=True)
    yield
