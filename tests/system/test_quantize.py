"""`doctrans translate --quantize int8`: int8 dynamic quantization of the output layer and the
feed-forward layers of a Transformer that memorised 20 pairs keeps its translations: corpus
BLEU within 2 points of float32 (the stated tolerance; README, benchmarks/RESULTS.md for TVsub)."""
from __future__ import annotations

import pytest
import sacrebleu
import torch

from conftest import reversal_pairs, tiny_backbone
from doctrans import stages
from doctrans.inference.translate import TranslateConfig, Translator, quantize_int8

TOLERANCE = 2.0        # BLEU points int8 may lose against float32 on the memorised pairs


def test_int8_stays_within_tolerance_of_fp32(reversal_prepared, tmp_path):
    cfg = tiny_backbone("transformer", f"data.prepared={reversal_prepared}", f"run_dir={tmp_path / 'run'}",
                        "model.d_model=64", "model.d_ff=128", "model.heads=4", "train.threads=1",
                        "train.max_steps=220", "train.lr=5e-3", "train.warmup=20", "train.eval_every=220",
                        "train.label_smoothing=0.0", "train.eval_bleu=false", "train.metric=xent_nats",
                        "train.metric_mode=min", "train.plot=false", "train.tensorboard=false")
    ckpt = stages.train(cfg) / "last.pt"
    src, tgt = reversal_pairs(20)
    src_in = src[:10] + [""] + src[10:]
    bleu = {}
    for q in ("none", "int8"):
        tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=5, quantize=q))
        out = tr.translate(src_in)
        assert len(out) == 21 and out[10] == ""
        bleu[q] = sacrebleu.corpus_bleu(out[:10] + out[11:], [tgt], tokenize="none").score
        kinds = {type(m).__module__ for m in tr.model.modules()}
        assert any("quantized" in k for k in kinds) == (q == "int8")
    assert bleu["none"] > 90, bleu
    assert bleu["int8"] >= bleu["none"] - TOLERANCE, bleu


def test_quantize_replaces_only_output_and_ffn_layers():
    from doctrans.models.build import build_model
    from doctrans.models.backbones.transformer import TransformerConfig

    model = build_model(TransformerConfig(layers_enc=1, layers_dec=1, d_model=16, heads=2, d_ff=32), 20, 20).eval()
    q = quantize_int8(model)
    quantized = sorted(n for n, m in q.named_modules()
                       if type(m).__module__.startswith("torch.ao.nn.quantized") and type(m).__name__ == "Linear")
    assert quantized == ["decoder.0.ffn.w1", "decoder.0.ffn.w2", "encoder.0.ffn.w1", "encoder.0.ffn.w2", "out_proj"]
    assert isinstance(q.decoder[0].self_attn.qkv, torch.nn.Linear)             # attention stays float
    src = torch.tensor([[5, 6, 7, 2]])
    from doctrans.models.interface import SearchBatch
    a, b = model.encode(SearchBatch(src)).states, q.encode(SearchBatch(src)).states
    assert torch.allclose(a, b, atol=0.1) and not torch.equal(a, b)             # close, but really int8
    with pytest.raises(ValueError, match="quantize must be"):
        quantize_int8(model, "int4")
