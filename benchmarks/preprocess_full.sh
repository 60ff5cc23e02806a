#!/usr/bin/env bash
# Preprocess the FULL TVsub corpus (2.15M train pairs, dev, test) and report wall time and peak
# memory. Usage: benchmarks/preprocess_full.sh [OUT_DIR] [extra `doctrans preprocess` options]
#   DATA=/path/to/tvsub  corpus root (default ../shared/corpora/tvsub)
# OUT_DIR defaults to data/prep_full (git-ignored); never point it inside tracked paths.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-data/prep_full}
shift || true
DATA=${DATA:-../shared/corpora/tvsub}
PY=${PY:-.venv/bin/python}
LOG=$(mktemp "${TMPDIR:-/tmp}/preprocess_full.XXXXXX.log")
CMD=("$PY" -m doctrans.cli preprocess --data-dir "$DATA" --train-docs all -o "$OUT" "$@")

echo "machine: $(nproc) CPUs, $(free -g | awk '/^Mem:/{print $2}') GiB RAM, $(lscpu | grep 'Model name' | sed 's/Model name: *//')"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command: ${CMD[*]}"
echo "log:     $LOG"

if [ -x /usr/bin/time ]; then
  /usr/bin/time -v "${CMD[@]}" 2> >(tee "$LOG" >&2)
  wait
  grep -E "Elapsed \(wall clock\)|Maximum resident set size" "$LOG"
else
  "$PY" - "${CMD[@]}" <<'EOF' 2> >(tee "$LOG" >&2)
import resource, subprocess, sys, time
t0 = time.monotonic()
rc = subprocess.call(sys.argv[1:])
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"wall: {time.monotonic() - t0:.1f} s, peak RSS (largest process): {peak_kb / 1024:.0f} MiB", file=sys.stderr)
sys.exit(rc)
EOF
  wait
fi
"$PY" - "$OUT/meta.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1], encoding="utf-8"))
f = m["filter"]
print(f"train kept {f['kept']}, filtered {f['removed']} {f['removed_by_reason']}")
for name, s in m["splits"].items():
    print(f"{name}: {s['sentences']} sentences, {s['documents']} documents")
EOF
