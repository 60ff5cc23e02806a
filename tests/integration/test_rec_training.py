"""Reconstructor models through `doctrans train` (models/reconstructor.py; docs/models.md §2.9–2.10):
every pipelines/dp/rec_*.yaml, its reconstructor section on the tiny Transformer, continues from a
sentence-level checkpoint (train.init_from) with the vocabulary grown by data.src_vocab_extra, reads
x̂ and DP labels from PREPARED/dp, and logs its loss terms apart in metrics.jsonl."""
from __future__ import annotations

import json

import numpy as np

import pytest
import torch
import yaml

from conftest import QUIET_TRAIN, REPO, reversal_pairs, write_prepared
from doctrans import stages
from doctrans.config import load_experiment, to_dict

TINY = {b: REPO / "pipelines" / b / "tiny.yaml" for b in ("transformer", "rnnsearch")}
REC_YAMLS = sorted((REPO / "pipelines" / "dp").glob("rec_*.yaml"))
TERMS = {"enc": {"rec_enc"}, "dec": {"rec_dec"}, "both": {"rec_enc", "rec_dec"}, "shared": {"rec"}}


def write_dp(prep, split: str, src: list[str]) -> None:
    """x̂: 他 dropped before the first word of even lines, 它 at the end (the </s> slot) of odd ones."""
    dp, dpp, lab = [], [], []
    for k, line in enumerate(src):
        n = len(line.split())
        if k % 2 == 0:
            dp.append(f"他 {line}"), dpp.append(f"#DP# {line}"), lab.append(" ".join(["他"] + ["N"] * n))
        else:
            dp.append(f"{line} 它"), dpp.append(f"{line} #DP#"), lab.append(" ".join(["N"] * n + ["它"]))
    for suffix, lines in (("dp.bpe.zh", dp), ("dpp.bpe.zh", dpp), ("dplabel", lab)):
        (prep / "dp" / f"{split}.{suffix}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    """The prepared data (with PREPARED/dp) and a 2-update sentence checkpoint per tiny backbone."""
    root = tmp_path_factory.mktemp("rec")
    pairs = reversal_pairs(24)
    prep = write_prepared(root / "prep", pairs, pairs)
    (prep / "dp").mkdir()
    for split in ("train", "dev"):
        write_dp(prep, split, pairs[0])
    ckpts = {}
    for b, path in TINY.items():
        cfg = load_experiment(path, [f"data.prepared={prep}", f"run_dir={root / b}", "train.max_steps=2", *QUIET_TRAIN])
        ckpts[b] = stages.train(cfg) / "last.pt"
    return prep, ckpts, root


@pytest.mark.parametrize("path", REC_YAMLS, ids=lambda p: p.stem)
def test_rec_yaml_trains_from_the_sentence_model(stage1, path):
    prep, ckpts, root = stage1
    shipped = load_experiment(path)
    rec = to_dict(shipped.model.reconstructor)
    assert shipped.train.init_from and (shipped.model.backbone == "transformer" or path.stem.endswith("_rnn"))
    ckpt = ckpts[shipped.model.backbone]
    flow = yaml.safe_dump(rec, default_flow_style=True, allow_unicode=True, width=10**6).strip()
    extra = yaml.safe_dump(list(shipped.data.src_vocab_extra), default_flow_style=True, allow_unicode=True,
                           width=10**6).strip()
    run = root / path.stem
    cfg = load_experiment(TINY[shipped.model.backbone], [f"data.prepared={prep}", f"run_dir={run}", "train.max_steps=2",
                                                        "train.log_every=1",
                                 f"train.init_from={ckpt}", f"model.reconstructor={flow}",
                                 f"data.src_vocab_extra={extra}", *QUIET_TRAIN])
    stages.train(cfg)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in lines if x["kind"] == "train"]
    expect = TERMS[rec["mode"]] | ({"dp"} if rec["dp_head"] != "none" else set())
    assert expect <= set(train[-1]) and "xent_nats" in train[-1]
    old = torch.load(ckpt, weights_only=True)
    new = torch.load(run / "last.pt", weights_only=True)
    n_old = len(old["vocab"]["src"])
    assert new["vocab"]["src"][:n_old] == old["vocab"]["src"]
    assert len(new["vocab"]["src"]) == n_old + len([t for t in dict.fromkeys(shipped.data.src_vocab_extra)
                                                   if t not in old["vocab"]["src"]])
    emb = new["model"]["backbone.src_embed.weight"]
    assert emb.shape[0] == len(new["vocab"]["src"])
    if "#DP#" in new["vocab"]["src"]:
        assert int(new["model"]["placeholder_id"]) == new["vocab"]["src"].index("#DP#")


def test_init_from_accepts_an_extended_source_vocabulary_only(stage1, tmp_path):
    """Rows appended by data.src_vocab_extra keep the checkpoint's ids (its rows copied, the new
    ones fresh); a vocabulary in another order is still refused."""
    prep, ckpts, _ = stage1
    base = [f"data.prepared={prep}", "train.max_steps=1", "train.lr=1e-9", "train.warmup=0",
            f"train.init_from={ckpts['transformer']}", *QUIET_TRAIN]
    run = stages.train(load_experiment(TINY["transformer"], [*base, f"run_dir={tmp_path / 'grown'}",
                                                              "data.src_vocab_extra=[他, '#DP#']"]))
    old = torch.load(ckpts["transformer"], weights_only=True)["model"]["src_embed.weight"]
    new = torch.load(run / "last.pt", weights_only=True)["model"]["src_embed.weight"]
    assert new.shape[0] == old.shape[0] + 2 and torch.allclose(new[:old.shape[0]], old, atol=1e-6)
    lines = (prep / "vocab.zh.txt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "reordered.txt").write_text("".join(f"{x}\n" for x in reversed(lines)), encoding="utf-8")
    with pytest.raises(ValueError, match="vocabularies differ"):
        stages.train(load_experiment(TINY["transformer"], [*base, f"run_dir={tmp_path / 'bad'}",
                                                           f"data.src_vocab={tmp_path / 'reordered.txt'}"]))


@pytest.mark.parametrize("name", ["rec_enc", "rec_joint_predictor", "rec_joint_labeler", "rec_joint_context"])
def test_pronoun_dropout_trains_every_reconstruction_target(stage1, name):
    """train.pronoun_dropout on a reconstructor (x̂ dp / dpp / original; document batches for the
    cross-sentence labeler): the deleted words become DPs of x̂ and the labels, every loss term trains."""
    prep, ckpts, root = stage1
    shipped = load_experiment(REPO / "pipelines" / "dp" / f"{name}.yaml")
    rec = to_dict(shipped.model.reconstructor)
    rec["dp_vocab"] = ["他", "它", "w1", "w2", "w3"]      # the dropped "pronouns" must be DP labels
    flow = yaml.safe_dump(rec, default_flow_style=True, allow_unicode=True, width=10**6).strip()
    run = root / f"{name}_pd"
    cfg = load_experiment(TINY["transformer"], [f"data.prepared={prep}", f"run_dir={run}", "train.max_steps=3",
                                                "train.log_every=1", f"train.init_from={ckpts['transformer']}",
                                                f"model.reconstructor={flow}", "data.src_vocab_extra=[他, 它, '#DP#']",
                                                "train.pronoun_dropout=0.9", "train.pronoun_dropout_words=[w1, w2, w3]",
                                                "train.coword_dropout=0.1", *QUIET_TRAIN])
    stages.train(cfg)
    train = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in train if x["kind"] == "train"]
    expect = TERMS[rec["mode"]] | ({"dp"} if rec["dp_head"] != "none" else set())
    assert len(train) == 3 and all(expect <= set(x) and np.isfinite(x["xent_nats"]) for x in train)


def test_labeler_over_the_han_encoder_trains_and_writes_dps_for_documents(stage1, tmp_path):
    """pipelines/dp/rec_joint_labeler_han.yaml (tiny-sized context): `doctrans train` from the
    sentence checkpoint (its weights two prefixes deep), document batches with pronoun dropout,
    rec + dp + xent logged; then `translate --docs --dp-out` keeps every line, and so does
    `translate --docs --rerank reconstructor` (with --rerank-k 1: the plain translation)."""
    from click.testing import CliRunner

    from doctrans.cli import cli

    prep, ckpts, root = stage1
    shipped = load_experiment(REPO / "pipelines" / "dp" / "rec_joint_labeler_han.yaml")
    rec = to_dict(shipped.model.reconstructor)
    rec["dp_vocab"] = ["他", "它", "w1", "w2", "w3"]
    ctx = {**to_dict(shipped.context), "heads": 2, "d_ff": 32}
    flow = {k: yaml.safe_dump(v, default_flow_style=True, allow_unicode=True, width=10**6).strip()
            for k, v in (("rec", rec), ("ctx", ctx))}
    run = root / "labeler_han"
    cfg = load_experiment(TINY["transformer"], [f"data.prepared={prep}", f"run_dir={run}", "train.max_steps=3",
                                                "train.log_every=1", f"train.init_from={ckpts['transformer']}",
                                                f"model.reconstructor={flow['rec']}", f"context={flow['ctx']}",
                                                "data.src_vocab_extra=[他, 它, '#DP#']", "train.pronoun_dropout=0.9",
                                                "train.pronoun_dropout_words=[w1, w2, w3]", *QUIET_TRAIN])
    stages.train(cfg)
    train = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in train if x["kind"] == "train"]
    assert len(train) == 3 and all({"rec", "dp", "xent_nats"} <= set(x) and np.isfinite(x["rec"]) for x in train)
    new = torch.load(run / "last.pt", weights_only=True)["model"]
    old = torch.load(ckpts["transformer"], weights_only=True)["model"]
    assert set(old) <= {k.removeprefix("backbone.backbone.") for k in new}
    assert any(k.startswith("backbone.han_enc.gate_proj") for k in new) and any(k.startswith("dp_head.") for k in new)
    src = (prep / "dev.bpe.zh").read_text(encoding="utf-8").splitlines()[:6]
    lines = src[:2] + [""] + src[2:]
    (tmp_path / "in.bpe").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    (tmp_path / "in.docs").write_text("".join(f"d{int(i > 3)}\t{i}\n" for i in range(len(lines))), encoding="utf-8")
    r = CliRunner().invoke(cli, ["translate", "-c", str(run / "last.pt"), "-i", str(tmp_path / "in.bpe"),
                                 "--input-format", "bpe", "--docs", str(tmp_path / "in.docs"),
                                 "-o", str(tmp_path / "out.en"), "--dp-out", str(tmp_path / "dp.zh")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    dp = (tmp_path / "dp.zh").read_text(encoding="utf-8").splitlines()
    out = (tmp_path / "out.en").read_text(encoding="utf-8").splitlines()
    assert len(dp) == len(out) == len(lines) and dp[2] == out[2] == ""
    for line, completed in zip(lines, dp):                       # the source words, in order, DPs added
        words = iter(completed.split())
        assert all(w in words for w in line.replace("@@ ", "").split())
    for k in (1, 3):                        # reranked with each document's context; k = 1: the plain 1-best
        r = CliRunner().invoke(cli, ["translate", "-c", str(run / "last.pt"), "-i", str(tmp_path / "in.bpe"),
                                     "--input-format", "bpe", "--docs", str(tmp_path / "in.docs"), "-o",
                                     str(tmp_path / f"rr{k}.en"), "--rerank", "reconstructor", "--rerank-k", str(k)])
        assert r.exit_code == 0, r.output + repr(r.exception)
        reranked = (tmp_path / f"rr{k}.en").read_text(encoding="utf-8").splitlines()
        assert len(reranked) == len(lines) and reranked[2] == ""
    assert (tmp_path / "rr1.en").read_text(encoding="utf-8") == (tmp_path / "out.en").read_text(encoding="utf-8")


def test_init_from_takes_a_shipped_models_name(stage1, tmp_path):
    """train.init_from=NAME reads the shipped model's file (as translate -c NAME does): here its
    vocabularies are not the tiny run's, so the refusal names that file; an unknown name is a
    missing checkpoint as before."""
    prep, _, _ = stage1
    base = [f"data.prepared={prep}", "train.max_steps=1", *QUIET_TRAIN]
    with pytest.raises(ValueError, match=r"init_from .*shipped[/\\]tvsub-transformer-3x3\.pt: its vocabularies differ"):
        stages.train(load_experiment(TINY["transformer"], [*base, f"run_dir={tmp_path / 'a'}",
                                                           "train.init_from=tvsub-transformer-3x3"]))
    with pytest.raises(FileNotFoundError, match="checkpoint not found: no-such-model"):
        stages.train(load_experiment(TINY["transformer"], [*base, f"run_dir={tmp_path / 'b'}",
                                                           "train.init_from=no-such-model"]))
