# The two commands of the README:  `make run` (set up, then the main job) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check

.PHONY: setup run test bench
setup: $(VENV)/.installed

# The CPU build of PyTorch first: an unpinned `torch` would pull a multi-gigabyte CUDA build.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -e ".[dev]"
	touch $@

# The latest run is always runs/reverse; a second `make run` first moves the previous one to
# runs/reverse.previous (replacing an older one), so nothing piles up and nothing fails.
run: setup
	@if [ -e runs/reverse ]; then rm -rf runs/reverse.previous && mv runs/reverse runs/reverse.previous; fi
	$(VENV)/bin/attnlab train reverse --out runs/reverse

test: setup
	$(PY) -m pytest -q -n 2

bench: setup
	$(PY) -m benchmarks
