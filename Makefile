# make lab | make test | make exercises | make bench | make clean
# Every target sets up .venv first if it is missing (or older than the dependency files).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Two workers suit a 2-core laptop and CI; override with `make test JOBS=4`.
JOBS   ?= 2

.PHONY: install lab test exercises bench clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -n "$(PYTHON)" || { echo "Python 3.10+ is needed (python3.11 or python3 on PATH)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

lab: install
	$(BIN)/course lab

test: install
	@command -v chromium >/dev/null || echo "Chromium not found: the browser tests (tests/browser/) are skipped (apt-get install chromium)"
	@command -v bwrap >/dev/null || echo "bubblewrap not found: the grader's sandbox tests are skipped (apt-get install bubblewrap)"
	$(BIN)/python -m pytest -n $(JOBS)

exercises: install
	$(BIN)/course build

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info course_lib/*.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
