"""The contrastive pronoun test (evaluation/contrastive.py, issue 17): items from the hand DP
annotation on hand-made lines, contrasts of the same case, and scoring — a model forced to
prefer a pronoun gets exactly the items whose reference has it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from doctrans.data.vocab import Vocab
from doctrans.evaluation.contrastive import contrast_lines, contrasts_of, line_items, read_set, score_items_of
from doctrans.evaluation.cxmi import ScoringSet
from doctrans.data.documents import document_numbers

from test_context_models import model


def test_items_from_the_hand_dp_annotation():
    dp = line_items("没 问题 , 都 办好 了", "没 问题 , 它 都 办好 了", "no problems . it 's all taken care of .")
    assert [(i["pronoun"], i["kind"], i["class"], i["position"]) for i in dp] == [("it", "dp", "3SGN", 3)]
    overt = line_items("我爱你", "我爱你", "i love you .")      # roots found inside a glued token
    assert [(i["pronoun"], i["kind"]) for i in overt] == [("i", "overt"), ("you", "overt")]
    # one 我 overt and one dropped: which English token is which is unknown → no item
    assert line_items("我 去 穿 毛衣", "我 去 穿 我的 毛衣", "i 'll get my sweater .") == []
    # a pronoun class the annotators did not touch and the source lacks → no item
    assert line_items("走 吧", "走 吧", "let 's go , they said .") == []
    # 你们 and 你 are one class ("you" does not tell them apart)
    assert [i["kind"] for i in line_items("要 不要 去", "你们 要 不要 去", "do you want to go ?")] == ["dp"]


def test_contrasts_are_the_same_case():
    assert contrasts_of("he") == ["i", "you", "she", "it", "we", "they"]
    assert contrasts_of("her") == ["me", "you", "him", "it", "us", "them", "my", "your", "his", "its", "our", "their"]
    assert "her" not in contrasts_of("her") and len(set(contrasts_of("you"))) == len(contrasts_of("you"))
    item = {"position": 1, "contrasts": ["she", "they"]}
    assert contrast_lines("did he go ?", item) == ["did she go ?", "did they go ?"]


WORDS = ["i", "you", "he", "she", "it", "we", "they", "me", "him", "her", "us", "them", "go", "did", "?"]
VOCAB = Vocab(["<pad>", "<s>", "</s>", "<unk>"] + WORDS + ["x"])      # 20 ids, the tiny test models' size


class _Forced(torch.nn.Module):
    """A model that adds ``bonus`` to the logit of one token everywhere (it must prefer it)."""

    def __init__(self, inner, token: int, bonus: float):
        super().__init__()
        self.inner, self.token, self.bonus = inner, token, bonus
        self.document = inner.document                      # what the scorer reads of a model

    def encode(self, batch):
        return self.inner.encode(batch)

    def decode_train(self, enc, tgt_in, select=None):
        logits = self.inner.decode_train(enc, tgt_in, select).clone()
        logits[..., self.token] += self.bonus
        return logits


class _Identity:
    @staticmethod
    def apply_bpe(lines):
        return list(lines)


def _scoring(m, ref: list[str], docs: list[str]) -> ScoringSet:
    src = [np.array([4 + k % 10, 2]) for k in range(len(ref))]
    return ScoringSet(m, src, [VOCAB.encode(r) for r in ref], document_numbers(docs), ref, VOCAB, _Identity())


@pytest.mark.parametrize("name", ["concat", "han_decoder"])
def test_a_model_forced_to_prefer_the_reference_scores_one(name):
    ref = ["did he go ?", "did she go ?", "he did go", "did they go ?"]
    items = [{"line": k, "position": ref[k].split().index(p), "pronoun": p, "class": "x", "kind": "dp",
              "contrasts": contrasts_of(p)} for k, p in enumerate(["he", "she", "he", "they"])]
    forced = _Forced(model(name), int(VOCAB.encode("he")[0]), 50.0)
    r = score_items_of(_scoring(forced, ref, ["a", "a", "b", "b"]), ref, items, max_tokens=16)
    assert r["per_item"] == [1, 0, 1, 0]            # only the items whose reference says "he"
    assert r["by_pronoun"]["he"] == {"items": 2, "accuracy": 1.0} and r["accuracy"] == 0.5
    assert r["margin"][0] > 40 and r["margin"][1] < -40


def test_a_malformed_set_names_file_and_line(tmp_path):
    for name, text in (("src.zh", "走\n"), ("ref.en", "did he go ?\n"), ("docs", "a\t0\n"),
                       ("items.jsonl", '{"line": 0, "position": 2, "pronoun": "he", "contrasts": []}\n')):
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"items.jsonl:1: token 2 of reference line 1 is 'go', not 'he'"):
        read_set(tmp_path)
    (tmp_path / "docs").unlink()
    with pytest.raises(FileNotFoundError, match="docs not found"):
        read_set(tmp_path)
