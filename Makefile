# `make test` installs what the tests need and is missing on a fresh Debian
# machine (apt packages as root, cargo tools), then runs every suite.
#
#   unit     cargo tests of every crate, integration tests of the real binary
#   loom     loom models of the scheduler's inbox and sleep/notify handshake
#   vtc      varnishtest conformance corpus against ebb (tests/vtc)
#   diff     generated rules, ACLs, fetches and converters on ebb and HAProxy
#            2.6 side by side (tests/diff/run.py, DIFF_SEED, DIFF_CONFIGS);
#            seeds 1 and 2 in `test` (DIFF_SEED: that one only; seeds 3 to
#            5 find no difference either)
#   samples  every sample fetch, converter and ACL method ebb accepts, checked
#            and evaluated beside HAProxy 2.6 one by one (tests/samples/run.py)
#   hostile  slowhttptest attacks and a maxconn flood (tests/hostile)
#   h2       h2spec and the HTTP/2 attack harness against the h2 core (tests/h2)
#   soak     mixed traffic for EBB_SOAK_SECS (75 s), growth bounds checked
#   fuzz     every cargo-fuzz target for FUZZ_SECONDS (20 s) each, FUZZ_JOBS
#            (the CPUs) at a time
#   smoke    a 2-second run of the side-by-side benchmark harness and a 20-second
#            reload-under-load run (bench/reload.py --quick), both with the
#            debug ebb binary

# curl: TLS and file tests; chromium: the stats page rendered headless;
# python3-prometheus-client: the metrics parsed by a real Prometheus parser;
# varnish (varnishtest), haproxy, slowhttptest, wrk: the reliability suites;
# nghttp2-client (nghttp, h2load): the HTTP/2 tests of the real binary;
# php-fpm: the FastCGI tests (tests/fcgi.rs).
APT_PKGS := curl chromium python3-prometheus-client varnish haproxy slowhttptest wrk nghttp2-client python3-grpcio socat php-fpm
CARGO ?= cargo

.PHONY: test deps h2spec-deps unit loom vtc diff samples hostile h2 soak fuzz smoke bench

# The stages of `test`, in order. Each prints `== STAGE: N s` when it ends
# (`== STAGE: FAILED after N s` and the run stops when it fails), and the
# run ends with every stage's time on one line, so a CI log shows where the
# time went.
STAGES := unit loom vtc diff samples hostile h2 soak fuzz smoke

test: deps
	@t0=$$(date +%s); times=""; \
	for s in $(STAGES); do \
		s0=$$(date +%s); \
		if ! $(MAKE) --no-print-directory $$s; then \
			echo "== $$s: FAILED after $$(( $$(date +%s) - s0 )) s"; exit 1; \
		fi; \
		d=$$(( $$(date +%s) - s0 )); times="$$times, $$s $$d s"; \
		echo "== $$s: $$d s"; \
	done; \
	echo "== test: $$(( $$(date +%s) - t0 )) s ($${times#, })"

# Debian packages the tests use; installed only when missing.
deps:
	@missing=""; for p in $(APT_PKGS); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# h2spec, the Go conformance tool: Go from Debian's golang-go when no go
# is on PATH, then `go install` into $(GOPATH)/bin (~/go/bin).
H2SPEC := $(shell command -v h2spec 2>/dev/null || echo $${GOPATH:-$$HOME/go}/bin/h2spec)
h2spec-deps:
	@if [ ! -x "$(H2SPEC)" ]; then \
		if ! command -v go >/dev/null; then \
			if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
			$$SUDO apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq golang-go; \
		fi; \
		go install github.com/summerwind/h2spec/cmd/h2spec@latest; \
	fi

unit:
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

# Loom models (their own target dir: everything is built with --cfg loom).
loom:
	EBB_PGO=0 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test -p sched --test loom --release

vtc:
	tests/vtc/run.sh

diff:
	if [ -n "$$DIFF_SEED" ]; then tests/diff/run.py; \
	else tests/diff/run.py --seed 1 && tests/diff/run.py --seed 2; fi

samples:
	timeout 900 tests/samples/run.py

hostile:
	tests/hostile/run.sh

# Every h2spec case must pass against the h2 core (h2_driver example) and
# against the ebb binary (cleartext and TLS); then every attack of
# tests/h2/attack.py must be ended as RFC 9113 says, by both.
h2: h2spec-deps
	tests/h2/h2spec.sh
	tests/h2/h2spec.sh ebb
	tests/h2/run.sh
	tests/h2/run.sh ebb

soak:
	$(CARGO) test -p ebb --test soak -- --ignored --nocapture

fuzz:
	FUZZ_SECONDS=$${FUZZ_SECONDS:-20} fuzz/run-ci.sh

# The smoke checks that the harnesses run, not ebb's speed: it runs the
# debug binary the other stages build. Its release build took 201 of the
# stage's 233 s in the CI dry run of 2026-11-30, and checked nothing
# (bench/run exits 0 whatever ebb does; nothing else builds release).
SMOKE_EBB := $${CARGO_TARGET_DIR:-target}/debug/ebb
smoke:
	$(CARGO) build -q -p ebb --bin ebb
	bench/run --quick --ebb $(SMOKE_EBB)
	bench/reload.py --quick --ebb $(SMOKE_EBB)

bench:
	$(CARGO) bench -p ebtree
	$(CARGO) bench -p sched
