from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never touch the network: hub look-ups fail at once instead of retrying for ~23 s.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Two test workers on two cores, each with torch's two threads and subprocesses of their own: more threads than
# cores. GNU OpenMP's threads spin while they wait, so each oversubscribed process burns the others' time (two RTE
# fine-tunings side by side took 73 s each, 18 s alone); passive threads sleep instead (28 s each), the same
# threads summing in the same order, the same numbers. Subprocesses inherit it; set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# ... and never into the project's registrations folder, module fixtures included (each test also gets its own)
os.environ.setdefault("BERTBENCH_REGISTRATIONS", os.path.join(__import__("tempfile").mkdtemp(), "registrations"))

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
def _own_registrations(tmp_path, monkeypatch):
    """A pre-registered study's run writes its registration into the project's registrations folder
    (studies.protocol.registrations_dir): each test gets a folder of its own, so that no test writes into the
    project and no test's registration of a study name is another's committed one. Subprocesses inherit it."""
    monkeypatch.setenv("BERTBENCH_REGISTRATIONS", str(tmp_path / "registrations"))
    yield


@pytest.fixture(autouse=True)
def _no_step_times_from_other_tests(_isolated_cache):
    """`compile: auto` decides from the step and compile times earlier runs recorded in the cache
    (training.step_times); the tests share one cache folder for its tokenised corpora, so each test starts
    without the times another test's runs measured (one that patches torch.compile records a compile of ~0 s)."""
    from bertbench.training.step_times import store_path

    store_path().unlink(missing_ok=True)
    yield


# --- slowest files first ------------------------------------------------------------------------------------------
# `make test` runs two xdist workers, each taking whole files (--dist loadfile). xdist hands files out in the
# collection's order (with --no-loadscope-reorder; by default it orders them by test count, which put the few long
# end-to-end files last, one worker finishing minutes after the other). So the collection starts with the files
# that took longest last time (tests/durations.json, seconds per file, rewritten by `pytest --store-durations`):
# the longest-first rule, whose finish is within one file's time of an even split. A file not listed keeps its
# place after the listed ones; a stale list only reorders, it never changes what runs.
DURATIONS = Path(__file__).resolve().parent / "durations.json"


def pytest_addoption(parser):
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test file's total seconds (setup, call, teardown) to {DURATIONS.name}")


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    import json

    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    first_seen = {}
    for item in items:
        first_seen.setdefault(_file_of(item.nodeid), len(first_seen))
    items.sort(key=lambda item: (-seconds.get(_file_of(item.nodeid), 0.0), first_seen[_file_of(item.nodeid)]))


class _FileDurations:
    def __init__(self):
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report):
        # on xdist's controller too: every worker's reports pass through it
        path = _file_of(report.nodeid)
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration

    def pytest_sessionfinish(self, session):
        import json

        if not self.seconds:
            return
        ranked = dict(sorted(((f, round(s, 1)) for f, s in self.seconds.items()), key=lambda kv: -kv[1]))
        DURATIONS.write_text(json.dumps(ranked, indent=1) + "\n")


def pytest_configure(config):
    if config.getoption("--store-durations") and not hasattr(config, "workerinput"):  # the controller writes the file
        config.pluginmanager.register(_FileDurations(), "bertbench-file-durations")
