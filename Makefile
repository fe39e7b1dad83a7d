# Two commands for a fresh machine:  `make demo` (the main job)  and  `make test` (the test suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= ../shared/data
OUT ?= runs/demo

.PHONY: setup test demo clean

# torch first, pinned: 2.13.0 is the CPU build on this disk; an open range would pull a multi-GB CUDA build.
$(BIN)/bertbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/bertbench

setup: $(BIN)/bertbench

test: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q

demo: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/bertbench run --preset cpu-quick --data-dir $(DATA_DIR) --out $(OUT)

clean:
	rm -rf $(VENV) runs
