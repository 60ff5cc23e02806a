"""Context-dense training data (data/context_dense.py, issue 52): the selector on a hand-made
prepared + DP-annotated corpus, the count report, and the extra batches that upweight the pairs."""
from __future__ import annotations

import numpy as np
import pytest

from doctrans.data.context_dense import dense_batches, extra_dense_rows
from doctrans.dp.context_dense import count_dense, dp_classes, load_dense
from doctrans.data.documents import DocData

# (segmented source, tokenized English, DP labels: per source token + </s>, the pronoun dropped before it)
DOC_A = [("他 来 了", "he came .", "N N N N"),
         ("很 累", "he is tired .", "他 N N"),                 # dropped 他, 他 one line back: dense (agreement)
         ("你 好 吗", "how are you ?", "N N N N"),
         ("很 好", "i am fine .", "我 N N"),                   # dropped 我 after 你…?: dense (reply)
         ("下雨 了", "it rains .", "它 N N")]                  # dropped 它, no 3rd person before: not dense
DOC_B = [("很 累", "she is tired .", "她 N N"),                # document start: nothing decides
         ("约翰 说", "john says she left .", "N N N"),          # no DP
         ("走 了", "she left .", "她 N N")]                    # English "she" one line back: dense (agreement_en)


def _prepared(tmp_path, target=None):
    lines = DOC_A + DOC_B
    (tmp_path / "dp").mkdir()
    (tmp_path / "train.tok.zh").write_text("".join(f"{z}\n" for z, _, _ in lines), encoding="utf-8")
    (tmp_path / "train.tok.en").write_text("".join(f"{e}\n" for _, e, _ in lines), encoding="utf-8")
    (tmp_path / "dp" / "train.dplabel").write_text("".join(f"{d}\n" for _, _, d in lines), encoding="utf-8")
    docs = [f"a\t{k}" for k in range(len(DOC_A))] + [f"b\t{k}" for k in range(len(DOC_B))]
    (tmp_path / "train.docs").write_text("".join(f"{d}\n" for d in docs), encoding="utf-8")
    if target is not None:
        (tmp_path / "train.target").write_text("".join(f"{int(t)}\n" for t in target), encoding="utf-8")
    return tmp_path


def test_selector_on_a_hand_made_corpus(tmp_path):
    dense, rules = load_dense(_prepared(tmp_path))
    assert np.flatnonzero(dense).tolist() == [1, 3, 7]
    assert rules == {"agreement": 1, "reply": 1, "agreement_en": 2}      # line 1: "he came ." decides too
    assert dp_classes("我 N 你们 N") == ["1SG", "2"]
    report = count_dense(tmp_path)
    assert report["context_dense"] == 3 and report["with_dp"] == 5 and report["lines"] == 8


def test_rules_choose_which_deciding_context_selects(tmp_path):
    _prepared(tmp_path)
    dense, rules = load_dense(tmp_path, rules=("agreement", "agreement_en"))    # the 3rd person, no I/you replies
    assert np.flatnonzero(dense).tolist() == [1, 7] and rules == {"agreement": 1, "agreement_en": 2}
    dense, rules = load_dense(tmp_path, rules=("reply",))
    assert np.flatnonzero(dense).tolist() == [3] and rules == {"reply": 1}
    dense, _ = load_dense(tmp_path, rules=("agreement_en",))                  # line 1: "he came ." decides too
    assert np.flatnonzero(dense).tolist() == [1, 7]
    assert count_dense(tmp_path, rules=("reply",))["rules"] == ["reply"]
    assert count_dense(tmp_path)["rules"] == ["agreement", "agreement_en", "reply"]
    with pytest.raises(ValueError, match=r"unknown rule\(s\) \['replies'\]"):
        load_dense(tmp_path, rules=("replies",))


def test_context_only_lines_are_never_chosen(tmp_path):
    dense, _ = load_dense(_prepared(tmp_path, target=[1, 1, 1, 0, 1, 1, 1, 1]))
    assert np.flatnonzero(dense).tolist() == [1, 7]


def test_missing_annotation_says_what_to_run(tmp_path):
    _prepared(tmp_path)
    (tmp_path / "dp" / "train.dplabel").unlink()
    with pytest.raises(FileNotFoundError, match="annotate-dp"):
        load_dense(tmp_path)


def test_extra_rows_reach_the_share():
    assert extra_dense_rows(100, 10, 0.3) == 29          # (10 + 29) / (100 + 29) ≥ 0.3
    assert (10 + 29) / (100 + 29) >= 0.3 > (10 + 28) / (100 + 28)
    assert extra_dense_rows(100, 40, 0.3) == 0 and extra_dense_rows(100, 0, 0.3) == 0
    with pytest.raises(ValueError, match="share"):
        extra_dense_rows(100, 10, 1.0)


def _doc_data(n_docs=6, per_doc=5):
    n = n_docs * per_doc
    rng = np.random.default_rng(0)
    ids = [np.r_[rng.integers(4, 20, 3), 2] for _ in range(n)]
    doc = np.repeat(np.arange(n_docs), per_doc)
    return DocData(ids, ids, doc, np.tile(np.arange(per_doc), n_docs), np.ones(n, dtype=bool),
                   [str(d) for d in range(n_docs)], np.arange(0, n + 1, per_doc))


def test_dense_batches_upweight_dense_targets_with_their_context():
    data = _doc_data()
    dense = np.zeros(len(data), dtype=bool)
    dense[[2, 7, 13]] = True
    specs = dense_batches(data, dense, 0.5, 200, 2, seed=1, epoch=0)
    targets = np.concatenate([s.rows[s.is_target] for s in specs])
    assert len(targets) == extra_dense_rows(30, 3, 0.5) == 24 and set(targets) == {2, 7, 13}
    assert np.bincount(targets).max() - np.bincount(targets)[[2, 7, 13]].min() <= 1     # drawn evenly
    for s in specs:                                       # each dense target comes with its 2 previous lines
        rows = set(s.rows.tolist())
        assert all({t - 1, t - 2} <= rows for t in s.rows[s.is_target])
    again = dense_batches(data, dense, 0.5, 200, 2, seed=1, epoch=0)
    assert all(np.array_equal(a.rows, b.rows) for a, b in zip(specs, again))     # deterministic
    assert dense_batches(data, dense, 0.05, 200, 2, seed=1, epoch=0) == []


def test_count_dense_command(tmp_path):
    from click.testing import CliRunner

    from doctrans.cli import cli

    _prepared(tmp_path)
    res = CliRunner().invoke(cli, ["annotate-dp", "count-dense", "-p", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    import json
    assert json.loads(res.output)["context_dense"] == 3
    res = CliRunner().invoke(cli, ["annotate-dp", "count-dense", "-p", str(tmp_path)])
    assert res.exit_code == 0 and "8 lines, 5 with a dropped pronoun, 3 context-dense" in res.output
    res = CliRunner().invoke(cli, ["annotate-dp", "count-dense", "-p", str(tmp_path), "--rules", "agreement, reply"])
    assert res.exit_code == 0 and "2 context-dense" in res.output and "agreement 1, reply 1" in res.output
    res = CliRunner().invoke(cli, ["annotate-dp", "count-dense", "-p", str(tmp_path), "--rules", "nope"])
    assert res.exit_code != 0 and "unknown rule(s) ['nope']" in res.output
    (tmp_path / "dp" / "train.dplabel").unlink()
    res = CliRunner().invoke(cli, ["annotate-dp", "count-dense", "-p", str(tmp_path)])
    assert res.exit_code != 0 and "annotate-dp" in res.output
