"""``annotate-dp jackknife --folds K``: folds partition the documents, each fold is completed by a
generator that never saw it, line counts are kept, reruns resume (doctrans/dp/jackknife.py)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from conftest import REPO
from doctrans.cli import cli
from doctrans.dp.jackknife import JackknifeConfig, fold_of_docs
from doctrans.dp.jackknife import annotate_in_folds as run

WORDS = ["吃", "饭", "学校", "今天", "明天", "很", "好", "来", "了", "吗"]


def _corpus(root: Path, n_docs: int = 12, per_doc: int = 14) -> Path:
    """A prepared dataset + annotate-dp labels where 去 always lost a pronoun: 我 in the documents
    of fold 0 (even document numbers, K = 2) and 你 in those of fold 1. A generator trained on
    one fold only ever learns that fold's pronoun, so the completion of the OTHER fold shows
    which generator completed it. Every 7th training line is context-only (train.target 0)."""
    rng = random.Random(0)
    prep = root / "prep"
    (prep / "dp").mkdir(parents=True)
    for split, docs in (("train", n_docs), ("dev", 4), ("test", 2)):
        tok, lab, dcs, tgt = [], [], [], []
        for d in range(docs):
            for k in range(per_doc):
                s = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))] + ["去"] + [rng.choice(WORDS)]
                rng.shuffle(s)
                pron = "我" if d % 2 == 0 else "你"
                tok.append(" ".join(s))
                lab.append(" ".join([pron if w == "去" else "N" for w in s] + ["N"]))
                dcs.append(f"{split}{d}\t{k}")
                tgt.append("0" if len(tgt) % 7 == 3 else "1")
        if split == "test":                           # an empty line: empty in, empty out
            tok[3], lab[3] = "", "N"
        (prep / f"{split}.tok.zh").write_text("".join(f"{x}\n" for x in tok), encoding="utf-8")
        (prep / "dp" / f"{split}.dplabel").write_text("".join(f"{x}\n" for x in lab), encoding="utf-8")
        (prep / f"{split}.docs").write_text("".join(f"{x}\n" for x in dcs), encoding="utf-8")
        if split == "train":
            (prep / "train.target").write_text("".join(f"{x}\n" for x in tgt), encoding="utf-8")
    (prep / "bpe.codes.zh").write_text("#version: 0.2\n", encoding="utf-8")
    (prep / "meta.json").write_text(json.dumps({"version": 1, "src": "zh", "tgt": "en", "lowercase": True,
                                                "bpe": {"merges": 0, "joint": False}}), encoding="utf-8")
    return prep


TINY = ["data.min_freq=1", "train.threads=1", "train.max_epochs=8", "train.tensorboard=false", "train.plot=false"]


def _lines(p: Path) -> list[str]:
    return p.read_text(encoding="utf-8").splitlines()


def test_fold_of_docs_round_robin_and_too_few_documents():
    assert fold_of_docs(["a", "a", "b", "c", "c", "d", "e"], 2) == {"a": 0, "b": 1, "c": 0, "d": 1, "e": 0}
    with pytest.raises(ValueError, match="2 document"):
        fold_of_docs(["a", "b", "b"], 3)


@pytest.fixture(scope="module")
def jackknifed(tmp_path_factory):
    root = tmp_path_factory.mktemp("jk")
    prep = _corpus(root)
    torch.manual_seed(0)
    res = CliRunner().invoke(cli, ["-q", "annotate-dp", "-p", str(prep), "--jackknife", "2", "--jackknife-config",
                                   str(REPO / "pipelines" / "dp" / "tiny.yaml"),
                                   *[x for o in TINY for x in ("--jackknife-set", o)]])
    assert res.exit_code == 0, res.output
    return prep, prep / "dp_jk2"


def test_folds_partition_the_documents_and_no_fold_is_completed_by_its_own_generator(jackknifed):
    prep, out = jackknifed
    target = [k for k, f in enumerate(_lines(prep / "train.target")) if f == "1"]
    docs = [x.split("\t")[0] for x in _lines(prep / "train.docs")]
    folds = [[int(x) for x in _lines(out / "folds" / str(k) / "train.lines")] for k in range(2)]
    assert sorted(folds[0] + folds[1]) == target                       # a partition of the target lines
    for k in range(2):                                                 # whole documents, dealt round-robin
        assert {int(docs[i][len("train"):]) % 2 for i in folds[k]} == {k}
        ck = torch.load(out / "folds" / str(k) / "best.pt", weights_only=True)
        assert ck["config"]["data"]["folds"] == 2 and ck["config"]["data"]["fold"] == k
    dp = _lines(out / "train.dp.zh")
    inserted = {k: [t for i in folds[k] for t in dp[i].split() if t in ("我", "你")] for k in range(2)}
    # fold 0 (我 documents) was completed by the generator trained on fold 1 (你) and vice versa
    assert inserted[0] and set(inserted[0]) == {"你"}, inserted[0][:10]
    assert inserted[1] and set(inserted[1]) == {"我"}, inserted[1][:10]


def test_outputs_keep_line_counts_and_the_annotate_dp_layout(jackknifed):
    prep, out = jackknifed
    tok = _lines(prep / "train.tok.zh")
    flags = _lines(prep / "train.target")
    for name in ("train.dp.zh", "train.dpp.zh", "train.dplabel", "train.dp.bpe.zh", "train.dpp.bpe.zh",
                 "train.dp.srcbpe.zh"):
        assert len(_lines(out / name)) == len(tok), name
    dp, lab = _lines(out / "train.dp.zh"), _lines(out / "train.dplabel")
    for i, f in enumerate(flags):
        assert len(lab[i].split()) == len(tok[i].split()) + 1
        # a label names the pronoun inserted before that token (or at the end, </s>)
        rebuilt = [x for t, lab_t in zip(tok[i].split() + [""], lab[i].split()) for x in
                   ([lab_t] if lab_t != "N" else []) + ([t] if t else [])]
        assert rebuilt == dp[i].split()
        if f == "0":                                                   # context-only: untouched
            assert dp[i] == tok[i] and set(lab[i].split()) == {"N"}
    test = _lines(prep / "test.tok.zh")
    for name in ("test.dp.zh", "test.dpp.zh", "test.dp.bpe.zh", "dev.dp.bpe.zh"):
        assert len(_lines(out / name)) == len(_lines(prep / f"{name.split('.')[0]}.tok.zh")), name
    assert test[3] == "" and _lines(out / "test.dp.zh")[3] == ""
    assert "#DP#" in (out / "test.dpp.zh").read_text(encoding="utf-8")
    assert (out / "vocab.dp.zh.txt").is_file() and (out / "train.docs").read_text() == (prep / "train.docs").read_text()
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["jackknife"]["folds"] == 2 and meta["dps_inserted"]["train"] > 0
    assert (out / "generator.txt").read_text().strip() == ":".join(
        str(out / "folds" / str(k) / "best.pt") for k in range(2))


def test_rerun_resumes_without_training_again(jackknifed):
    prep, out = jackknifed
    before = {k: (out / "folds" / str(k) / "best.pt").stat().st_mtime_ns for k in range(2)}
    res = run(JackknifeConfig(prepared=str(prep), folds=2, config=str(REPO / "pipelines" / "dp" / "tiny.yaml"),
                              overrides=tuple(TINY)))
    assert {k: (out / "folds" / str(k) / "best.pt").stat().st_mtime_ns for k in range(2)} == before
    assert res["out"] == out and (out / "meta.json").is_file()


def test_source_bpe_of_an_existing_annotation(tmp_path):
    prep = _corpus(tmp_path)
    (prep / "dp" / "train.dp.zh").write_text("我 去 学校\n\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["annotate-dp", "-p", str(prep), "--source-bpe", "-o", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert _lines(tmp_path / "o" / "train.dp.srcbpe.zh") == ["我 去 学校", ""]
    assert not (tmp_path / "o" / "dev.dp.srcbpe.zh").exists()          # no dev.dp.zh: skipped


def test_two_runs_never_write_one_output(jackknifed):
    import fcntl

    prep, out = jackknifed
    with open(out / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)                             # as a running jackknife holds it
        held.truncate(0)
        held.write("4242\n")
        held.flush()
        with pytest.raises(ValueError, match="another annotate-dp jackknife .pid 4242"):
            run(JackknifeConfig(prepared=str(prep), folds=2, config=str(REPO / "pipelines" / "dp" / "tiny.yaml"),
                                overrides=tuple(TINY)))
    assert (out / "meta.json").is_file()                           # the refused run touched nothing


def test_bad_inputs(tmp_path):
    prep = _corpus(tmp_path, n_docs=1)
    r = CliRunner().invoke(cli, ["annotate-dp", "-p", str(prep), "--jackknife", "2", "--jackknife-config",
                                 str(REPO / "pipelines" / "dp" / "tiny.yaml")])
    assert r.exit_code != 0 and "1 document(s) for 2 folds" in str(r.exception)
    r = CliRunner().invoke(cli, ["annotate-dp", "-p", str(prep), "--jackknife", "1"])
    assert r.exit_code == 2 and "--folds" in r.output                 # the former spelling maps to --folds
    (prep / "dp" / "train.dplabel").unlink()
    with pytest.raises(FileNotFoundError, match="annotate-dp corpus -p"):
        run(JackknifeConfig(prepared=str(prep), folds=2))
