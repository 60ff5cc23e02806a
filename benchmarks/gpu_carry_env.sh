# Sourced by benchmarks/gpu_lib.sh (the GPU scripts' library) after C (the carry directory) and ROOT (the
# repository): makes the packages the GPU image lacks importable — CARRY/whl/*.whl installed to
# /tmp/site (sacremoses, opencc-python-reimplemented: translate reads every input through OpenCC), CARRY/site/ (pure-Python packages, e.g. subword_nmt), CARRY/jieba.tgz
# (jieba without posseg/analyse/lac_small: the contrastive set's raw sources are segmented) — puts
# ROOT first on PYTHONPATH, and sets PY (the interpreter holding torch; $PYTHON or python3) and DT
# (the doctrans command). Exits 1 when an import the scripts need still fails.
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
if ls "$C"/whl/*.whl >/dev/null 2>&1 && ! $PY -c "import sacremoses, opencc" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$C"/whl/*.whl \
    && export PYTHONPATH=/tmp/site:${PYTHONPATH:-} || exit 1
fi
[ -d "$C/site" ] && export PYTHONPATH=$C/site:${PYTHONPATH:-}
if [ -f "$C/jieba.tgz" ]; then mkdir -p /tmp/site_jieba && tar xzf "$C/jieba.tgz" -C /tmp/site_jieba \
  && export PYTHONPATH=/tmp/site_jieba:${PYTHONPATH:-}; fi
export PYTHONPATH=$ROOT:${PYTHONPATH:-}
# GPU_IMPORTS: the modules the calling script needs (a training-only script needs no jieba / OpenCC)
GPU_IMPORTS=${GPU_IMPORTS:-"subword_nmt sacremoses click sacrebleu jieba opencc"}
$PY -c "import ${GPU_IMPORTS// /, }" || { echo "a package is missing: carry it (see above)"; exit 1; }
DT="$PY $ROOT/bin/doctrans"
