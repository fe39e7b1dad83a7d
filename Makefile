# Two commands for a fresh machine:  `make demo` (the main job)  and  `make test` (the test suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= ../shared/data
PRESET ?= cpu-quick
OUT ?= runs/$(PRESET)

.PHONY: setup test demo study archive leaderboard studies-table clean

# torch first, pinned: 2.13.0 is the CPU build on this disk; an open range would pull a multi-GB CUDA build.
$(BIN)/bertbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/bertbench

setup: $(BIN)/bertbench

# Two workers, each taking whole test files (a module's fixtures run once): most of the suite's time is
# subprocesses and imports, which two cores overlap. Files are handed out longest first, in the order
# tests/conftest.py gives them (tests/durations.json), not xdist's by-test-count order. The 30 slowest tests are
# listed at the end.
test: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=30

# tcmalloc, when installed (Debian: libtcmalloc-minimal4), made training steps 1.3-1.7x faster here
# (`bertbench bench` reports whether it is preloaded); never required.
TCMALLOC := $(wildcard /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4)

# The main job is the cpu-quick study; `make study PRESET=cpu-hour` runs another (recipes/presets/), the same way.
demo: study

study: setup
	LD_PRELOAD=$(TCMALLOC) HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/bertbench run --preset $(PRESET) --data-dir $(DATA_DIR) --out $(OUT)

# The committed study: result records (and the pre-training curves and stage times) copied from a run
# into leaderboards/records/PRESET, so that `make leaderboard` regenerates the tables and plots from the
# repository alone, byte for byte, without re-running anything. The losing grid points (*.grid.json, the
# learning rates that selection compared and did not pick) are kept too, so a selection can be re-checked.
RECORDS := leaderboards/records/$(PRESET)

archive:
	rm -rf $(RECORDS) && mkdir -p $(RECORDS)
	cd $(OUT) && find results \( -name '*.record.json' -o -name '*.grid.json' -o -name preregistration.yaml -o -name preregistration-log.yaml \) -exec cp --parents {} $(CURDIR)/$(RECORDS) \;
	cd $(OUT) && find pretrain -maxdepth 2 \( -name metrics.csv -o -name summary.json \) -exec cp --parents {} $(CURDIR)/$(RECORDS) \;
	cp $(OUT)/stages*.json $(RECORDS)/

# Each committed study has its page, docs/studies/PRESET.md, whose generated block
# (`<!-- bertbench report: begin PRESET -->`) is regenerated too; `make studies-table` then regenerates the
# README's table of studies from every committed study's records.
leaderboard: setup
	rm -rf leaderboards/plots/$(PRESET)
	$(BIN)/bertbench report $(RECORDS) --out leaderboards/$(PRESET).md --csv leaderboards/$(PRESET).csv --plots leaderboards/plots/$(PRESET) --embed docs/studies/$(PRESET).md --index

studies-table: setup
	$(BIN)/bertbench report leaderboards/records --studies docs/studies --embed README.md

clean:
	rm -rf $(VENV) runs
