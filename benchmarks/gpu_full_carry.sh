#!/usr/bin/env bash
# Build the carry of benchmarks/gpu_full.sh from a prepared whole corpus (make dp-full's
# PREP_FULL, or `doctrans preprocess --train-docs all`): CARRY/prep.tar.xz (≈ 35 MB), the test
# references, the packages the GPU image lacks, and optionally STAGE1 (a checkpoint to start from,
# written in fp16).
#   bash benchmarks/gpu_full_carry.sh PREP_FULL CARRY [TVSUB] [STAGE1]
# DENSE_DP=1: also PREP_FULL/dp/train.dplabel (`doctrans annotate-dp`'s DP labels, ≈ 2 MB compressed:
# what gpu_stage2_long.sh DENSE=… selects the context-dense lines with), the tar compressed with xz -9e
# to stay within the device's 64 MiB beside a start checkpoint (≈ 26 MB) and the repository.
# JIEBA=0: without jieba.tgz (2.9 MB; the training scripts, gpu_stage2_long.sh included, need no jieba).
set -euo pipefail
PREP=$(realpath "${1:?PREP_FULL}"); C=${2:?CARRY}; TVSUB=${3:-../shared/corpora/tvsub}; S1=${4:-}
DP=(); XZ=(-T2 -6)
if [ "${DENSE_DP:-0}" = 1 ]; then DP=(dp/train.dplabel); XZ=(-T1 -9e); fi
mkdir -p "$C/tvsub/test"; C=$(realpath "$C")      # absolute: the tar below runs in PREP
cp "$TVSUB/test/test.ref.sgm" "$C/tvsub/test/"
(cd "$PREP" && tar cf - train.bpe.zh train.bpe.en train.target train.docs dev.bpe.zh dev.bpe.en dev.docs \
   dev.tok.en test.bpe.zh test.bpe.en test.tok.zh test.docs vocab.zh.txt vocab.en.txt bpe.codes.zh bpe.codes.en \
   meta.json "${DP[@]}" | xz "${XZ[@]}" > "$C/prep.tar.xz")
# packages the GPU image lacks (benchmarks/gpu_carry_env.sh installs / puts them on PYTHONPATH)
PYBIN=${PYTHON:-.venv/bin/python}
SP=$($PYBIN -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p "$C/whl" "$C/site"
$PYBIN -m pip download -q --no-deps --only-binary=:all: -d "$C/whl" sacremoses opencc-python-reimplemented
cp -r "$SP/subword_nmt" "$C/site/"
if [ "${JIEBA:-1}" = 1 ]; then
  tar czf "$C/jieba.tgz" -C "$SP" --exclude=jieba/posseg --exclude=jieba/analyse --exclude=jieba/lac_small jieba
fi
if [ -n "$S1" ]; then
  PYTHONPATH=. $PYBIN - "$S1" "$C/stage1.pt" <<'PY'
import sys, torch
from doctrans.runtime.shipping import half_weights
from doctrans.runtime.checkpoint_digest import with_digest   # an edited checkpoint gets a new digest
ck = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
ck["model"] = half_weights(ck["model"], sys.argv[1])
for k in ("optimizer", "rng", "rng_ranks"):
    ck.pop(k, None)
torch.save(with_digest(ck), sys.argv[2])
PY
fi
du -sh "$C"/*
