# Swiftplex — the two commands that matter: `make run` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
SYSTEM_PACKAGES := libsodium-dev libyaml-dev libsqlite3-dev pkg-config zbar-tools

.PHONY: run test python-test deps build release bench clean plugins

# Installs the system libraries Swiftplex links against, when they are missing.
deps:
	@missing=""; \
	for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# The built-in plugins as lib<name>.so in the build directory.
plugins:
	$(SWIFT) build --product auto-accept
	$(SWIFT) build --product auto-reply
	$(SWIFT) build --product broadcast

# The main job: the bot host on config/bot.yaml — an embedded relay on 127.0.0.1:5223, an
# auto-accept plugin with a welcome and an echoing auto-reply plugin. It prints the relay address
# and the bot's contact address (link and QR code); talk to it with swiftplex-chat. Ctrl-C stops.
CONFIG ?= config/bot.yaml
run: deps
	@for p in swiftplex swiftplex-plugin-runner swiftplex-chat auto-accept auto-reply broadcast; do \
	  echo "building $$p"; $(SWIFT) build --product $$p || exit 1; done
	$$($(SWIFT) build --show-bin-path)/swiftplex run --config $(CONFIG)

# All tests: unit tests and the live ones (real TLS on loopback, real SQLite files, real
# processes), then the official SimpleX Python library against libsimplex.so.
# Products the tests run as processes or load with dlopen.
TEST_PRODUCTS := simplex swiftplex swiftplex-plugin-runner swiftplex-test-plugin swiftplex-relay swiftplex-chat \
	auto-accept auto-reply broadcast
test: deps
	$(SWIFT) build --build-tests
	@for p in $(TEST_PRODUCTS); do echo "building $$p"; $(SWIFT) build --product $$p || exit 1; done
	@set -o pipefail; $(SWIFT) test --skip-build 2>&1 | tee .build/test.log
	@n=$$(grep -oE 'Test run with [0-9]+ tests?' .build/test.log | grep -oE '[0-9]+' | tail -n 1); \
	  echo "swift: $${n:-0} passed, 0 failed"
	@$(MAKE) --no-print-directory python-test

# The Python environment for the library tests (simplex-chat 7.0.2 from PyPI).
VENV ?= .venv
PY_PACKAGE := simplex-chat==7.0.2
$(VENV)/.installed:
	@if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-venv; fi
	python3 -m venv $(VENV)
	@if $(VENV)/bin/pip install -q $(PY_PACKAGE); then touch $@; else \
	  echo "################################################################"; \
	  echo "# SKIPPING the Python library tests: cannot install $(PY_PACKAGE)"; \
	  echo "# from PyPI (no network?). libsimplex.so is NOT tested this run."; \
	  echo "################################################################"; fi

python-test: $(VENV)/.installed
	@if [ -f $(VENV)/.installed ]; then \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_python_bot.py; fi

# Benchmarks (release build). BENCH=relay|libsimplex|echo ; extra flags in BENCH_ARGS.
BENCH ?= relay
bench: release
	$$($(SWIFT) build -c release --show-bin-path)/swiftplex-bench $(BENCH) $(BENCH_ARGS)

clean:
	rm -rf .build
