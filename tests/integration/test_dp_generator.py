"""DP generators: shapes/masking, learning a synthetic drop rule, Table 4.6 features, N-best, apply."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from conftest import REPO
from doctrans.cli import cli
from doctrans.config import ConfigError
from doctrans.dp.apply import n_best, read_nbest
from doctrans.dp.config import load_dp_config
from doctrans.dp.data import DPSentence, context_of, label_inventory, surface_features
from doctrans.dp.generator import DPGenerator, one_best
from doctrans.dp.models.labeler import DPLabeler
from doctrans.dp.models.thesis import ElmanDetector, SurfaceMLP
from doctrans.dp.train import DevScorer, label_scores
from doctrans.dp.train import train_generator as run
from doctrans.training.optim import MixedAdam


# ---------------------------------------------------------------- models

def test_shapes_and_padding_do_not_leak():
    torch.manual_seed(0)
    det = ElmanDetector(20, emb=8, hidden=6, window=5).eval()
    toks = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    assert det(toks).shape == (2, 4, 2)
    lab = DPLabeler(20, 31, emb=8, hidden=6, layers=2, dropout=0.0).eval()
    ctx = torch.tensor([[9, 10, 2], [0, 0, 0]])
    out = lab(toks, ctx)
    assert out.shape == (2, 4, 31)
    # a sentence's logits do not depend on the padding or on the other sentence of the batch
    alone = lab(torch.tensor([[8, 2]]), torch.tensor([[0]]))
    assert torch.allclose(out[1, :2], alone[0], atol=1e-5)
    # an all-pad context row equals "no context"
    assert torch.allclose(lab(torch.tensor([[8, 2]]), None), alone, atol=1e-6)
    mlp = SurfaceMLP(50, n_slots=7, n_pronouns=30, emb=4, hidden=5)
    assert mlp(torch.randint(0, 50, (3, 7))).shape == (3, 30)
    with pytest.raises(ValueError, match="odd"):
        ElmanDetector(20, window=4)


# ---------------------------------------------------------------- synthetic rule

def _synthetic(root: Path, n_train: int = 300, n_dev: int = 60) -> Path:
    """Random sentences over a small vocabulary; 我 is dropped before 去 and 你 before 来
    (neither pronoun appears in the text). Writes a prepared dir + annotate-dp style labels."""
    rng = random.Random(0)
    words = ["吃", "饭", "学校", "今天", "明天", "很", "好", "去", "来", "了", "吗"]
    prep, ann = root / "prep", root / "prep" / "dp"
    ann.mkdir(parents=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        toks, labs, docs = [], [], []
        for k in range(n):
            s = [rng.choice(words) for _ in range(rng.randint(2, 7))]
            lab = [{"去": "我", "来": "你"}.get(w, "N") for w in s] + ["N"]
            toks.append(" ".join(s))
            labs.append(" ".join(lab))
            docs.append(f"d{k // 20}\t{k % 20}")
        (prep / f"{split}.tok.zh").write_text("\n".join(toks) + "\n", encoding="utf-8")
        (ann / f"{split}.dplabel").write_text("\n".join(labs) + "\n", encoding="utf-8")
        (prep / f"{split}.docs").write_text("\n".join(docs) + "\n", encoding="utf-8")
    return prep


# the labeler's dev detection and prediction F1 are 1.0 after its first epoch, and stay so to tiny.yaml's
# 30 (2026-11-28, both rows): 4 epochs train the same best.pt in a seventh of the time
@pytest.mark.parametrize("yaml_name, extra", [
    ("tiny", ["train.max_epochs=4"]),
    ("tiny", ["model.context_next=1", "train.max_epochs=4"]),
    ("tiny_thesis", ["model.det_emb=16", "model.det_hidden=16", "model.feat_emb=8", "model.feat_hidden=16",
                     "model.surface_epochs=30", "train.max_epochs=12", "train.lr=0.02", "model.feat_min_freq=1"]),
])
def test_generator_learns_a_synthetic_drop_rule(tmp_path, yaml_name, extra):
    prep = _synthetic(tmp_path)
    cfg = load_dp_config(REPO / "pipelines" / "dp" / f"{yaml_name}.yaml",
                         [f"data.prepared={prep}", f"run_dir={tmp_path / 'run'}", "data.min_freq=1",
                          "train.threads=1", *extra])
    run_dir = run(cfg)
    gen = DPGenerator.load(run_dir / "best.pt")
    dev = [DPSentence(l.split(), None, "d", k) for k, l in
           enumerate((prep / "dev.tok.zh").read_text(encoding="utf-8").splitlines())]
    gold = [l.split() for l in (prep / "dp" / "dev.dplabel").read_text(encoding="utf-8").splitlines()]
    from doctrans.dp.generator import decide
    pred = [decide(p, gen.labels, gen.threshold) for p in gen.distributions(dev)]
    sc = label_scores(pred, gold)
    assert sc["detection"]["f1"] > 0.95 and sc["prediction"]["f1"] > 0.95, sc
    lines = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "dev" and "prediction_f1" in r for r in lines)
    assert (run_dir / "learning_curves.png").is_file() and (run_dir / "tensorboard").is_dir()


def test_resume_continues_from_last_epoch_with_the_decayed_lr(tmp_path):
    prep = _synthetic(tmp_path, 80, 20)
    args = [f"data.prepared={prep}", f"run_dir={tmp_path / 'run'}", "data.min_freq=1", "train.threads=1",
            "train.lr=0.01", "train.lr_decay=0.5", "train.lr_decay_start=1"]
    run(load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", args + ["train.max_epochs=2"]))
    ck = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    assert [g["lr"] for st in ck["optimizer"] for g in st["param_groups"]] == [0.005, 0.005]
    run(load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", args + ["train.max_epochs=3"]), resume=True)
    recs = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    recs = [r for r in recs if r["kind"] == "dev"]
    assert [r["epoch"] for r in recs] == [1, 2, 3]
    assert [r["lr"] for r in recs] == [0.01, 0.005, 0.0025]
    with pytest.raises(ConfigError, match="lr_decay"):
        load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", ["train.lr_decay=0"])


def test_mixed_adam_sparse_equals_dense_adam_with_clipping():
    """Step 1 of lazy Adam on a sparse table equals dense Adam (untouched rows have zero
    moments either way); the global clip norm counts the sparse rows too."""
    toks = torch.tensor([[3, 4, 5, 2], [6, 2, 0, 0]])
    gold = torch.tensor([[0, 1, 0, 0], [1, 0, -100, -100]])
    models = []
    for sparse in (False, True):
        torch.manual_seed(0)
        m = ElmanDetector(12, emb=4, hidden=5, window=3, sparse=sparse)
        opt = MixedAdam(m, 0.01)
        assert len(opt.opts) == 1 + sparse
        loss = torch.nn.functional.cross_entropy(m(toks).flatten(0, 1), gold.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        if not sparse:
            ref_norm = float(torch.nn.utils.get_total_norm([p.grad for p in m.parameters()]))
        opt.step(max_norm=0.05)          # below the gradient norm: clipping is active
        models.append(m)
    assert ref_norm > 0.1
    grads = [[p.grad.to_dense() if p.grad.is_sparse else p.grad for p in m.parameters()] for m in models]
    for a, b in zip(*grads):                                   # the same clipped gradients
        assert torch.allclose(a, b, atol=1e-7)
    assert float(torch.nn.utils.get_total_norm(grads[1])) == pytest.approx(0.05, rel=1e-4)
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters()):
        assert torch.allclose(a, b, atol=2e-4), name          # Adam's g/|g| amplifies rounding of tiny g
    # rows not in the batch stay untouched, in both
    torch.manual_seed(0)
    fresh = ElmanDetector(12, emb=4, hidden=5, window=3)
    assert torch.equal(models[1].embed.weight[7:], fresh.embed.weight[7:])
    assert not torch.equal(models[1].embed.weight[3], fresh.embed.weight[3])


def test_dev_scorer_tunes_threshold_against_the_hand_oracle(tmp_path):
    """Two dev sentences; the oracle has 我 before 想 and nothing in the second. P(N) is 0.6
    at the true slot (我 best) and 0.8 at a wrong slot: τ must land in (0.6, 0.8]."""
    tv = tmp_path / "tvsub" / "dev"
    tv.mkdir(parents=True)
    (tv / "dev.seg.zh").write_text("想 去 。\n好 的\n", encoding="utf-8")
    (tv / "dev.oracle-dp.seg.zh").write_text("我 想 去 。\n好 的\n", encoding="utf-8")
    prep = tmp_path / "prep"
    prep.mkdir()
    (prep / "meta.json").write_text(json.dumps({"config": {"dev_prefix": str(tv / "dev")}}))
    dev = [DPSentence(["想", "去", "。"], ["N"] * 4, "d", 0), DPSentence(["好", "的"], ["N"] * 3, "d", 1)]
    labels = label_inventory()
    probs = []
    for s in dev:
        p = np.zeros((len(s.tokens) + 1, len(labels)), dtype=np.float32)
        p[:, 0] = 0.99
        p[:, labels.index("他")] = 0.01
        probs.append(p)
    probs[0][0, 0], probs[0][0, labels.index("我")], probs[0][0, labels.index("他")] = 0.6, 0.3, 0.1
    probs[1][1, 0], probs[1][1, labels.index("你")], probs[1][1, labels.index("他")] = 0.8, 0.2, 0.0
    cfg = load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", [f"data.prepared={prep}"])
    tau, sc = DevScorer(cfg, dev, prep)(probs, labels)
    assert sc["against"] == "oracle"
    assert 0.6 < tau <= 0.8
    assert sc["detection"]["f1"] == 1.0 and sc["prediction"]["f1"] == 1.0
    # the annotated labels say "no DP anywhere": the same scorer without an oracle prefers no DP
    tau_a, sc_a = DevScorer(load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml",
                                           [f"data.prepared={prep}", "data.tune_on=annotated"]), dev, prep)(probs, labels)
    assert sc_a["against"] == "annotated" and tau_a <= 0.6
    # no oracle found → falls back to the annotated labels
    (prep / "meta.json").write_text("{}")
    assert DevScorer(cfg, dev, prep)(probs, labels)[1]["against"] == "annotated"


# ---------------------------------------------------------------- features, context

def test_table_4_6_features_on_a_hand_document():
    doc = [DPSentence("我 昨天 看到 老师".split(), None, "A", 0),
           DPSentence("说 你 要 去 学校".split(), None, "A", 1),          # DP before 说 (pos 0)
           DPSentence("他 也 去 北京".split(), None, "A", 2),
           DPSentence("她 不 来".split(), None, "B", 3)]                 # another document
    f = surface_features(doc, 1, 0, word_window=2, sent_window=2)
    assert len(f) == 4 * 2 + 3 + 3 + 5 + 5 + 5 + 5
    assert f[:4] == ["w-2=<s>", "w-1=<s>", "w0=说", "w1=你"]
    assert f[4:8] == ["p-2=<s>", "p-1=<s>", "p0=v", "p1=r"]                  # jieba POS tags
    assert f[8:11] == ["prb0=∅", "prb1=∅", "prb2=∅"]                         # nothing before pos 0
    assert f[11:14] == ["pra0=你", "pra1=∅", "pra2=∅"]
    assert f[14] == "psb0=我" and f[19] == "psa0=他" and f[20] == "psa1=∅"     # 她 is in doc B
    assert "nsb0=老师" in f and "nsa0=北京" in f
    assert context_of(doc, 2, n_prev=2, max_tokens=0) == "我 昨天 看到 老师 </s> 说 你 要 去 学校 </s>".split()
    assert context_of(doc, 3, n_prev=2, max_tokens=0) == []                   # document boundary
    # following sentences after a <s> marker, within the document, nearest kept under the cap
    assert context_of(doc, 1, n_prev=1, max_tokens=0, n_next=2) == \
        "我 昨天 看到 老师 </s> <s> 他 也 去 北京 </s>".split()
    assert context_of(doc, 0, n_prev=1, max_tokens=3, n_next=2) == "<s> 说 你 要".split()
    assert context_of(doc, 3, n_prev=1, max_tokens=0, n_next=1) == ["<s>"]


# ---------------------------------------------------------------- 1-best and N-best

def test_one_best_and_n_best_ordering_and_scores():
    labels = label_inventory()
    i_wo, i_ni, i_ta = labels.index("我"), labels.index("你"), labels.index("他")
    probs = np.zeros((3, len(labels)))
    probs[:, 0] = 1.0                                  # default: no DP
    probs[0] = 0.0
    probs[0, [0, i_wo, i_ni]] = [0.2, 0.6, 0.2]         # slot 1: 我 0.75 / 你 0.25 after renormalising
    probs[2] = 0.0
    probs[2, [0, i_ta, i_ni]] = [0.4, 0.35, 0.25]       # slot 2 (</s>): 他 7/12 / 你 5/12
    dp, dpp, slots = one_best(["走", "吧"], probs, labels, threshold=0.5)
    assert dp == ["我", "走", "吧", "他"] and dpp == ["#DP#", "走", "吧", "#DP#"] and slots == [0, 2]
    nb = n_best(["走", "吧"], probs, labels, slots, n=4)
    assert [c.tokens for c in nb] == [["我", "走", "吧", "他"], ["我", "走", "吧", "你"],
                                      ["你", "走", "吧", "他"], ["你", "走", "吧", "你"]]
    assert [c.score for c in nb] == pytest.approx([0.75 * 7 / 12, 0.75 * 5 / 12, 0.25 * 7 / 12, 0.25 * 5 / 12])
    assert sum(c.score for c in n_best(["走", "吧"], probs, labels, slots, n=1000)) == pytest.approx(1.0)
    assert n_best(["走"], probs[:2], labels, [], 5)[0].score == 1.0


def test_apply_preserves_lines_and_writes_parsable_nbest(tmp_path):
    prep = _synthetic(tmp_path, 80, 20)
    run_dir = run(load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml",
                                 [f"data.prepared={prep}", f"run_dir={tmp_path / 'run'}", "data.min_freq=1", "train.max_epochs=3"]))
    inp = tmp_path / "in.zh"
    inp.write_text("今天 去 学校\n\n明天 来 吗\n很 好\n", encoding="utf-8")
    docs = tmp_path / "in.docs"
    docs.write_text("A\t0\nA\t1\nB\t0\nB\t1\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["annotate-dp", "apply", "--generator", str(run_dir / "best.pt"), str(inp),
                                 "--docs", str(docs), "-o", str(tmp_path / "out"), "--nbest", "3"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    dp = (tmp_path / "out.dp.zh").read_text(encoding="utf-8").split("\n")
    dpp = (tmp_path / "out.dpp.zh").read_text(encoding="utf-8").split("\n")
    assert len(dp) == len(dpp) == 5 and dp[1] == "" and dp[4] == ""           # 4 lines + final newline
    nb = read_nbest(tmp_path / "out.nbest", 4)
    assert all(1 <= len(x) <= 3 for x in nb) and nb[1] == [("", 1.0)]
    for k, entries in enumerate(nb):
        assert entries[0][0] == dp[k]                                           # best = 1-best
        assert [s for _, s in entries] == sorted((s for _, s in entries), reverse=True)
    bad = tmp_path / "bad.docs"
    bad.write_text("A\t0\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["annotate-dp", "apply", "--generator", str(run_dir / "best.pt"), str(inp),
                                 "--docs", str(bad)])
    assert r.exit_code != 0


def test_ensemble_averages_member_distributions(tmp_path):
    from doctrans.dp.generator import DPEnsemble, load_generator
    prep = _synthetic(tmp_path, 80, 20)
    ckpts = []
    for seed in (1, 2):
        run_dir = run(load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", [
            f"data.prepared={prep}", f"run_dir={tmp_path / f'run{seed}'}", "data.min_freq=1", "train.max_epochs=2", f"train.seed={seed}"]))
        ckpts.append(str(run_dir / "best.pt"))
    members = [DPGenerator.load(c) for c in ckpts]
    ens = load_generator(":".join(ckpts))
    assert isinstance(ens, DPEnsemble) and isinstance(load_generator(ckpts[0]), DPGenerator)
    assert ens.threshold == pytest.approx((members[0].threshold + members[1].threshold) / 2)
    sents = [DPSentence(l.split(), None, "d", k) for k, l in enumerate(["今天 去 学校", "明天 来 吗", "很 好"])]
    p0, p1 = (m.distributions(sents) for m in members)
    assert not np.allclose(p0[0], p1[0])                          # different seeds, different models
    for a, b, e in zip(p0, p1, ens.distributions(sents)):
        assert e.shape == a.shape and np.allclose(e, (a + b) / 2, atol=1e-6)
        assert np.allclose(e.sum(1), 1.0, atol=1e-5)
    members[1].labels = members[1].labels[::-1]
    with pytest.raises(ValueError, match="label inventory"):
        DPEnsemble(members, ckpts)
    inp = tmp_path / "in.zh"
    inp.write_text("今天 去 学校\n\n明天 来 吗\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["annotate-dp", "--generator", ":".join(ckpts), str(inp), "-o", str(tmp_path / "out")],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    dp = (tmp_path / "out.dp.zh").read_text(encoding="utf-8").split("\n")
    as_read = [DPSentence(x.split(), None, "doc", k) for k, x in enumerate(["今天 去 学校", "", "明天 来 吗"])]
    expect = [" ".join(one_best(s.tokens, p, ens.labels, ens.threshold)[0]) if s.tokens else ""
              for s, p in zip(as_read, ens.distributions(as_read))]
    assert dp == [*expect, ""]                                     # the averaged 1-best; empty line kept
    r = CliRunner().invoke(cli, ["annotate-dp", "--generator", ckpts[0] + ":" + str(tmp_path / "nope.pt"), str(inp)])
    assert r.exit_code != 0 and "nope.pt" in r.output


# ---------------------------------------------------------------- DP-aware translation

def test_translate_with_dp_generator_nbest_and_lattice(tmp_path, reversal_prepared):
    from doctrans.dp.apply import parse_plf
    from doctrans.inference.translate import TranslateConfig
    from doctrans.stages import translate as translate_run
    from doctrans.config import load_experiment
    from doctrans import stages as nmt_train

    prep = _synthetic(tmp_path / "syn", 80, 20)
    gen_dir = run(load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml",
                                 [f"data.prepared={prep}", f"run_dir={tmp_path / 'gen'}", "data.min_freq=1", "train.max_epochs=5"]))
    nmt_dir = nmt_train.train(load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml", [
        f"data.prepared={reversal_prepared}", f"run_dir={tmp_path / 'nmt'}", "train.max_steps=3",
        "train.eval_every=0", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min",
        "data.bpe_protect_dp=true"]))
    inp = tmp_path / "in.zh"
    inp.write_text("今天 去 学校\n\n明天 来 吗\n很 好\n", encoding="utf-8")
    outs = {}
    for name, extra in {"1best": {}, "mix3": {"dp_nbest": 3}, "max3": {"dp_nbest": 3, "dp_combine": "max"},
                        "dpp": {"dp_input": "dpp"}, "gen3": {"dp_nbest": 3, "dp_weights": "generator"}}.items():
        out = tmp_path / f"{name}.en"
        translate_run(TranslateConfig(checkpoint=str(nmt_dir / "best.pt"), input=str(inp), output=str(out),
                                      input_format="tok", beam=2, dp_generator=str(gen_dir / "best.pt"),
                                      write_lattice=str(tmp_path / f"{name}.plf"), **extra))
        outs[name] = out.read_text(encoding="utf-8").split("\n")
        assert len(outs[name]) == 5 and outs[name][1] == ""               # line count, empty line kept
    plf = (tmp_path / "mix3.plf").read_text(encoding="utf-8").splitlines()
    assert len(plf) == 4 and plf[1] == "()"
    cols = parse_plf(plf[0])
    words = [c[0][0] for c in cols if len(c) == 1]
    assert words == ["今天", "去", "学校"] and all(len(c) in (1, 3) for c in cols)   # DP slots: 3 pronouns
    for c in cols:
        assert abs(sum(p for _, p, _ in c) - 1.0) < 1e-4 and all(j == 1 for _, _, j in c)
    assert parse_plf("((('a',1.0,1),),)") == [[("a", 1.0, 1)]]
    with pytest.raises(ValueError):
        parse_plf("not a lattice")
    _table_rows_use_their_own_dp_input(tmp_path, nmt_dir / "best.pt", gen_dir / "best.pt", inp)


def _table_rows_use_their_own_dp_input(tmp_path, nmt, gen, inp):
    """``make dp-table``'s regression (5346e8c → issue 27): rows of one loaded model were decoded
    with the first row's DP transform (a 1-best row, then a 3-best row with a lattice: the
    second got one variant per line and wrote no lattice). Each row now gets its own."""
    from doctrans.dp.apply import DPInputVariants
    from doctrans.experiments.dp_table import translate_row
    from doctrans.inference.translate import TranslateConfig
    from doctrans.utils.io import read_lines

    counts, real = [], DPInputVariants.__call__

    def spy(self, tok_lines, doc_ids=None):
        out = real(self, tok_lines, doc_ids)
        counts.append(max(len(v) for v in out))
        return out

    loaded, lattice = {}, tmp_path / "row3.plf"
    DPInputVariants.__call__ = spy
    try:
        for n, plf in ((1, ""), (3, str(lattice))):
            cfg = TranslateConfig(checkpoint=str(nmt), input=str(inp), input_format="tok", beam=2,
                                  dp_generator=str(gen), dp_nbest=n, write_lattice=plf)
            assert len(translate_row(loaded, cfg, read_lines(inp))) == 4
    finally:
        DPInputVariants.__call__ = real
    assert list(loaded) == [str(nmt)]                         # the model was loaded once
    assert counts == [1, 3] and lattice.is_file()


def test_mixture_weights_sum_to_one_and_plf_round_trips():
    from doctrans.dp.apply import mixture_weights, parse_plf, plf_line

    for scores in ([0.375, 0.375, 0.125], [0.9], [0.0, 0.0]):
        for mode in ("uniform", "generator"):
            assert sum(mixture_weights(scores, mode)) == pytest.approx(1.0)
    assert mixture_weights([0.6, 0.2], "generator") == pytest.approx([0.75, 0.25])
    assert mixture_weights([0.6, 0.2, 0.2], "uniform") == pytest.approx([1 / 3] * 3)
    with pytest.raises(ValueError):
        mixture_weights([0.5], "max")
    cols = [[("我", 0.6), ("你", 0.4)], [("它", 1.0)]]
    line = plf_line(["喜欢", "吗", "?"], [0, 3], cols, uniform=False)
    parsed = parse_plf(line)
    assert [len(c) for c in parsed] == [2, 1, 1, 1, 1]
    tokens = [c[0][0] for c in parsed if len(c) == 1 and c[0][0] not in ("它",)]
    back = plf_line(tokens, [0, 3], [[(w, p) for w, p, _ in parsed[0]], [(w, p) for w, p, _ in parsed[-1]]],
                    uniform=False)
    assert back == line                                            # parse → write gives the same line
    assert parse_plf(plf_line(["a'b"], [], [])) == [[("a'b", 1.0, 1)]]   # quotes are escaped


# ---------------------------------------------------------------- pseudo-DPs from overt pronouns

def test_pseudo_dp_deletes_an_overt_pronoun_between_unlabelled_positions():
    from doctrans.dp.data import pseudo_dp
    toks, labs = ["你", "来", "了", "我", "去"], ["N", "N", "N", "我们", "N", "N"]
    # 我 (index 3) has a DP before it: only 你 (index 0) qualifies
    for seed in range(5):
        t, lab, pos = pseudo_dp(toks, labs, random.Random(seed))
        assert (t, lab, pos) == (["来", "了", "我", "去"], ["你", "N", "我们", "N", "N"], 0)
        assert len(lab) == len(t) + 1
    assert pseudo_dp(["来", "了"], ["N", "N", "N"], random.Random(0)) is None
    with pytest.raises(ConfigError, match="pseudo_dp"):
        load_dp_config(REPO / "pipelines" / "dp" / "tiny_thesis.yaml", ["model.pseudo_dp=0.5"])
    with pytest.raises(ConfigError, match="pseudo_dp"):
        load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", ["model.pseudo_dp=1.5"])


def test_pseudo_dps_teach_a_pronoun_the_dp_labels_never_show(tmp_path):
    """DP labels only ever say 我 (before 去); 你 occurs only overtly, always before 来. With
    pseudo-DPs the labeler's P(pronoun | DP) before 来 prefers 你; without them, 我. Both runs' dev
    F1 is 1.0 from the first epoch (2026-11-28): best.pt, the first best epoch, is the same after
    4 epochs as after tiny.yaml's 30 (你 0.90 / 0.55 with pseudo-DPs; 我 without)."""
    rng = random.Random(0)
    words = ["吃", "饭", "学校", "今天", "很", "好", "了", "吗"]
    prep = tmp_path / "prep"
    (prep / "dp").mkdir(parents=True)
    for split, n in (("train", 300), ("dev", 40)):
        toks, labs = [], []
        for _ in range(n):
            s = [rng.choice(words) for _ in range(rng.randint(2, 5))]
            s.insert(rng.randint(0, len(s)), "去")
            if split == "train":
                k = rng.randint(0, len(s))
                s[k:k] = ["你", "来"]
            lab = ["我" if w == "去" else "N" for w in s] + ["N"]
            toks.append(" ".join(s))
            labs.append(" ".join(lab))
        (prep / f"{split}.tok.zh").write_text("\n".join(toks) + "\n", encoding="utf-8")
        (prep / "dp" / f"{split}.dplabel").write_text("\n".join(labs) + "\n", encoding="utf-8")
    probe = [DPSentence(["今天", "来", "了"], None, "d", 0), DPSentence(["很", "好", "来"], None, "d", 1)]
    choice = {}
    for rate in (0.0, 1.0):
        cfg = load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml",
                             [f"data.prepared={prep}", f"run_dir={tmp_path / f'run{rate}'}", "data.min_freq=1",
                              "train.threads=1", "data.tune_on=annotated", f"model.pseudo_dp={rate}",
                              "train.max_epochs=4"])
        gen = DPGenerator.load(run(cfg) / "best.pt")
        probs = gen.distributions(probe)
        choice[rate] = [gen.labels[int(p[t, 1:].argmax()) + 1] for p, t in zip(probs, (1, 2))]
    assert choice[1.0] == ["你", "你"], choice
    assert choice[0.0] == ["我", "我"], choice


