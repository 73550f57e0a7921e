# `make test` installs what the tests need and is missing on a fresh Debian
# machine (apt packages as root, cargo tools), then runs every suite.

# curl: TLS and file tests; chromium: the stats page rendered headless;
# python3-prometheus-client: the metrics parsed by a real Prometheus parser.
APT_PKGS := curl chromium python3-prometheus-client
CARGO ?= cargo

.PHONY: test deps unit loom bench

test: deps unit loom

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

# Loom models of the scheduler's inbox and sleeping/notified handshake
# (their own target dir: everything is built with --cfg loom).
loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test -p sched --test loom --release

bench:
	$(CARGO) bench -p ebtree
	$(CARGO) bench -p sched
