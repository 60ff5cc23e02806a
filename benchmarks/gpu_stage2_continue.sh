#!/usr/bin/env bash
# Stage 2 continued on a lent GPU from ONE start (issue 48; the second call of 2026-11-28): the
# sentence model and the target-side context model side by side from the same weights — CARRY/start.pt,
# a tgt_concat checkpoint (the sentence model's start is the same weights without the "backbone."
# prefix) — each for MIN minutes, checkpoints every 50 updates, both back in fp16 at the last update
# both reached (equal updates from the same start).
#   bash benchmarks/gpu_stage2_continue.sh CARRY OUT [MIN]
# CARRY: prep.tar.xz, whl/, site/ (benchmarks/gpu_full_carry.sh; jieba.tgz may be left out — the
# carry must stay ≤ 64 MiB with start.pt) and start.pt (the document.fp16.pt that
# benchmarks/gpu_full_ship.sh brought back). EXTRA: more key=value overrides (a CPU smoke test).
# OUT: transformer.fp16.pt.part-*, tgt_concat.fp16.pt.part-* (`cat` them back), runs2.tgz.
# (The call of 2026-11-28 ran this file's first version, the same steps written inline.)
set -uo pipefail
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); MIN=${3:-3.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GPU_IMPORTS="sacremoses click yaml"          # training only: no jieba / OpenCC needed
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH; gpu_unpack, gpu_banner, fp16_back, equal_update_point, collect_into
W=${WORK:-/tmp/g2}; rm -rf "$W"; gpu_unpack "$W/prep"
gpu_banner
# the sentence model's start: the same weights without the context model's "backbone." prefix
$PY - "$C/start.pt" "$W/start_sent.pt" <<'PYEOF'
import sys, torch
from doctrans.runtime.checkpoint_digest import with_digest   # an edited checkpoint gets a new digest
ck = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
ck["model"] = {k.removeprefix("backbone."): v for k, v in ck["model"].items()}
ck["config"]["context"] = None
torch.save(with_digest(ck), sys.argv[2])
PYEOF
A="data.prepared=$W/prep train.device=auto train.max_tokens=32768 train.tensorboard=false train.threads=4 train.eval_bleu=false
 train.metric=xent_nats train.metric_mode=min train.plot=false train.init_from=$C/start.pt train.max_steps=10000000
 train.max_time_min=$MIN train.lr=1e-3 train.warmup=100 train.eval_every=100 train.save_every=50 train.keep_every=50 train.keep_last=0 ${EXTRA:-}"
(cd "$ROOT" && $DT train pipelines/quickstart.yaml $A train.init_from="$W/start_sent.pt" run_dir="$W/transformer") \
  > "$W/transformer.log" 2>&1 &
(cd "$ROOT" && $DT train pipelines/context/tgt_concat.yaml $A run_dir="$W/tgt_concat") > "$W/tgt_concat.log" 2>&1 &
wait; date -u; tail -n 3 "$W"/*.log
M=$(equal_update_point "$W/transformer" "$W/tgt_concat"); echo "equal-update point M = $M"
[ "$M" -gt 0 ] || { echo "no common checkpoint"; collect_into "$W" runs2.tgz '*.log */train.log'; exit 1; }
for r in transformer tgt_concat; do fp16_back "$W/$r/checkpoint$M.pt" "$r" strip; done
collect_into "$W" runs2.tgz '*/metrics.jsonl */config.yaml */train.log *.log'
ls -la "$OUTD"