def test_old_flat_checkpoint_and_bad_transform_options_are_clear_errors(tmp_path):
    from doctrans.dp.apply import DPInputVariants

    old = tmp_path / "old.pt"
    torch.save({"kind": "dp_generator", "cfg": {"model": "labeler", "epochs": 3}, "vocab": [], "labels": [],
                "model": {}, "threshold": 0.5}, old)
    with pytest.raises(ValueError, match="old.pt.*old flat config"):
        DPGenerator.load(old)
    with pytest.raises(ValueError, match="bad DP options"):
        DPInputVariants(str(old), dp_input="dpx")
    assert DPInputVariants(str(old), nbest=3, combine="max").combine == "max"
    assert DPInputVariants(str(old), dp_input="dpp", nbest=3).combine == "1best"    # one variant per line


def test_cli_trains_the_tiny_dp_config_with_dotted_overrides(tmp_path):
    prep = _synthetic(tmp_path, 40, 10)
    run_dir = tmp_path / "run"
    r = CliRunner().invoke(cli, ["train", str(REPO / "pipelines" / "dp" / "tiny.yaml"), f"data.prepared={prep}",
                                 f"run_dir={run_dir}", "data.min_freq=1", "train.max_epochs=2", "--max-time", "5"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    saved = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    assert saved["model"]["name"] == "labeler" and saved["train"]["max_time_min"] == 5.0
    assert saved["train"]["adam_betas"] == [0.9, 0.999] and saved["data"]["prepared"] == str(prep)
    ck = torch.load(run_dir / "best.pt", weights_only=True)
    assert ck["kind"] == "dp_generator" and ck["config"] == saved
    recs = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs if r["kind"] == "dev"] == [1, 2]
    r = CliRunner().invoke(cli, ["train", str(REPO / "pipelines" / "dp" / "tiny.yaml"), "epochs=2"])
    assert r.exit_code != 0 and "'epochs'" in str(r.exception)          # the flat keys are gone


def test_train_data_is_the_target_lines_of_train_target(tmp_path):
    """Context-only lines (0 in PREPARED/train.target; annotate-dp labels them all N) are not
    training sentences: the generator sees exactly what a dataset without them gives."""
    from doctrans.dp.train import load_data

    prep = _synthetic(tmp_path)
    cfg = load_dp_config(REPO / "pipelines" / "dp" / "tiny.yaml", [f"data.prepared={prep}", f"run_dir={tmp_path / 'r'}"])
    full, _ = load_data(cfg)
    flags = ["0" if k % 7 == 3 else "1" for k in range(len(full))]
    (prep / "train.target").write_text("\n".join(flags) + "\n", encoding="utf-8")
    train, _ = load_data(cfg)
    assert [s.index for s in train] == [k for k, f in enumerate(flags) if f == "1"]
    assert [(s.tokens, s.labels, s.doc) for s in train] == [(s.tokens, s.labels, s.doc) for s in full
                                                             if flags[s.index] == "1"]
    (prep / "train.target").write_text("1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"train\.target has 1 lines"):
        load_data(cfg)
