"""Every backbone memorises 20 sentence pairs (CPU, pipelines/<name>/tiny.yaml, a few hundred updates)."""
from __future__ import annotations

import pytest
import sacrebleu

from conftest import backbones, reversal_pairs, tiny_backbone
from doctrans.inference.translate import TranslateConfig, Translator
from doctrans import stages
from doctrans.training.metrics import read_metrics

# Model overrides that give a backbone's tiny config the capacity to memorise the task (none: as is).
CAPACITY = {"transformer": ("model.d_model=64", "model.d_ff=128", "model.heads=4")}


@pytest.mark.parametrize("backbone", backbones())
def test_overfits_20_pairs_and_beam_search_translates_them(backbone, reversal_prepared, tmp_path):
    """A 2-layer model memorises 20 sentence pairs; beam search then reproduces them (BLEU > 90)."""
    cfg = tiny_backbone(backbone, f"data.prepared={reversal_prepared}", f"run_dir={tmp_path / 'run'}",
                        *CAPACITY.get(backbone, ()), "train.threads=1", "train.max_steps=220", "train.lr=5e-3",
                        "train.warmup=20", "train.eval_every=110", "train.label_smoothing=0.0")
    run_dir = stages.train(cfg)
    dev = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "dev"]
    assert dev[-1]["bleu"] > 90
    src, tgt = reversal_pairs(20)
    out = Translator(TranslateConfig(checkpoint=str(run_dir / "best.pt"), input_format="bpe", tokenized=True,
                                     beam=5)).translate(src)
    bleu = sacrebleu.corpus_bleu(out, [tgt], tokenize="none").score
    assert bleu > 90, list(zip(out, tgt))[:3]
