# The two commands of the README:  `make run` (set up, then the main job) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check

.PHONY: setup browser run test test-fast test-stress bench notebooks docs docs-images
setup: $(VENV)/.installed

# The CPU build of PyTorch first: an unpinned `torch` would pull a multi-gigabyte CUDA build.
# The `jets` extra (Pythia 8, FastJet, pandas) too, so the tests of `attnlab data jets` run, and
# the `docs` extra (mkdocs), so the tests build the docs site.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -e ".[dev,jets,docs]"
	touch $@

# Every `make run` trains into a new directory, runs/reverse-YYYYMMDD-HHMMSS, and deletes
# nothing: earlier runs stay where they are. runs/reverse-latest is then pointed at the new run,
# but only when it is missing or is a symlink to a runs/reverse-* directory (one this target
# made); a real directory or any other file of that name is left alone. The run's path is
# printed at the end.
run: setup
	@out=runs/reverse-$$(date +%Y%m%d-%H%M%S); \
	$(VENV)/bin/attnlab train reverse --out $$out || exit $$?; \
	link=runs/reverse-latest; \
	if [ ! -e $$link ] && [ ! -L $$link ] || readlink $$link | grep -qx 'reverse-[0-9-]*'; then \
		ln -sfn $${out#runs/} $$link && echo "the run: $$out (also $$link)"; \
	else \
		echo "the run: $$out ($$link is not a link made by make run: left as it is)"; \
	fi

# The explorer's browser tests drive Debian's Chromium through its ChromeDriver (Selenium, in the
# dev extra). Installed once, as root, when missing; a test tool's own browser download cannot
# work on a machine that reaches only the package registries.
# fonts-dejavu-extra: an OpenType math font, without which Chromium draws MathML's stretchy
# fences small and Σ's limits off-centre (the docs site's formulas are tested in it).
MATH_FONT := /usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && [ -f $(MATH_FONT) ] || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver fonts-dejavu-extra >/dev/null; }

# Every test and the library's docstring examples (pyproject.toml: testpaths and addopts).
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on
# CI's machines): without it each pytest worker compiles and assertion-rewrites every module
# again (10 s of CPU each), and so does each of the ~90 Python processes the tests start
# (about 1 s each): a minute of a fresh clone's suite, a third of the inner loop's.
test: setup browser
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2

# The inner loop, 36 s on 2 cores when benchmarks/RESULTS.md last timed it: all but the tests
# marked slow (those that train a run, start a process, compile, generate jets or take over
# about a second).
test-fast: setup browser
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 -m "not slow"

# A suite that passes every time: `make test`'s command 5 times as it is, 3 times with every core
# kept busy by another process and once in a shuffled order, one row a run (load, minutes,
# failures); the last campaign benchmarks/RESULTS.md records took 76 minutes on two cores, for a
# suite half today's size. ARGS=--write appends the table to benchmarks/RESULTS.md.
test-stress: setup browser
	$(PY) -m benchmarks.suite_stress $(ARGS)

bench: setup
	$(PY) -m benchmarks

# Re-run every notebook of examples/ at full size and save its outputs in place (10-20 min on
# two cores; 05_jets, which generates and trains on 10,000 jets, takes half of it).
notebooks: setup
	$(PY) -m examples.run

# Renew the docs' two screenshots from the code as it is: docs/images/attention_explorer.png,
# the explorer on a freshly trained reversal run, taken by its browser test (seconds), and
# docs/images/attention_explorer_translate.png, on a German number translator, by its script.
# That script trains the translator with the defaults (600 steps: 19 minutes measured on two
# cores at a load average of 7 to 11) unless TRANSLATE_RUN names one already trained, reused:
#   make docs-images TRANSLATE_RUN=runs/de
# The suite checks only the pictures' size and that they are not blank: their pixels change with
# the CPU's kernels and the font, so run this after changing the explorer's page and commit them.
TRANSLATE_RUN ?=
docs-images: setup browser
	$(PY) -m pytest -q tests/explorer/test_page_browser.py -k screenshot_at_1280
	cp build/test-artifacts/attention_explorer.png docs/images/attention_explorer.png
	$(PY) docs/figures/attention_explorer_translate.py $(if $(TRANSLATE_RUN),--run "$(TRANSLATE_RUN)")

# The docs site into site/: docs/ pages, the notebooks as committed, the API reference; strict,
# so a broken link or a docstring that does not render stops the build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
