# make lab | make test | make quick | make lint | make exercises | make bench | make run NB=... | make clean
# Every target sets up .venv first if it is missing (or older than the dependency files).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Two workers suit a 2-core laptop and CI; override with `make test JOBS=4`.
JOBS   ?= 2

.PHONY: install lab test quick lint exercises bench run clean

# `make quick` keeps compiled modules (and pytest its rewritten test modules) in one folder inside .venv,
# even where the environment asks Python not to write bytecode (PYTHONDONTWRITEBYTECODE): without them each
# run compiles course_lib again and every pytest worker rewrites every test module (about 20 s of a run).
# `make test`, which CI runs once on a fresh clone, gains nothing from them and keeps to the environment.
CACHED := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache

install: $(STAMP)

# Two packages, both editable: course_lib (the learners' library, the root project) and course_grader (the
# teacher's tools, its own project in course_grader/), released together.
$(STAMP): pyproject.toml course_grader/pyproject.toml constraints.txt
	@test -n "$(PYTHON)" || { echo "Python 3.10+ is needed (python3.11 or python3 on PATH)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,site]" -e ./course_grader
	@touch $(STAMP)

lab: install
	$(BIN)/course lab

# The whole suite, after the linter: the library's tests, every notebook under nbval, the grader in
# its sandbox and the browser tests; the slowest tests are listed at the end.
test: install lint
	@command -v chromium >/dev/null || echo "Chromium not found: the browser tests (tests/browser/) are skipped (apt-get install chromium)"
	@command -v bwrap >/dev/null || echo "bubblewrap not found: the grader's sandbox tests are skipped (apt-get install bubblewrap)"
	$(BIN)/python -m pytest -n $(JOBS) --durations=20

# The quick loop while editing (about a minute): everything that starts no kernel, sandbox or browser.
quick: install
	$(CACHED) $(BIN)/python -m pytest -n $(JOBS) -m "not slow"

# ruff's linter and formatter, configured in pyproject.toml; notebooks have their own layout test.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

exercises: install
	$(BIN)/course build

bench: install
	$(BIN)/python -m bench

# Re-run notebooks top to bottom and store their outputs, in the environment the tests check them in
# (no progress bars, one torch thread, the reference data folder when it is there):
#   make run NB="notebooks/04_word_vectors.ipynb solutions/04_word_vectors.ipynb"
DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
run: install
	@test -n "$(NB)" || { echo 'name the notebooks: make run NB="notebooks/NN_name.ipynb ..."'; exit 2; }
	TQDM_DISABLE=1 OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore::DeprecationWarning \
	$(if $(DATA_DIR),COURSE_DATA_DIR=$(DATA_DIR)) \
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 \
	    --ExecutePreprocessor.record_timing=False $(NB)
	$(BIN)/course colab >/dev/null  # the Colab cell is stored unrun, as `course colab` writes it

clean:
	rm -rf $(VENV) build *.egg-info course_lib/*.egg-info course_grader/*.egg-info course_grader/build .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# The course's website from the notebooks' stored outputs (nothing is run): make site, then open
# docs/site/_build/html/index.html, or publish that folder on any static host (see the README).
# It installs the `site` extra's packages (pyproject.toml) once, without reinstalling the course.
SITE_STAMP := $(VENV)/.site-installed
.PHONY: site
site: $(SITE_STAMP)
	$(BIN)/python docs/site/build.py

$(SITE_STAMP): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python docs/site/build.py --requirements > $(VENV)/site-requirements.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -r $(VENV)/site-requirements.txt
	@touch $(SITE_STAMP)
