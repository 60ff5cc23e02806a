"""Lexical shortlists (issue 30: decoding speed): the lexical table and its file on hand-made
examples, the candidates of a batch, the restricted output layer, and beam search over a
shortlist — exactly the full search of a model that can emit nothing else."""
from __future__ import annotations

import logging
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import backbones, tiny_backbone
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.inference.shortlist import (Shortlist, VocabularyMap, build_vmap, lexical_counts, read_vmap,
                                          write_vmap)
from doctrans.layers.output import project
from doctrans.models.build import build_model
from doctrans.inference.config import SearchOptions

SRC = Vocab(["<pad>", "<s>", "</s>", "<unk>", "猫", "狗", "跑", "了"])
TGT = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(12)] + ["cat", "dog", "runs", "ran"])


def test_lexical_counts_and_table_from_a_hand_aligned_corpus():
    src = ["猫 跑 了", "狗 跑 了", "猫 跑"]
    tgt = ["cat ran", "dog ran", "cat runs"]
    links = ["0-0 1-1 2-1", "0-0 1-1", "0-0 1-1"]
    counts = lexical_counts(src, tgt, links)
    assert counts["猫"] == Counter({"cat": 2}) and counts["跑"] == Counter({"ran": 2, "runs": 1})
    assert counts["了"] == Counter({"ran": 1})
    freq = Counter(w for line in tgt for w in line.split())            # cat 2, ran 2, dog 1, runs 1
    vm = build_vmap(counts, freq, top_k=1, frequent=1)
    assert vm.rules == {"狗": ["dog"], "了": ["ran"], "猫": ["cat"], "跑": ["ran"]}
    assert vm.always == ["cat"]                                         # ties: the token order
    assert build_vmap(counts, freq, top_k=5, frequent=0).rules["跑"] == ["ran", "runs"]
    # tokens outside the model's vocabularies are left out (the model reads/writes them as <unk>)
    small_src, small_tgt = Vocab(["<pad>", "<s>", "</s>", "<unk>", "猫", "跑"]), Vocab(["<pad>", "<s>", "</s>", "<unk>", "runs"])
    vm = build_vmap(counts, freq, top_k=5, frequent=2, src_vocab=small_src, tgt_vocab=small_tgt)
    assert vm.rules == {"猫": [], "跑": ["runs"]} and vm.always == ["runs"]
    with pytest.raises(ValueError, match="alignment line 2: link '0-5'"):
        lexical_counts(src, tgt, ["0-0", "0-5", ""])
    with pytest.raises(ValueError, match="line-parallel"):
        lexical_counts(src, tgt[:2], links)


def test_vmap_file_round_trip_and_bad_lines(tmp_path):
    vm = VocabularyMap(["t0", "t1"], {"猫": ["cat", "t2"], "跑": ["runs"]})
    path = tmp_path / "sl.vmap"
    write_vmap(vm, path)
    assert path.read_text(encoding="utf-8") == "\tt0 t1\n猫\tcat t2\n跑\truns\n"    # CTranslate2's vmap format
    assert read_vmap(path) == vm
    for text, message in (("\tt0\n猫 cat\n", r"sl2.vmap:2: expected 'source<TAB>targets'"),
                          ("猫 狗\tcat\n", r"sl2.vmap:1: source key '猫 狗' has several tokens"),
                          ("猫\tcat\n\n猫\tdog\n", r"sl2.vmap:3: source token '猫' given twice")):
        (tmp_path / "sl2.vmap").write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            read_vmap(tmp_path / "sl2.vmap")


def test_candidates_of_a_batch_are_the_union_of_its_source_tokens_rules(caplog):
    vm = VocabularyMap(["t0"], {"猫": ["cat", "t5"], "狗": ["dog"], "跑": ["runs", "ran"]})
    sl = Shortlist(vm, SRC, TGT)
    batch = torch.tensor([[4, 6, 2], [4, 2, 0]])                            # 猫 跑 </s>, 猫 </s> <pad>
    want = sorted([TGT.eos_id, TGT.unk_id] + [TGT.index[t] for t in ("t0", "cat", "t5", "runs", "ran")])
    assert sl.candidates(batch).tolist() == want                            # 狗 absent: no dog
    assert sl.candidates(torch.tensor([[7, 2]])).tolist() == sorted([TGT.eos_id, TGT.unk_id, TGT.index["t0"]])
    with caplog.at_level(logging.WARNING):
        Shortlist(VocabularyMap(["t0", "nope"], {"猫": ["cat"], "狗": ["dog"]}), SRC, TGT)
    assert "1 target token(s) not in the model's vocabularies" in caplog.text
    with pytest.raises(ValueError, match="another model or dataset"):
        Shortlist(VocabularyMap([], {"x": ["cat"], "y": ["dog"], "猫": ["cat"]}), SRC, TGT)


