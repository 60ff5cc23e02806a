"""Held-out reconstruction loss and DP labels of reconstructor runs (issue 28 smoke check).

Usage: python benchmarks/rec_dev_loss.py PREPARED_DIR RUN_DIR [RUN_DIR …]
       (env TAUS="0.5,0.9": also the DP precision / recall / F at those ``dp_threshold`` values)

For each run: −log R per x̂ token (full softmax, each reconstructor of the model) on the first 12
dev batches (``make_batches``, 4096 tokens), and for a joint DP model the DP labels predicted and
the recall at the gold DPs, for ``RUN_DIR/last.pt`` and for the same model at update 0 (same seed,
``train.init_from`` of its config: the stage-1 weights, reconstructors fresh).
"""
import dataclasses
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
torch.set_num_threads(1)
from doctrans.config import experiment_from_dict
from doctrans.models.build import build_model
from doctrans.models.interface import bind_vocabularies
from doctrans.data.batching import load_parallel, make_batches, collate
from doctrans.data.vocab import Vocab
from doctrans.training.train import attach_reconstruction, initialise_from
from doctrans.runtime.checkpoint import load_checkpoint
Q = Path(sys.argv[1])
for run in sys.argv[2:]:
    ck = load_checkpoint(f"{run}/last.pt")
    cfg = experiment_from_dict(ck["config"])
    sv, tv = Vocab(ck["vocab"]["src"]), Vocab(ck["vocab"]["tgt"])
    res = {}
    for when in ("update 0", "last"):
        torch.manual_seed(cfg.train.seed)
        m = build_model(cfg.model, len(sv), len(tv), 0)
        bind_vocabularies(m, sv, tv)
        if when == "last":
            m.load_state_dict(ck["model"])
        else:
            initialise_from(m, cfg.train.init_from)
        dev, _ = load_parallel(Q / "dev.bpe.zh", Q / "dev.bpe.en", sv, tv, 0)
        attach_reconstruction(cfg, m, "dev", dev, sv)
        m.eval()
        tot = {}; ntok = 0; dp_ok = dp_n = 0
        with torch.no_grad():
            for idx in make_batches(dev, 4096, 0)[:12]:
                b = collate(dev, idx, tv)
                enc = m.encode(b)
                hidden = m.backbone.decode_hidden(enc, b.tgt_in)
                runs = m._run(enc, hidden, b.tgt_in, b.rec_tgt)
                for k, (lp, _) in runs.items():
                    tot[k] = tot.get(k, 0.0) + float(-lp.sum())
                ntok += int(b.rec_tgt.ne(0).sum())
                if m.dp_head is not None:
                    for tau in [float(t) for t in os.environ.get("TAUS", "").split(",") if t]:
                        m.cfg = dataclasses.replace(m.cfg, dp_threshold=tau)
                        p = m.predict_dps(enc, b.tgt_in, b.rec_tgt)
                        g = b.dp_tgt
                        c = res.setdefault(f"{when} tau {tau}", [0, 0, 0])      # correct, predicted, gold
                        c[0] += int(((p == g) & g.ne(0)).sum()); c[1] += int(p.ne(0).sum()); c[2] += int(g.ne(0).sum())
                    m.cfg = dataclasses.replace(m.cfg, dp_threshold=0.0)
                    pred = m.predict_dps(enc, b.tgt_in, b.rec_tgt)
                    gold = b.dp_tgt
                    at = gold.ne(0)
                    dp_ok += int((pred[at] == gold[at]).sum()); dp_n += int(at.sum())
                    res.setdefault(when + " dp predicted", 0)
                    res[when + " dp predicted"] += int(pred.ne(0).sum())
        res[when] = {k: round(v / ntok, 3) for k, v in tot.items()}
        if dp_n:
            res[when + " dp recall@gold"] = round(dp_ok / dp_n, 3); res["gold dps"] = dp_n
    for key, v in list(res.items()):
        if " tau " in key:
            prec, rec = v[0] / max(v[1], 1), v[0] / max(v[2], 1)
            res[key] = {"P": round(prec, 3), "R": round(rec, 3), "F": round(2 * prec * rec / max(prec + rec, 1e-9), 3),
                        "predicted": v[1]}
    print(run, json.dumps(res, ensure_ascii=False), flush=True)
