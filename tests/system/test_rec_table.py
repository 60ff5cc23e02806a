"""`make rec-table`'s pieces on a small TVsub slice: a stage-1 tiny Transformer, two stage-2 runs
from it (equal updates), a tiny DP generator, and ``doctrans table rec`` with a +DPs row (the
generator completing the input), a reconstructor row with the contract faked on the backbone
(hand-set log R and DP labels: rec_contract.md), its reranked twin and a missing run skipped."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from click.testing import CliRunner

from conftest import QUIET_TRAIN, REPO
from doctrans.cli import cli
from doctrans.models.reconstruction_spec import ReconstructionSpec

QUIET = [*QUIET_TRAIN, "train.max_time_min=0"]


def _invoke(*args) -> str:
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def _dp_labels(prep: Path) -> None:
    """annotate-dp-style labels without the aligner: 我 dropped before every 去/要/是 (a rule a
    tiny generator learns), so the +DPs row has something to insert."""
    (prep / "dp").mkdir(exist_ok=True)
    for split in ("train", "dev"):
        lines = (prep / f"{split}.tok.zh").read_text(encoding="utf-8").splitlines()
        labs = [" ".join(["我" if t in ("去", "要", "是") else "N" for t in x.split()] + ["N"]) for x in lines]
        (prep / "dp" / f"{split}.dplabel").write_text("".join(f"{x}\n" for x in labs), encoding="utf-8")


def _fake_contract(monkeypatch, cls):
    """The contract members on the backbone class: a shared reconstructor with a joint labeler
    (target "original"); log R prefers shorter candidates; 我 predicted before the first word."""
    def score(self, enc, tgt_in, rec_target, hidden=None, top_words=0):
        return -10.0 * tgt_in[:, 1:].ne(0).sum(1).float()

    def predict(self, enc, tgt_in, rec_target, threshold=None):
        lab = torch.zeros_like(rec_target)
        lab[:, 0] = 1
        return lab

    monkeypatch.setattr(cls, "reconstruction", ReconstructionSpec("original", "original", True, 1.0, True))
    monkeypatch.setattr(cls, "dp_labels", ["NONE", "我"])
    monkeypatch.setattr(cls, "reconstruction_score", score)
    monkeypatch.setattr(cls, "predict_dps", predict)


def test_rec_table_on_a_tvsub_slice(tvsub_slice, tmp_path, monkeypatch):
    tiny = REPO / "pipelines" / "transformer" / "tiny.yaml"
    prep, runs = tmp_path / "prep", tmp_path / "runs"
    _invoke("preprocess", "--data-dir", tvsub_slice, "--train-docs", "all", "-o", prep, "--bpe-merges", "50",
            "--workers", "1")
    _invoke("train", tiny, f"data.prepared={prep}", f"run_dir={runs / 's1'}", "train.max_steps=60", *QUIET)
    stage2 = [f"data.prepared={prep}", "train.max_steps=10", f"train.init_from={runs / 's1' / 'last.pt'}", *QUIET]
    _invoke("train", tiny, f"run_dir={runs / 'baseline'}", *stage2)
    _invoke("train", tiny, f"run_dir={runs / 'rec'}", *stage2, "train.seed=2")
    _dp_labels(prep)
    _invoke("train", REPO / "pipelines" / "dp" / "tiny.yaml", f"data.prepared={prep}", f"run_dir={runs / 'gen'}",
            "data.min_freq=1", "data.tune_on=annotated", "train.max_epochs=3", "train.threads=1")
    gen = runs / "gen" / "best.pt"
    from doctrans.inference.translate import LoadedModel, TranslateConfig
    cls = type(LoadedModel.load(TranslateConfig(checkpoint=str(runs / "rec" / "last.pt")).model).model)
    _fake_contract(monkeypatch, cls)
    work, out = tmp_path / "work", tmp_path / "rec_table.md"
    _invoke("table", "rec", "--system", f"Baseline={runs / 'baseline'}", "--system", f"+DPs={runs / 'baseline'}",
            "--system", f"joint={runs / 'rec'}", "--system", f"joint, reranked={runs / 'rec'}",
            "--system", f"not trained={runs / 'nothing'}", "--skip-missing",
            "--row-option", f"+DPs:dp_generator={gen}", "--row-option", "joint, reranked:rerank=reconstructor",
            "--generator", gen, "--prepared", prep, "--data", tvsub_slice, "--beam", "2", "--bootstrap", "50",
            "--discourse", "--out", out, "--work", work)
    table = out.read_text(encoding="utf-8")
    rows = {r["system"]: r for r in json.loads((work / "rows.json").read_text())["rows"]}
    assert list(rows) == ["Baseline", "+DPs", "joint", "joint, reranked"]           # the missing run skipped
    assert all(r["updates"] == 10 for r in rows.values()) and "bootstrap_p" not in rows["Baseline"]
    assert all("bootstrap_p" in r and 0 <= r["dp_recall"] <= 1 and "contrastive_dp" in r
               for k, r in rows.items() if k != "Baseline")
    n = len((prep / "test.tok.zh").read_text(encoding="utf-8").splitlines())
    for name in ("Baseline", "_DPs", "joint", "joint__reranked"):
        assert len((work / f"test.{name}.hyp").read_text(encoding="utf-8").splitlines()) == n
    hyps = {k: (work / f"test.{k}.hyp").read_text(encoding="utf-8") for k in ("Baseline", "_DPs", "joint", "joint__reranked")}
    assert hyps["joint"] != hyps["joint__reranked"]                          # log R moves the choice
    shorter = sum(len(x.split()) for x in hyps["joint__reranked"].splitlines())
    assert shorter < sum(len(x.split()) for x in hyps["joint"].splitlines())
    assert 0 < rows["joint, reranked"]["len_ratio"] < rows["joint"]["len_ratio"]   # BLEU's output / reference tokens
    assert "| length ratio |" in table
    dp_lines = (work / "test.joint.dp.zh").read_text(encoding="utf-8").splitlines()
    src = (prep / "test.tok.zh").read_text(encoding="utf-8").splitlines()
    assert len(dp_lines) == n and all(d == (f"我 {s}" if s else "") for d, s in zip(dp_lines, src))
    ext = json.loads((work / "rows.json").read_text())["external"]
    assert ext["oracle_dps"] > 0 and ext["sys_dps"] > 0 and "dp_pronoun" in rows["joint"] and "dp_pronoun_f1_p" in rows["joint"]
    assert "| DP prediction (test, hand oracle) |" in table and "| external generator (" in table
    assert "| joint, reranked |" in table and table.split("| joint, reranked |")[1].split("\n")[0].rstrip().endswith("× |")
    # a second call reuses every translation (stamps match)
    stamps = {p.name: p.stat().st_mtime_ns for p in work.glob("test.*.hyp")}
    _invoke("table", "rec", "--system", f"Baseline={runs / 'baseline'}", "--system", f"joint={runs / 'rec'}",
            "--generator", gen, "--prepared", prep, "--data", tvsub_slice, "--beam", "2", "--bootstrap", "50",
            "--out", out, "--work", work)
    assert {p.name: p.stat().st_mtime_ns for p in work.glob("test.*.hyp")} == stamps


def test_row_option_errors(tmp_path):
    r = CliRunner().invoke(cli, ["table", "rec", "--system", f"A={tmp_path}", "--row-option", "B:rerank=reconstructor"])
    assert r.exit_code == 2 and "--row-option" in r.output
    from doctrans.experiments.rec_table import parse_row_options
    import pytest
    with pytest.raises(ValueError, match="KEY one of"):
        parse_row_options(["beam=3"])
    assert parse_row_options(["rerank_k=3", "dp_generator=a.pt:b.pt"]) == {"rerank_k": 3, "dp_generator": "a.pt:b.pt"}


def test_make_rec_table_recipe(tmp_path):
    """`make -n rec-table` (nothing runs): every row's training continues stage 1's last.pt for
    REC_STEPS updates; only the reconstructors whose YAML exists are rows (a missing one is left out,
    so the target works before branch recon's YAMLs); the +DPs (predicted) row reads the jackknife."""
    import shlex
    import subprocess
    present = sorted(p.stem for p in (REPO / "pipelines" / "dp").glob("rec_*.yaml"))
    out = subprocess.run(["make", "-n", "rec-table", f"PREP={tmp_path}/prep", f"RUN={tmp_path}/run",
                          f"REC_RUNS={tmp_path}/runs", f"DATA={tmp_path}/data", "REC_STEPS=7",
                          "REC_MODELS=rec_enc rec_nonexistent"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.replace("\\\n", " ")
    trains = [shlex.split(line) for line in out.splitlines() if "doctrans train pipelines/" in line
              and "/dp/labeler.yaml" not in line and f"run_dir={tmp_path}/run " not in line + " "]
    configs = {next(a for a in cmd if a.endswith(".yaml")) for cmd in trains}
    assert {"pipelines/quickstart.yaml", "pipelines/dp/nmt_dp_continued.yaml", "pipelines/dp/nmt_dp_predicted.yaml",
            "pipelines/dp/nmt_dpp_continued.yaml"} <= configs
    assert ("pipelines/dp/rec_enc.yaml" in configs) == ("rec_enc" in present)
    assert all((REPO / c).is_file() for c in configs)
    assert all(f"train.init_from={tmp_path}/run/last.pt" in cmd and "train.max_steps=7" in cmd for cmd in trains)
    assert any(f"data.src_dir={tmp_path}/prep/dp_jk3" in cmd for cmd in trains)
    assert f"annotate-dp jackknife -p {tmp_path}/prep --folds 3" in out
    table = shlex.split(next(line for line in out.splitlines() if "doctrans table rec" in line).replace("$(<", "("))
    systems = [table[i + 1].rpartition("=")[0] for i, a in enumerate(table) if a == "--system"]
    assert systems[:4] == ["Baseline (continued)", "+DPs", "+DPs (predicted)", "Baseline (+DPPs)"]
    assert ("enc-rec" in systems) == ("rec_enc" in present) and len(systems) == 4 + ("rec_enc" in present)


def test_make_rec_table_pd_rows_train_the_base_yaml_with_pronoun_dropout(tmp_path):
    """A REC_MODELS name NAME_pd is NAME's YAML trained with REC_PD, in its own run directory, as its own row."""
    import shlex
    import subprocess
    out = subprocess.run(["make", "-n", "rec-table", f"PREP={tmp_path}/prep", f"RUN={tmp_path}/run",
                          f"REC_RUNS={tmp_path}/runs", f"DATA={tmp_path}/data", "REC_STEPS=7",
                          "REC_MODELS=rec_joint_labeler rec_joint_labeler_pd", "REC_PD=train.pronoun_dropout=0.3"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.replace("\\\n", " ")
    trains = [shlex.split(line) for line in out.splitlines() if "pipelines/dp/rec_joint_labeler.yaml" in line]
    by_dir = {next(a for a in cmd if a.startswith("run_dir=")): cmd for cmd in trains}
    assert set(by_dir) == {f"run_dir={tmp_path}/runs/rec_joint_labeler", f"run_dir={tmp_path}/runs/rec_joint_labeler_pd"}
    assert "train.pronoun_dropout=0.3" in by_dir[f"run_dir={tmp_path}/runs/rec_joint_labeler_pd"]
    assert not any("pronoun_dropout" in a for a in by_dir[f"run_dir={tmp_path}/runs/rec_joint_labeler"])
    table = shlex.split(next(line for line in out.splitlines() if "doctrans table rec" in line).replace("$(<", "("))
    systems = [table[i + 1] for i, a in enumerate(table) if a == "--system"]
    assert f"+ joint DP labeler + PD={tmp_path}/runs/rec_joint_labeler_pd" in systems


def test_make_rec_table_has_the_labeler_over_the_han_encoder_by_default(tmp_path):
    """The default REC_MODELS row rec_joint_labeler_han_pd: its YAML (a context section) with REC_PD."""
    import shlex
    import subprocess
    out = subprocess.run(["make", "-n", "rec-table", f"PREP={tmp_path}/prep", f"RUN={tmp_path}/run",
                          f"REC_RUNS={tmp_path}/runs", f"DATA={tmp_path}/data"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.replace("\\\n", " ")
    trains = [shlex.split(line) for line in out.splitlines() if "pipelines/dp/rec_joint_labeler_han.yaml" in line]
    assert len(trains) == 1 and f"run_dir={tmp_path}/runs/rec_joint_labeler_han_pd" in trains[0]
    assert "train.pronoun_dropout=0.25" in trains[0]          # REC_PD's default (docs/dp.md, seventh measurement)
    assert "train.max_steps=800" in trains[0]                 # REC_STEPS's default (ninth measurement)
    assert "train.max_time_min=240" in trains[0]             # REC_CAP: 800 document-row updates on 2 cores
    table = shlex.split(next(line for line in out.splitlines() if "doctrans table rec" in line).replace("$(<", "("))
    systems = [table[i + 1] for i, a in enumerate(table) if a == "--system"]
    assert f"+ joint DP labeler over the HAN encoder + PD={tmp_path}/runs/rec_joint_labeler_han_pd" in systems