def test_project_equals_the_full_output_layer_columns_and_refreshes_its_cache():
    torch.manual_seed(0)
    proj = nn.Linear(8, 20)
    h = torch.randn(3, 8)
    vocab = torch.tensor([2, 5, 6, 19])
    with torch.no_grad():
        full = proj(h)
        assert torch.allclose(project(proj, h, vocab), full[:, vocab], atol=1e-6)
        assert torch.allclose(project(proj, h, vocab), full[:, vocab], atol=1e-6)     # cached rows
        proj.weight.mul_(2.0)                                                          # weights change
        assert torch.allclose(project(proj, h, vocab), proj(h)[:, vocab], atol=1e-6)
        other = torch.tensor([0, 1])
        assert torch.allclose(project(proj, h, other), proj(h)[:, other], atol=1e-6)   # another candidate set
        assert project(proj, h, None).shape == (3, 20)
    out = project(proj, h, vocab)                                                      # with gradients
    out.sum().backward()
    assert proj.weight.grad[vocab].abs().sum() > 0 and proj.weight.grad[3].abs().sum() == 0
    q = torch.ao.quantization.quantize_dynamic(nn.Sequential(proj), {nn.Linear}, dtype=torch.qint8)[0]
    with torch.no_grad():                                                              # not an nn.Linear: columns
        assert torch.equal(project(q, h, vocab), q(h)[:, vocab])


class OnlyAllowed(nn.Module):
    """``model`` whose every step gives -inf to the target ids outside ``allowed`` (C,): the
    full-vocabulary search of a model that can emit nothing else."""

    def __init__(self, model, allowed: torch.Tensor):
        super().__init__()
        self.model, self.pad_id, self.max_target_len = model, model.pad_id, model.max_target_len
        self.mask = torch.full((len(TGT),), -torch.inf)
        self.mask[allowed] = 0.0

    def encode(self, batch):
        return self.model.encode(batch)

    def init_state(self, enc):
        return self.model.init_state(enc)

    def decode_step(self, state, prev_tokens):
        hidden, state = self.model.decode_step_hidden(state, prev_tokens)
        return F.log_softmax(self.model.output_logits(hidden).float() + self.mask, dim=-1), state


@pytest.mark.parametrize("backbone", backbones())
@pytest.mark.parametrize("allowed,beam", [(["t0", "t1", "t4", "t7", "t9", "cat", "ran"], 4),   # C = 9 >= 2K
                                          (["t2", "t3", "t8", "dog", "runs"], 4),              # C = 7 < 2K: K copies
                                          (TGT.tokens[2:], 3)])         # all but <pad>/<s> (not in any shortlist)
def test_beam_search_over_a_shortlist_is_the_full_search_of_a_model_restricted_to_it(backbone, allowed, beam):
    torch.manual_seed(4)
    m = build_model(tiny_backbone(backbone).model, len(SRC), len(TGT)).eval()
    sl = Shortlist(VocabularyMap(allowed, {}), SRC, TGT)
    cand = sl.candidates(torch.tensor([[4, 2]]))
    src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0], [5, 4, 7, 2]])
    with torch.no_grad():
        got = beam_search(m, src, TGT, SearchOptions(beam=beam, lenpen=1.0, max_len_ratio=1.5, max_len_extra=2, nbest=beam), shortlist=sl)
        ref = beam_search(OnlyAllowed(m, cand), src, TGT, SearchOptions(beam=beam, lenpen=1.0, max_len_ratio=1.5, max_len_extra=2, nbest=beam))
    assert got.tokens == ref.tokens
    assert got.scores == pytest.approx(ref.scores, abs=1e-5)
    assert [[t for _, t in n] for n in got.nbest] == [[t for _, t in n] for n in ref.nbest]
    assert all(t in set(cand.tolist()) for hyp in got.tokens for t in hyp)
