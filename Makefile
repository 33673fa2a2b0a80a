# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

MINUTES ?= 10

.PHONY: run test test-fast soak reference docs bench-webhook bench-slow-clients bench-fast-flood bench-grouper bench-vs-kai clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# Exit status 1 means "something would be denied": the GPU-conflict example is.
run: $(BIN)/.installed
	$(BIN)/podgang plan examples/ || [ $$? -eq 1 ]
	@echo; echo '--- after: podgang plan examples/02-shared-podgroup-deployments.yaml --scale deployment/model-1=2'; echo
	$(BIN)/podgang plan examples/02-shared-podgroup-deployments.yaml --scale deployment/model-1=2
	@echo; echo '--- the other gang schedulers side by side: Volcano, native Kubernetes, coscheduling'; echo
	$(BIN)/podgang plan examples/07-volcano-lws.yaml examples/08-native-training.yaml examples/09-coscheduling.yaml \
		--backend volcano=volcano --backend default-scheduler=native --backend scheduler-plugins-scheduler=coscheduling
	@echo; echo '--- seed 002 on Kubernetes 1.35: native gangs as Workloads (scheduling.k8s.io/v1alpha1)'; echo
	$(BIN)/podgang plan examples/10-seed002-basic-gang.yaml examples/11-seed002-large-gang.yaml \
		examples/12-seed002-pytorch.yaml examples/13-seed002-spark.yaml --backend default-scheduler=native

# Every test, the real-cluster ones included (they start ../shared/kube-bin's control planes
# and schedulers; on a clone without it they skip with one reason).
test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

# Issue 44's soak for MINUTES minutes (default 10): churn and faults on the real apiserver and KAI,
# the promises checked at the end, its figures printed (docs/operate/grouper.md). `make test` runs
# it for 75 s.
soak: $(BIN)/.installed
	PODGANG_SOAK_SECONDS=$$(( $(MINUTES) * 60 )) $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/real/test_real_soak.py

# The inner loop: everything but the real-cluster tests.
test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m "not real_cluster"

# The reference pages (docs/reference/, the chart README's values) and the outputs of the
# offline commands the docs show, written again from their sources; tests/unit/test_docs.py fails
# while any of them is stale.
reference: $(BIN)/.installed
	$(BIN)/python docs/generate.py

# The documentation site (mkdocs-material) into site/; broken links and missing pages fail.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# podgang webhook vs a bare aiohttp TLS endpoint (and the Go anchor when a Go toolchain
# is found), same load generator (wrk if installed), pinned cores (see bench/README.md).
bench-webhook: $(BIN)/.installed
	$(BIN)/python bench/webhook/bench.py

# 3,000 TLS clients trickling their bodies while reviews keep coming: RSS and answers (bench/README.md).
bench-slow-clients: $(BIN)/.installed
	$(BIN)/python bench/webhook/slow_clients.py

# 100 TLS clients sending 3 MiB bodies at full speed (held, then whole) while reviews keep
# coming: RSS, the reviews' latency, what was shed (bench/README.md).
bench-fast-flood: $(BIN)/.installed
	$(BIN)/python bench/webhook/fast_flood.py

# The grouper against the HTTP API emulator: 10,000 and 100,000 pods side by side (see bench/README.md).
bench-grouper: $(BIN)/.installed
	$(BIN)/python bench/grouper/bench.py

# podgang's grouper against KAI's own pod-grouper on a real control plane from ../shared/kube-bin:
# a fresh cluster per side, rounds alternating (see bench/README.md). BENCH_ARGS="--pods 4000 --rounds 2".
bench-vs-kai: $(BIN)/.installed
	$(BIN)/python bench/vs-kai/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .hypothesis
