# Swiftplex — the two commands that matter: `make run` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
SYSTEM_PACKAGES := libsodium-dev libyaml-dev libsqlite3-dev pkg-config zbar-tools
# The throwaway PostgreSQL server of `make test` (the relay's PostgreSQL store, docs/postgres.md).
TEST_PACKAGES := postgresql-15
PG_BIN ?= /usr/lib/postgresql/15/bin

.PHONY: run test python-test browser-deps test-deps deps build release bench clean plugins fuzz fuzz-build fuzz-seeds fuzz-replay

# Installs the system libraries Swiftplex links against, when they are missing.
deps:
	@missing=""; \
	for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# What only the tests need (PostgreSQL 15 from Debian), when it is missing.
test-deps:
	@missing=""; \
	for p in $(TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

# Every shipped product in release mode. Not a plain `swift build -c release`: the fuzz driver
# (swiftplex-fuzz) reaches internals with @testable imports, which a release build refuses.
RELEASE_PRODUCTS ?= swiftplex swiftplex-relay swiftplex-chat swiftplex-plugin-runner swiftplex-bench simplex \
	auto-accept auto-reply broadcast channel-relay channel group-moderator
release: deps
	@for p in $(RELEASE_PRODUCTS); do $(SWIFT) build -c release --product $$p || exit 1; done

# The built-in plugins as lib<name>.so in the build directory.
plugins:
	$(SWIFT) build --product auto-accept
	$(SWIFT) build --product auto-reply
	$(SWIFT) build --product broadcast
	$(SWIFT) build --product group-moderator
	$(SWIFT) build --product channel-relay
	$(SWIFT) build --product channel

# The main job: the bot host on config/bot.yaml — an embedded relay on 127.0.0.1:5223, an
# auto-accept plugin with a welcome and an echoing auto-reply plugin. It prints the relay address
# and the bot's contact address (link and QR code); talk to it with swiftplex-chat. Ctrl-C stops.
CONFIG ?= config/bot.yaml
run: deps
	@for p in swiftplex swiftplex-plugin-runner swiftplex-chat auto-accept auto-reply broadcast group-moderator channel-relay channel; do \
	  echo "building $$p"; $(SWIFT) build --product $$p || exit 1; done
	$$($(SWIFT) build --show-bin-path)/swiftplex run --config $(CONFIG)

# All tests: unit tests and the live ones (real TLS on loopback, real SQLite files, real
# processes), then the official SimpleX Python library against libsimplex.so.
# Products the tests run as processes or load with dlopen.
ENGINE_SUITES := ChatAPITests|ChatModelTests|ChatServerTests|AgentTests
# The engine suites run a second time with the engines' data in PostgreSQL (SWIFTPLEX_TEST_ENGINE_DB),
# but for those that reach into the SQLite files themselves (fault triggers, archives, store copy).
PG_ENGINE_SUITES := ChatAPITests|ChatServerTests
SQLITE_ONLY_SUITES := ChatStoreFaultTests|ConnectionDeletionTests|EngineStoreCopyTests
# Starvation: the engine, host and server suites run with Swift's concurrency pool cut to one
# thread (LIBDISPATCH_COOPERATIVE_POOL_STRICT=1), so one blocked
# pool thread stalls every engine and server under test; every Swift test run reports each
# blocking wait entered on the pool (SWIFTPLEX_BLOCKING_CHECK=log), and
# Tests/Support/blocking_report.py then fails the run on any that Swiftplex's own code made
# (docs/architecture.md, "Blocking work").
STARVED_SUITES := $(ENGINE_SUITES)|BotHostTests
CHECKED := SWIFTPLEX_BLOCKING_CHECK=log
STARVED := LIBDISPATCH_COOPERATIVE_POOL_STRICT=1 $(CHECKED)
TEST_PRODUCTS := simplex swiftplex swiftplex-plugin-runner swiftplex-test-plugin swiftplex-relay swiftplex-chat \
	auto-accept auto-reply broadcast group-moderator channel-relay channel swiftplex-fuzz
# Each phase of `make test` prints the wall-clock time it ended at, seconds since the start.
TEST_START := $(shell date +%s)
# PHASE_AT is the shell command (for use inside a recipe's shell line); PHASE a recipe line of it.
PHASE_AT = echo "[make test] $(1) done at $$(( $$(date +%s) - $(TEST_START) )) s"
PHASE = @$(call PHASE_AT,$(1))
test: deps test-deps
	$(call PHASE,system packages)
	@dump=$$(mktemp); $(SWIFT) package dump-package > $$dump && python3 Tests/Support/layers.py $$dump; rc=$$?; rm -f $$dump; exit $$rc
	$(SWIFT) build --build-tests
	@for p in $(TEST_PRODUCTS); do echo "building $$p"; $(SWIFT) build --product $$p || exit 1; done
	$(call PHASE,build)
	@# The Swift tests run in two processes (the engine and host suites, then the rest), which keeps the
	@# number of live relays, engines and child processes in one process moderate. A throwaway
	@# PostgreSQL 15 (Tests/Support/postgres/cluster.sh: initdb into a temporary directory, a free
	@# port on 127.0.0.1) serves the relay's PostgreSQL tests through SWIFTPLEX_TEST_POSTGRES; it is
	@# stopped and removed at the end, whatever the tests did.
	@set -o pipefail; pgdir=$$(mktemp -d /tmp/swiftplex-pg.XXXXXX); \
	trap 'PG_BIN=$(PG_BIN) Tests/Support/postgres/cluster.sh stop '"$$pgdir" EXIT; \
	url=$$(PG_BIN=$(PG_BIN) Tests/Support/postgres/cluster.sh start $$pgdir) || exit 1; \
	echo "PostgreSQL for the tests: $$url"; \
	$(STARVED) SWIFTPLEX_TEST_POSTGRES=$$url $(SWIFT) test --skip-build --filter "$(STARVED_SUITES)" 2>&1 | tee .build/test--filter.log || exit 1; \
	$(call PHASE_AT,engine and host suites (starved)); \
	$(CHECKED) SWIFTPLEX_TEST_POSTGRES=$$url $(SWIFT) test --skip-build --skip "$(STARVED_SUITES)" 2>&1 | tee .build/test--skip.log || exit 1; \
	$(call PHASE_AT,other suites); \
	echo "The engine suites with the engines' data in PostgreSQL:"; \
	$(CHECKED) SWIFTPLEX_TEST_ENGINE_DB=postgres SWIFTPLEX_TEST_POSTGRES=$$url $(SWIFT) test --skip-build --filter "$(PG_ENGINE_SUITES)" \
	  --skip "$(SQLITE_ONLY_SUITES)" 2>&1 | tee .build/test-postgres.log || exit 1
	$(call PHASE,engine suites on PostgreSQL)
	@cat .build/test--filter.log .build/test--skip.log .build/test-postgres.log > .build/test.log
	@python3 Tests/Support/blocking_report.py .build/test.log
	@n=0; for k in $$(grep -oE 'Test run with [0-9]+ tests?' .build/test.log | grep -oE '[0-9]+'); do n=$$((n + k)); done; \
	  echo "swift: $$n passed, 0 failed"
	@$(MAKE) --no-print-directory python-test
	$(call PHASE,Python library and browser tests)
	@$(MAKE) --no-print-directory fuzz-replay
	@if [ "$(FUZZ_CI_SECONDS)" != "0" ]; then $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_CI_SECONDS); fi
	$(call PHASE,all)

