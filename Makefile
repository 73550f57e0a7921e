# `make test` installs what the tests need and is missing on a fresh Debian
# machine (apt packages as root, cargo tools), then runs every suite.
#
#   unit     cargo tests of every crate, integration tests of the real binary
#   loom     loom models of the scheduler's inbox and sleep/notify handshake
#   vtc      varnishtest conformance corpus against ebb (tests/vtc)
#   hostile  slowhttptest attacks and a maxconn flood (tests/hostile)
#   soak     mixed traffic for EBB_SOAK_SECS (150 s), growth bounds checked
#   fuzz     every cargo-fuzz target for FUZZ_SECONDS (20 s) each
#   smoke    a 2-second run of the side-by-side benchmark harness

# curl: TLS and file tests; chromium: the stats page rendered headless;
# python3-prometheus-client: the metrics parsed by a real Prometheus parser;
# varnish (varnishtest), haproxy, slowhttptest, wrk: the reliability suites.
APT_PKGS := curl chromium python3-prometheus-client varnish haproxy slowhttptest wrk
CARGO ?= cargo

.PHONY: test deps unit loom vtc hostile soak fuzz smoke bench

test: deps unit loom vtc hostile soak fuzz smoke

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

unit:
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

# Loom models (their own target dir: everything is built with --cfg loom).
loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test -p sched --test loom --release

vtc:
	tests/vtc/run.sh

hostile:
	tests/hostile/run.sh

soak:
	$(CARGO) test -p ebb --test soak -- --ignored --nocapture

fuzz:
	FUZZ_SECONDS=$${FUZZ_SECONDS:-20} fuzz/run-ci.sh

smoke:
	bench/run --quick

bench:
	$(CARGO) bench -p ebtree
	$(CARGO) bench -p sched
