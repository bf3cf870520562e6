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
# Built for any x86-64 CPU with AVX2, never for the build host's (GGML_NATIVE=OFF): a native build on
# a host that advertises AVX-512 and AMX segfaulted in decode on every multi-token prompt there.
# tools/serving/cpu_support.py checks at start that what the library reports is what this CPU has.
LLAMA_CPU_ARGS = -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF $(LLAMA_CPU_ARGS)
# pip's wheel cache keys a built wheel by its source, not by CMAKE_ARGS: a wheel built natively
# earlier on this machine (or copied with its cache) would be installed again. The wheel is built
# once into a folder named by its version and CMAKE_ARGS, and installed from there.
LLAMA_VERSION = $(shell sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)
WHEELHOUSE = $(HOME)/.cache/autoenvscaling/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(shell printf '%s' '$(CMAKE_ARGS)' | sha256sum | cut -c1-12)

.PHONY: test-security-runsc setup system bases test test-slow typecheck docs architecture run bench coldstart learn \
	learn-proposer

# The engine (podman, rootful, with runc and catatonit for --init), debootstrap for the offline
# base image, Chromium and a font for the viewer's browser tests, and slirp4netns for a task granted the
# internet (a user-mode network without the host's loopback), PostgreSQL's server for the store and
# checkpointer tests on PostgreSQL (tests/postgres_server.py). Each package is checked by the file
# it provides, so a set-up machine starts at once. Then runsc (gVisor: a user-space kernel, the
# sandboxes' second runtime, tools/sandbox/runtimes.py), pinned to Debian trixie's build and checked
# by its version: bookworm's breaks `ls` and `stat` inside (tools/sandbox/install-runsc.sh says why).
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
	@sh tools/sandbox/install-runsc.sh

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	@test -n "$(PY)" || (echo "python3.12 not found: install Python 3.12" && exit 1)
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	@echo "installing the package with [$(EXTRAS)] into $(VENV): the first time ~10-15 min (torch; llama.cpp"
	@echo "compiles from source for the embedded extra, ~6 min); pip's cache makes later installs ~1 min"
	@started=$$(date +%s); \
	if echo ',$(EXTRAS),' | grep -q ',embedded,' && ! ls $(WHEELHOUSE)/*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python $(LLAMA_VERSION) for any AVX2 CPU into $(WHEELHOUSE)"; \
	  rm -rf $(WHEELHOUSE).$$$$ && $(VENV)/bin/pip wheel -q --no-deps --no-cache-dir -w $(WHEELHOUSE).$$$$ \
	    'llama-cpp-python==$(LLAMA_VERSION)' && (mv -T $(WHEELHOUSE).$$$$ $(WHEELHOUSE) 2>/dev/null || rm -rf $(WHEELHOUSE).$$$$); fi && \
	$(VENV)/bin/pip install -q --find-links $(WHEELHOUSE) -e '.[$(EXTRAS)]' && \
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

# The red-team suite again with every sandbox under runsc (gVisor; tools/sandbox/runtimes.py):
# `make test` runs it under runc. Fails where runsc cannot run a sandbox (`make system` installs it).
test-security-runsc: setup
	AUTOENVSCALING_SANDBOX_RUNTIME=runsc $(VENV)/bin/python -m pytest -q -rs -n $(PYTEST_WORKERS) --dist worksteal tests/security $(PYTEST_ARGS)

# The type checker over the package (config: [tool.pyright] in pyproject.toml); fails on any error.
typecheck: $(VENV)/.installed-$(EXTRAS)
	$(VENV)/bin/pyright --pythonpath $(VENV)/bin/python

# The docs site from docs/ into site/ (mkdocs.yml). Strict: a broken link, a missing page or a
# missing include fails the build (not `-q`: MkDocs counts no warning below its log level).
docs: $(VENV)/.installed-$(EXTRAS)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# Redraw ARCHITECTURE.md's flywheel diagram from the compiled graph (tests/test_architecture.py
# fails until the committed file matches).
architecture: $(VENV)/.installed-$(EXTRAS)
	$(VENV)/bin/python -m tests.architecture_doc

# The embedded policy's cold start (graphs/cold_start/start.py): both roles' verified episodes replayed
# and an SFT on them, built once per machine (tens of minutes on 2 cores; then found at once).
coldstart: setup
	$(VENV)/bin/autoenvscaling cold-start

# `make run ROUNDS=3`: more rounds, each starting where the last one left the policy.
ROUNDS ?= 1
run: setup coldstart
	$(VENV)/bin/autoenvscaling run --rounds $(ROUNDS)

# `make learn`: the learning demonstration (README "Learning on held-out variants"): the `learn`
# preset (32 training and 32 held-out line-count variants, no proposers, K = 4 GRPO steps a
# round, a held-out point before round 1 and after each), then the curve (reports/curve.json,
# curve.png). `make learn LEARN_ROUNDS=1 LEARN_ARGS="--train-steps 8"` (any `run` option).
LEARN_ROUNDS ?= 3
LEARN_ARGS ?=
ifndef LEARN_DIR
LEARN_DIR := runs/learn-$(shell date +%Y%m%d-%H%M%S)
endif
learn: setup coldstart
	$(VENV)/bin/autoenvscaling run --preset learn --rounds $(LEARN_ROUNDS) --run-dir $(LEARN_DIR) \
		$(LEARN_ARGS); status=$$?; \
	$(VENV)/bin/python -m autoenvscaling.tools.report.curve $(LEARN_DIR); exit $$status

# `make learn-proposer ARM=graded`: the proposer's demonstration: the `learn-proposer` preset
# (four proposers share a training brief, proposer GRPO with the ARM reward, gate or graded; the
# served proposer on 6 held-out briefs x 2 before round 1 and after each), then the curve.
ARM ?= graded
learn-proposer: setup coldstart
	$(VENV)/bin/autoenvscaling run --preset learn-proposer --proposer-reward $(ARM) \
		--rounds $(LEARN_ROUNDS) --run-dir $(LEARN_DIR) $(LEARN_ARGS); status=$$?; \
	$(VENV)/bin/python -m autoenvscaling.tools.report.curve $(LEARN_DIR); exit $$status

bench: setup
	$(VENV)/bin/python benchmarks/run_all.py
