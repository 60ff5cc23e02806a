#!/usr/bin/env bash
# Are the translations of an older commit and of this checkout byte-identical? (issue 49's check of
# a restructuring: "the quickstart's translations byte-identical before and after").
#
# Usage: benchmarks/translations_identical.sh OLD_COMMIT OUT CKPT [CKPT ...]
#   env: SRC (default $REPO/../shared/corpora/tvsub/test/test.zh), DOCS (default
#        data/quickstart/test.docs), BEAM (5), THREADS (2), PY (.venv/bin/python)
# OLD_COMMIT is checked out in a detached worktree OUT/old; each CKPT translates SRC as documents
# with the old code (run as `python -m doctrans.cli` from that worktree, so its package is the one
# imported) and with this checkout's; `cmp` says whether the outputs are identical. An older commit
# refuses the config keys added since: its copy of each checkpoint (OUT/NAME.old.pt) has the
# train/data keys its TrainConfig/DataConfig lack removed (training-only keys; printed).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 3 ] || { sed -n 2,12p "$0"; exit 2; }
OLD=$1; OUT=$(mkdir -p "$2" && cd "$2" && pwd); shift 2
PY=${PY:-$REPO/.venv/bin/python}; SRC=${SRC:-$REPO/../shared/corpora/tvsub/test/test.zh}
DOCS=${DOCS:-$REPO/data/quickstart/test.docs}; BEAM=${BEAM:-5}; THREADS=${THREADS:-2}
[ -d "$OUT/old" ] || git -C "$REPO" worktree add --detach "$OUT/old" "$OLD" >/dev/null
status=0
for ck in "$@"; do
  name=$(basename "$(dirname "$ck")")
  (cd "$OUT/old" && "$PY" - "$ck" "$OUT/$name.old.pt") <<'PYEOF'
import dataclasses, sys, torch
import doctrans.config as C
ck = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
dropped = []
for section, cls in (("train", C.TrainConfig), ("data", C.DataConfig)):
    known = {f.name for f in dataclasses.fields(cls)}
    for k in [k for k in ck["config"][section] if k not in known]:
        ck["config"][section].pop(k); dropped.append(f"{section}.{k}")
ck.pop("digest", None)                 # an old doctrans's checkpoint carries none
torch.save(ck, sys.argv[2]); print("old copy without", dropped or "nothing")
PYEOF
  for side in old new; do
    if [ $side = old ]; then dir="$OUT/old"; c="$OUT/$name.old.pt"; else dir="$REPO"; c="$ck"; fi
    (cd "$dir" && DOCTRANS_QUIET=1 "$PY" -m doctrans.cli -q translate -c "$c" -i "$SRC" --docs "$DOCS" \
       --beam "$BEAM" --threads "$THREADS" -o "$OUT/$name.$side.en" 2> "$OUT/$name.$side.log") \
      || { echo "$name: the $side code failed: $OUT/$name.$side.log" >&2; tail -3 "$OUT/$name.$side.log" >&2; exit 1; }
  done
  if cmp -s "$OUT/$name.old.en" "$OUT/$name.new.en"; then
    echo "$name: byte-identical ($(wc -l < "$OUT/$name.new.en") lines)"
  else
    echo "$name: DIFFERENT ($(diff "$OUT/$name.old.en" "$OUT/$name.new.en" | grep -c '^<') lines)"; status=1
  fi
done
exit $status
