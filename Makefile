# tracehouse developer entry points. A fresh machine needs only python3 (3.11+), cargo
# and a C compiler: `make setup` installs everything else from PyPI and crates.io.
#
#   make setup   what `make demo` installs, then the dev/bench/spark/docs extras and the benchmark
#                suite (bench-suite/, its own distribution); strace and a Java runtime (apt-get)
#                when missing: the strace tests trace real programs, the Spark engine tests run
#                Spark local[2]; chromium: the web UI tests drive a real browser; the benchmark
#                peers (bench-peers): PostgreSQL, MariaDB, Java + the QuestDB jar; telemetrygen (Go)
#   make test    cargo tests of the pure Rust code, then pytest (tests/ and bench-suite/tests/)
#   make demo    tracehouse demo: example traces of every format, then the web UI (Ctrl-C stops it);
#                installs only what the demo runs: the package, its dependencies and the Rust core
#                (the release core when `make setup` built it, else one built quickly, unoptimised:
#                Cargo.toml's demo profile)
#   make bench   tracehouse bench ingest --events 10000000
#   make lint    ruff check (pyproject's rule set) and ruff format --check, cargo fmt --check, cargo clippy -D warnings
#   make docs    the documentation site (mkdocs-material, docs/ -> site/), offline and --strict:
#                a broken link, a missing page or a stale generated page fails it
#
# VENV=/some/dir puts the virtualenv elsewhere (default .venv, reused when present).

VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
# maturin finds the target interpreter through VIRTUAL_ENV.
MATURIN := VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin

# The extension's file name for the venv's interpreter (a 3.12 core may lie beside it: core312).
VENV_EXT = $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')

# The core is rebuilt when one of these is newer than the stamp left by the last build.
CORE_SOURCES := Cargo.toml Cargo.lock pyproject.toml $(shell find src -name '*.rs' 2>/dev/null)
CORE_STAMP   := $(VENV)/.tracehouse-core-stamp
DEMO_STAMP   := $(VENV)/.tracehouse-core-demo-stamp
# The extras and the benchmark suite are installed again when their declarations change.
DEV_STAMP    := $(VENV)/.tracehouse-dev-stamp
DEV_EXTRAS   := dev,bench,spark,docs

BENCH_PEERS_PKGS := postgresql mariadb-server mariadb-client openjdk-17-jre-headless maven
QUESTDB_VERSION  := 9.1.0

.PHONY: setup core core312 demo-core strace-tool java-tool chromium bench-peers bpftrace-tool telemetrygen-tool influxd-tool test test-rust test-python demo bench lint fmt clean docs

setup: core $(DEV_STAMP) strace-tool java-tool chromium bench-peers bpftrace-tool core312 telemetrygen-tool influxd-tool

# The package, its dependencies and the Rust core: all `make demo` needs.
core: $(CORE_STAMP)
	@# The stamp lives in the venv but the extension is placed in python/tracehouse/: a
	@# fresh checkout next to an old venv must rebuild.
	@ls python/tracehouse/_core$(VENV_EXT) >/dev/null 2>&1 || { rm -f $(CORE_STAMP); $(MAKE) --no-print-directory $(CORE_STAMP); }

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BIN)/maturin: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "maturin>=1.9.4,<2"

# `maturin develop` installs the dependencies declared in pyproject.toml, builds the crate in
# release mode and installs it in the venv with python/ on the path (edits to the Python sources
# need no rebuild).
$(CORE_STAMP): $(CORE_SOURCES) | $(BIN)/maturin
	$(MATURIN) develop --release
	@rm -f $(DEMO_STAMP)
	@touch $@

# The demo's core: the release one when it is built and current, else the demo profile's.
demo-core:
	@if [ -f $(CORE_STAMP) ] && ls python/tracehouse/_core$(VENV_EXT) >/dev/null 2>&1 && \
		[ -z "$$(find $(CORE_SOURCES) -newer $(CORE_STAMP) 2>/dev/null | head -n 1)" ]; then :; \
	else $(MAKE) --no-print-directory $(DEMO_STAMP); fi

$(DEMO_STAMP): $(CORE_SOURCES) | $(BIN)/maturin
	$(MATURIN) develop --profile demo
	@rm -f $(CORE_STAMP)
	@touch $@
	@echo "note: the core was built unoptimised for a quick start (Cargo.toml's demo profile); make setup builds the release one"

# The dev, bench, spark and docs extras (read from pyproject.toml: installing `.[extras]` would
# build the core again), then the benchmark suite, which plugs into `tracehouse bench`.
$(DEV_STAMP): pyproject.toml bench-suite/pyproject.toml | $(CORE_STAMP)
	$(BIN)/python -c "import tomllib; x = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']; \
		print('\n'.join(r for e in '$(DEV_EXTRAS)'.split(',') for r in x[e]))" > $(VENV)/dev-requirements.txt
	$(BIN)/python -m pip install --quiet -r $(VENV)/dev-requirements.txt
	$(BIN)/python -m pip install --quiet -e ./bench-suite
	@touch $@

Cargo.lock:
	cargo generate-lockfile

# The recorder's tests run under CPython 3.12 too (sys.monitoring; tests/record/test_py312.py)
# where the machine has one: pyenv's (`uv python install` downloads interpreters from outside the
# package registries this machine reaches). Its core is built unoptimised (the demo profile) and
# put beside the 3.11 one, where only a 3.12 interpreter loads it.
PY312         ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12))
CORE312_STAMP := $(VENV)/.tracehouse-core312-stamp

core312: $(if $(PY312),$(CORE312_STAMP))