# The Python environment for the library tests (simplex-chat 7.0.2 from PyPI) and the
# WebSocket/admin API tests (websockets). The stamp names the package list, so a changed list
# installs again.
VENV ?= .venv
PY_PACKAGE := simplex-chat==7.0.2 websockets==15.0.1 selenium==4.38.0
PY_STAMP := $(VENV)/.installed-$(shell echo '$(PY_PACKAGE)' | md5sum | cut -c1-8)
$(PY_STAMP):
	@if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-venv; fi
	python3 -m venv $(VENV)
	@if $(VENV)/bin/pip install -q $(PY_PACKAGE); then touch $@ $(VENV)/.installed; else \
	  echo "################################################################"; \
	  echo "# SKIPPING the Python library tests: cannot install $(PY_PACKAGE)"; \
	  echo "# from PyPI (no network?). libsimplex.so is NOT tested this run."; \
	  echo "################################################################"; fi

# The dashboard's browser test drives Debian's headless Chromium through its chromedriver.
BROWSER_PACKAGES := chromium chromium-driver
browser-deps:
	@missing=""; \
	for p in $(BROWSER_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

python-test: $(PY_STAMP) browser-deps
	@if [ -f $(PY_STAMP) ]; then \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_python_bot.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_python_groups.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_python_group_bot.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_python_channels.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_db_archive.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_ws_api.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_cli_compat.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) $(VENV)/bin/python Tests/python/test_browser_origin.py && \
	  for engine in swiftplex libsimplex websocket; do \
	    SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) SWIFTPLEX_ARTIFACTS=.build/test-artifacts \
	      $(VENV)/bin/python Tests/python/test_dashboard.py $$engine || exit 1; done && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) SWIFTPLEX_ARTIFACTS=.build/test-artifacts \
	    $(VENV)/bin/python Tests/python/test_dashboard_bots.py && \
	  SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) SWIFTPLEX_ARTIFACTS=.build/test-artifacts \
	    $(VENV)/bin/python Tests/python/test_dashboard_channels.py; fi
	@# The library's suites again with the engines on PostgreSQL (the library's PostgresDb): a
	@# throwaway PostgreSQL 15, stopped and removed at the end.
	@if [ -f $(PY_STAMP) ] && [ -x $(PG_BIN)/initdb ]; then \
	  set -e; pgdir=$$(mktemp -d /tmp/swiftplex-pg.XXXXXX); \
	  trap 'PG_BIN=$(PG_BIN) Tests/Support/postgres/cluster.sh stop '"$$pgdir" EXIT; \
	  url=$$(PG_BIN=$(PG_BIN) Tests/Support/postgres/cluster.sh start $$pgdir); \
	  for t in test_python_bot test_python_groups test_python_group_bot test_python_channels; do \
	    SIMPLEX_LIBS_DIR=$$($(SWIFT) build --show-bin-path) SWIFTPLEX_PY_POSTGRES=$$url $(VENV)/bin/python Tests/python/$$t.py; done; \
	elif [ -f $(PY_STAMP) ]; then echo "note: no PostgreSQL 15 in $(PG_BIN): the library's PostgreSQL runs are left out (make test installs it)"; fi

