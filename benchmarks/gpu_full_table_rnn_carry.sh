#!/usr/bin/env bash
# Build the carry of benchmarks/gpu_full_table_rnn.sh from a prepared whole corpus (make dp-full's
# PREP_FULL, or `doctrans preprocess --train-docs all`):
#   bash benchmarks/gpu_full_table_rnn_carry.sh PREP_FULL CARRY [TVSUB] [STAGE1]
# CARRY/prep.tar.xz   the BPE'd splits, train.target, the .docs, test.tok.{zh,en}, dev.tok.en, vocabularies,
#                     BPE codes and meta.json (xz -6, XZ_THREADS threads (1); XZ_LEVEL=9e is smaller)
# CARRY/tvsub/test/   the TVsub test files (test.ref.sgm's 3 references; .seg.zh / .oracle-dp.seg.zh:
#                     DP recall and the contrastive set)
# CARRY/contrastive/  the contrastive pronoun set of the test (`doctrans contrastive build`; --usage)
# CARRY/whl, site/, jieba.tgz   the packages the GPU image lacks (as gpu_full_carry.sh; JIEBA=0: no
#                     jieba and then no usage table; the wheels are downloaded once, kept when there)
# CARRY/stage1.pt     with STAGE1 (a checkpoint: a stage 1 that came back), its weights in fp16
# Prints each part's size, the total and the repository's share of the device's 64 MiB (the tracked
# files less doctrans/shipped/*.pt, which must be moved out of the tree for the call). For the whole
# corpus: ≈ 37 MiB (prep.tar.xz ≈ 32 MiB) + the tree ≈ 6.5 MiB; a STAGE1 (small: 23 MiB in fp16) does
# not fit beside them as they are — leave out jieba (JIEBA=0: no usage table) and compress harder
# (XZ_LEVEL=9e), or go without it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PREP=$(realpath "${1:?PREP_FULL}"); C=${2:?CARRY}; TVSUB=$(realpath "${3:-$ROOT/../shared/corpora/tvsub}"); S1=${4:-}
PYBIN=${PYTHON:-$ROOT/.venv/bin/python}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$C/tvsub/test"; C=$(realpath "$C")      # absolute: the tar below runs in PREP
for f in test.zh test.en test.seg.zh test.oracle-dp.seg.zh test.ref.sgm; do cp "$TVSUB/test/$f" "$C/tvsub/test/"; done
t0=$(date +%s)
(cd "$PREP" && tar cf - train.bpe.zh train.bpe.en train.target train.docs dev.bpe.zh dev.bpe.en dev.docs dev.tok.en \
   test.bpe.zh test.bpe.en test.tok.zh test.tok.en test.docs vocab.zh.txt vocab.en.txt bpe.codes.zh bpe.codes.en meta.json \
   | xz -T"${XZ_THREADS:-1}" -"${XZ_LEVEL:-6}" > "$C/prep.tar.xz.tmp") && mv "$C/prep.tar.xz.tmp" "$C/prep.tar.xz"
echo "prep.tar.xz: $(( $(date +%s) - t0 )) s"
rm -rf "$C/contrastive"
$PYBIN -m doctrans.cli contrastive build --data "$C/tvsub" --split test -o "$C/contrastive" > /dev/null
SP=$($PYBIN -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p "$C/whl" "$C/site"
ls "$C"/whl/sacremoses-*.whl "$C"/whl/opencc_python_reimplemented-*.whl >/dev/null 2>&1 \
  || $PYBIN -m pip download -q --no-deps --only-binary=:all: -d "$C/whl" sacremoses opencc-python-reimplemented
rm -rf "$C/site/subword_nmt"; cp -r "$SP/subword_nmt" "$C/site/"
rm -f "$C/jieba.tgz"
if [ "${JIEBA:-1}" = 1 ]; then
  tar czf "$C/jieba.tgz" -C "$SP" --exclude=jieba/posseg --exclude=jieba/analyse --exclude=jieba/lac_small jieba
fi
if [ -n "$S1" ]; then
  $PYBIN - "$S1" "$C/stage1.pt" <<'PY'
import sys, torch
from doctrans.runtime.shipping import half_weights
from doctrans.runtime.checkpoint_digest import with_digest   # an edited checkpoint gets a new digest
ck = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
ck["model"] = half_weights(ck["model"], sys.argv[1])
for k in ("optimizer", "rng", "rng_ranks", "digest"):
    ck.pop(k, None)
torch.save(with_digest(ck), sys.argv[2])
PY
fi
du -sh "$C"/*
carry=$(du -sb "$C" | cut -f1)
tree=$(cd "$ROOT" && git ls-files -z | grep -zv '^doctrans/shipped/.*\.pt$' | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "carry $(( carry / 1024 )) KiB + tracked tree without the shipped models $(( tree / 1024 )) KiB" \
     "= $(( (carry + tree) / 1048576 )) MiB of the device's 64"
