"""``train.context_dense`` through ``doctrans train`` (issue 52 item 2): the trainer selects the
context-dense pairs of a hand-made annotated corpus by the configured rules, reports them, and adds
the extra batches; an unknown rule is refused before any update."""
from __future__ import annotations

import logging

import pytest

from conftest import QUIET_TRAIN, REPO, write_prepared
from doctrans import stages
from doctrans.config import load_experiment

# tests/unit/test_context_dense.py's corpus: lines 1 (agreement), 3 (reply) and 7 (agreement_en) are dense
DOC_A = [("他 来 了", "he came .", "N N N N"), ("很 累", "he is tired .", "他 N N"),
         ("你 好 吗", "how are you ?", "N N N N"), ("很 好", "i am fine .", "我 N N"), ("下雨 了", "it rains .", "它 N N")]
DOC_B = [("很 累", "she is tired .", "她 N N"), ("约翰 说", "john says she left .", "N N N"), ("走 了", "she left .", "她 N N")]


def _prepared(root):
    lines = DOC_A + DOC_B
    zh, en = [z for z, _, _ in lines], [e for _, e, _ in lines]
    prep = write_prepared(root / "prep", (zh, en), (zh, en))
    docs = [f"a\t{k}" for k in range(len(DOC_A))] + [f"b\t{k}" for k in range(len(DOC_B))]
    for split in ("train", "dev"):
        (prep / f"{split}.docs").write_text("".join(f"{d}\n" for d in docs), encoding="utf-8")
    (prep / "dp").mkdir()
    (prep / "dp" / "train.dplabel").write_text("".join(f"{d}\n" for _, _, d in lines), encoding="utf-8")
    return prep


def _cfg(root, dense: str):
    return load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", [
        f"data.prepared={_prepared(root)}", f"run_dir={root / 'run'}", *QUIET_TRAIN,
        "context={type: tgt_concat, context_sents: 1}", f"train.context_dense={dense}", "train.max_steps=2",
        "train.eval_every=1000", "train.save_every=1000", "train.eval_cxmi_sentences=0"])


@pytest.mark.parametrize("rules, picked", [("[]", "3 of 8 target pairs context-dense"),
                                           ("[agreement, agreement_en]", "2 of 8 target pairs context-dense"),
                                           ("[reply]", "1 of 8 target pairs context-dense")])
def test_the_trainer_selects_by_the_configured_rules(tmp_path, caplog, rules, picked):
    caplog.set_level(logging.INFO, logger="doctrans")
    run = stages.train(_cfg(tmp_path, f"{{share: 0.5, max_distance: 1, rules: {rules}}}"))
    assert (run / "last.pt").is_file()
    said = [r.getMessage() for r in caplog.records if "train.context_dense:" in r.getMessage()]
    assert len(said) == 1 and picked in said[0], said


def test_an_unknown_rule_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match=r"unknown rule\(s\) \['replies'\]"):
        stages.train(_cfg(tmp_path, "{share: 0.5, rules: [replies]}"))
    assert not (tmp_path / "run" / "last.pt").exists()