# Benchmarks (release build). BENCH=<a swiftplex-bench mode>: relay, relay-store, sql-store, relay-abuse,
# relay-clients, libsimplex, echo, group, channel, contacts, dispatch, json; extra flags in BENCH_ARGS.
# docs/performance.md has every command and its latest figures.
BENCH ?= relay
# The products the modes load or start besides the bench itself (plugins, the plugin runner, the
# library and the terminal client as foreign engines).
BENCH_PRODUCTS := swiftplex-bench swiftplex-plugin-runner swiftplex-test-plugin simplex swiftplex-chat auto-accept auto-reply
bench: deps
	@for p in $(BENCH_PRODUCTS); do echo "building $$p (release)"; $(SWIFT) build -c release --product $$p || exit 1; done
	$$($(SWIFT) build -c release --show-bin-path)/swiftplex-bench $(BENCH) $(BENCH_ARGS)

# Fuzzing (docs/security.md "Fuzzing"): every libFuzzer target in turn for FUZZ_SECONDS each
# (or FUZZ_RUNS inputs each), starting from the committed seeds (Fuzz/Corpus/<target>) and what
# earlier runs kept (.build-fuzz/corpus/<target>). Built with -sanitize=fuzzer,address into
# .build-fuzz, apart from the normal build. A crash stops it: the input is saved as
# .build-fuzz/crashes/<target>/crash-* and replays with `.build-fuzz/debug/swiftplex-fuzz <target> FILE`.
# `make test FUZZ_CI_SECONDS=N` adds N seconds of it per target (the default 0 leaves it out:
# the ASan build alone would take a third of the CI budget); `make test` replays the corpora.
FUZZ_SECONDS ?= 60
FUZZ_CI_SECONDS ?= 0
FUZZ_RUNS ?=
FUZZ_FLAGS ?=
FUZZ_TARGETS ?= relay-block relay-transmission agent-envelope ratchet-frame links chat-command \
	json json-hostconfig json-pluginkit yaml-config plugin-frames group-message channel-message
FUZZ_BIN := .build-fuzz/debug/swiftplex-fuzz

fuzz-build: deps
	$(SWIFT) build --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING --product swiftplex-fuzz

fuzz: fuzz-build
	@limit="-max_total_time=$(FUZZ_SECONDS)"; if [ -n "$(FUZZ_RUNS)" ]; then limit="-runs=$(FUZZ_RUNS)"; fi; \
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p .build-fuzz/corpus/$$t .build-fuzz/crashes/$$t .build-fuzz/logs; \
	  log=.build-fuzz/logs/$$t.log; start=$$(date +%s); \
	  if ! SWIFT_BACKTRACE=enable=no $(FUZZ_BIN) $$t $$limit -timeout=30 -print_final_stats=1 -artifact_prefix=.build-fuzz/crashes/$$t/ $(FUZZ_FLAGS) \
	      .build-fuzz/corpus/$$t Fuzz/Corpus/$$t > $$log 2>&1; then \
	    tail -n 40 $$log; echo "fuzz: $$t FAILED (log $$log, input in .build-fuzz/crashes/$$t/)"; exit 1; fi; \
	  runs=$$(grep -oE 'stat::number_of_executed_units: *[0-9]+' $$log | grep -oE '[0-9]+$$'); \
	  cov=$$(grep -oE 'cov: [0-9]+' $$log | tail -n 1); \
	  echo "fuzz: $$t: $${runs:-?} inputs in $$(( $$(date +%s) - start )) s, $$cov, 0 crashes"; \
	done

# Replays every committed seed corpus (Fuzz/Corpus/<target>) through its target in the normal
# build (no sanitizer): what once decoded, or once crashed and was kept, still behaves. `make test`
# runs it; the coverage-guided search is `make fuzz`.
fuzz-replay:
	@bin=$$($(SWIFT) build --show-bin-path)/swiftplex-fuzz; \
	for t in $(FUZZ_TARGETS); do \
	  $$bin run $$t Fuzz/Corpus/$$t > .build/fuzz-replay-$$t.log 2>&1 || { tail -n 20 .build/fuzz-replay-$$t.log; echo "fuzz replay: $$t FAILED"; exit 1; }; \
	done; echo "fuzz replay: $$(ls Fuzz/Corpus/*/* | wc -l) committed inputs over $(words $(FUZZ_TARGETS)) targets, 0 failures"

# Rewrites the committed seed corpora from the real encoders (normal build, no sanitizer).
fuzz-seeds:
	$(SWIFT) build --product swiftplex-fuzz
	$$($(SWIFT) build --show-bin-path)/swiftplex-fuzz seeds Fuzz/Corpus

clean:
	rm -rf .build .build-fuzz