$(CORE312_STAMP): $(CORE_SOURCES) | $(BIN)/maturin
	rm -rf $(VENV)/wheel312
	$(BIN)/maturin build --quiet --profile demo --interpreter $(PY312) -o $(VENV)/wheel312
	$(BIN)/python -c "import glob, zipfile; z = zipfile.ZipFile(glob.glob('$(VENV)/wheel312/*.whl')[0]); \
		n = next(x for x in z.namelist() if x.startswith('tracehouse/_core.') and x.endswith('.so')); \
		open('python/' + n, 'wb').write(z.read(n))"
	@touch $@

# `tracehouse capture` and the strace tests run strace. Installed with apt-get when missing
# (sudo -n when not root); if that is impossible the capture tests skip and say why.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo "sudo -n")
strace-tool:
	@command -v strace >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
		$(SUDO) apt-get install -y -q strace >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q strace >/dev/null 2>&1; } || true
	@command -v strace >/dev/null 2>&1 || echo "note: strace is not installed; the capture tests will be skipped"

# pyspark (the spark extra) runs Spark on a JVM: Java 17+ from apt-get when missing.
java-tool:
	@command -v java >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
		$(SUDO) apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1; } || true
	@command -v java >/dev/null 2>&1 || echo "note: java is not installed; the Spark engine tests will be skipped"

# `tracehouse bench all` (and bench write) start their peers themselves on loopback, from
# Debian packages and the QuestDB jar of Maven Central (fetched by mvn into ~/.m2). The
# packages' own services are not needed (the bench runs each server in its own directory).
bench-peers:
	@missing=""; for p in $(BENCH_PEERS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && command -v apt-get >/dev/null 2>&1; then \
		$(SUDO) apt-get install -y -q $$missing >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q $$missing >/dev/null 2>&1; } || \
		echo "note: could not install$$missing; bench all will skip those peers"; fi
	@[ -f $$HOME/.m2/repository/org/questdb/questdb/$(QUESTDB_VERSION)/questdb-$(QUESTDB_VERSION).jar ] || \
		! command -v mvn >/dev/null 2>&1 || \
		mvn -q dependency:get -Dartifact=org.questdb:questdb:$(QUESTDB_VERSION) >/dev/null 2>&1 || \
		echo "note: could not fetch the QuestDB jar; bench all will skip QuestDB"

# The live bpftrace test runs bpftrace (as root, where BPF is allowed); the committed
# captures in tests/data/bpftrace are tested everywhere.
bpftrace-tool:
	@command -v bpftrace >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
		$(SUDO) apt-get install -y -q bpftrace >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q bpftrace >/dev/null 2>&1; } || true
	@command -v bpftrace >/dev/null 2>&1 || echo "note: bpftrace is not installed; the live bpftrace test will be skipped"

# The OTLP tests and `bench otlp` run telemetrygen, the OpenTelemetry Collector's load generator,
# built from its Go module into the venv's bin (the module has no release at v0.148.0, the
# collector release other modules are kept at; v0.161.0 builds with this machine's Go). Without
# Go or the module proxy, those tests skip and say why.
TELEMETRYGEN_VERSION := v0.161.0
telemetrygen-tool:
	@[ -x $(BIN)/telemetrygen ] || ! command -v go >/dev/null 2>&1 || \
		GOBIN=$(abspath $(BIN)) GOFLAGS=-mod=mod go install \
		github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@$(TELEMETRYGEN_VERSION) >/dev/null 2>&1 || true
	@[ -x $(BIN)/telemetrygen ] || echo "note: telemetrygen is not installed (needs Go and the module proxy); its OTLP tests will be skipped"

# InfluxQL's answers are compared with a real InfluxDB 1.x's (tests/server/test_influxdb_peer.py),
# built from its Go module into the venv's bin (v1.8.3: the last 1.x whose server builds without
# Flux's Rust library). Without Go or the module proxy, that test skips and says why.
INFLUXDB_VERSION := v1.8.3
influxd-tool:
	@[ -x $(BIN)/influxd ] || ! command -v go >/dev/null 2>&1 || \
		GOBIN=$(abspath $(BIN)) GOFLAGS=-mod=mod go install \
		github.com/influxdata/influxdb/cmd/influxd@$(INFLUXDB_VERSION) >/dev/null 2>&1 || true
	@[ -x $(BIN)/influxd ] || echo "note: influxd is not installed (needs Go and the module proxy); the InfluxDB peer test will be skipped"

# The web UI's browser tests drive Debian's Chromium (playwright's own browser download is not
# used). Installed with apt-get when missing; if that is impossible those tests skip and say why.
chromium:
	@command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
		$(SUDO) apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q chromium >/dev/null 2>&1; } || true
	@command -v chromium >/dev/null 2>&1 || echo "note: chromium is not installed; the web UI browser tests will be skipped"

test: setup test-rust test-python

# --no-default-features drops the PyO3 glue: the pure Rust tests then link without libpython.
test-rust:
	cargo test --no-default-features

test-python: setup
	$(BIN)/python -m pytest -q

# mkdocs.yml turns off everything that would fetch at build or view time (fonts); the hook in
# dev/docs_hooks.py fails the strict build when a generated page (CLI reference, benchmark
# pages, the README's table) is stale.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

demo: demo-core
	$(BIN)/tracehouse demo

bench: setup
	$(BIN)/tracehouse bench ingest --events 10000000

lint: setup
	$(BIN)/ruff check python tests dev bench-suite
	$(BIN)/ruff format --check python tests dev bench-suite
	cargo fmt --check
	cargo clippy --all-targets --no-default-features -- -D warnings
	cargo clippy --all-targets -- -D warnings

fmt:
	$(BIN)/ruff format python tests dev bench-suite
	cargo fmt

clean:
	cargo clean
	rm -f python/tracehouse/_core.*.so $(CORE_STAMP) $(DEMO_STAMP) $(DEV_STAMP) $(CORE312_STAMP)
