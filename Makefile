# Two entry points for a fresh machine: `make run` (the flywheel on embedded defaults) and
# `make test`. Both set up what they need first (idempotent: later runs start at once).
VENV ?= .venv
# The first Python 3.12 that really runs (a pyenv shim may exist without 3.12 selected).
PY ?= $(shell for c in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	"$$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && echo "$$c" && break; done)
EXTRAS ?= dev,train,embedded,postgres
PYTEST_ARGS ?=
# Test processes (pytest-xdist); `make test PYTEST_WORKERS=0` runs in one process.
PYTEST_WORKERS ?= 2
export LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=1 HARBOR_TELEMETRY=0
# llama-cpp-python (the embedded extra) compiles llama.cpp: skip its tools (~6 min instead of ~12).
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: setup system bases test test-slow typecheck architecture run bench coldstart

# The engine (podman, rootful, with runc and catatonit for --init), debootstrap for the offline
# base image, Chromium and a font for the viewer's browser tests, and slirp4netns for a task granted the
# internet (a user-mode network without the host's loopback), PostgreSQL's server for the store and
# checkpointer tests on PostgreSQL (tests/postgres_server.py). Each package is checked by the file
# it provides, so a set-up machine starts at once.
SYSTEM_PACKAGES = /usr/bin/podman:podman /usr/sbin/runc:runc /usr/bin/newuidmap:uidmap \
	/usr/bin/catatonit:catatonit /usr/sbin/debootstrap:debootstrap /usr/bin/chromium:chromium \
	/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core \
	/usr/bin/slirp4netns:slirp4netns /usr/lib/postgresql/15/bin/initdb:postgresql \
	/usr/sbin/mkfs.ext4:e2fsprogs /usr/bin/mount:mount

system:
	@missing=""; for pair in $(SYSTEM_PACKAGES); do \
	  [ -e "$${pair%%:*}" ] || missing="$$missing $${pair##*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing with apt-get"; \
	  (apt-get install -y --no-install-recommends $$missing || \
	   (apt-get update -qq && apt-get install -y --no-install-recommends $$missing)); fi

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	@test -n "$(PY)" || (echo "python3.12 not found: install Python 3.12" && exit 1)
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	@echo "installing the package with [$(EXTRAS)] into $(VENV): the first time ~10-15 min (torch; llama.cpp"
	@echo "compiles from source for the embedded extra, ~6 min); pip's cache makes later installs ~1 min"
	@started=$$(date +%s); $(VENV)/bin/pip install -q -e '.[$(EXTRAS)]' && \
	  echo "installed in $$(( $$(date +%s) - started )) s"
	touch $@

# The offline base image, imported into podman once per machine (debootstrap ~1.5-2.5 min the
# first time; later runs find it and return in seconds). Tests never build it: they fail if it is
# missing.
bases: system $(VENV)/.installed-$(EXTRAS)
	@echo "the offline base image (debootstrap the first time, ~1.5-2.5 min; then found at once)"
	$(VENV)/bin/python -m autoenvscaling.tools.sandbox.bases

setup: system $(VENV)/.installed-$(EXTRAS) bases

# The default tier: everything but the `slow` end-to-end tier (whole flywheel rounds, the seed
# pool through the gate, the embedded model server). CI runs both tiers (.ci/run).
test: setup
	$(VENV)/bin/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist worksteal -m "not slow and not long" $(PYTEST_ARGS)

# `serial` tests run after the rest, alone: Harbor's podman type (podman-compose) has lost
# containers under the parallel tier's load, three times in four CI runs, never alone.
test-slow: setup
	$(VENV)/bin/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist worksteal -m "slow and not long and not serial" $(PYTEST_ARGS)
	$(VENV)/bin/python -m pytest -q -rs -m "slow and serial and not long" $(PYTEST_ARGS)

# The type checker over the package (config: [tool.pyright] in pyproject.toml); fails on any error.
typecheck: $(VENV)/.installed-$(EXTRAS)
	$(VENV)/bin/pyright --pythonpath $(VENV)/bin/python

# Redraw ARCHITECTURE.md's flywheel diagram from the compiled graph (tests/test_architecture.py
# fails until the committed file matches).
architecture: $(VENV)/.installed-$(EXTRAS)
	$(VENV)/bin/python -m tests.architecture_doc

# The embedded policy's cold start (graphs/cold_start.py): both roles' verified episodes replayed
# and an SFT on them, built once per machine (tens of minutes on 2 cores; then found at once).
coldstart: setup
	$(VENV)/bin/autoenvscaling cold-start

# `make run ROUNDS=3`: more rounds, each starting where the last one left the policy.
ROUNDS ?= 1
run: setup coldstart
	$(VENV)/bin/autoenvscaling run --rounds $(ROUNDS)

bench: setup
	$(VENV)/bin/python benchmarks/run_all.py
