"""``doctrans table full`` end to end on tiny data (issue 74): a 2-row spec (a sentence control and a
HAN encoder, both from one tiny checkpoint, 2 updates each, as ``doctrans train`` child processes)
with ``--train`` writes the table, each row's translation as KEEP/NAME.en and rows.json; a second
call trains nothing; ``--rescore`` without any checkpoint gives the same BLEU column; SIGTERM to
the table stops the running training after it saved last.pt, and the next call resumes it. The
held-out metric (``evaluation/metrics/heldout.py``) on a hand-made set: accuracy, per-item results
kept and reused, McNemar's p against the first row, the source a DP row's model reads."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import QUIET_TRAIN, REPO, reversal_pairs, write_prepared
from doctrans.cli import cli

TINY = REPO / "pipelines" / "transformer" / "tiny.yaml"
HAN = "context={type: han, context_sents: 2, attach: encoder, heads: 2, d_ff: 32}"
RECIPE = ["train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min", "train.tensorboard=false",
          "train.plot=false", "train.max_time_min=0", "train.eval_every=0", "train.save_every=1", "train.log_every=1"]


def _set(out: Path, src: list[str], ref: list[str], docs: list[str], context_needed: bool = True) -> Path:
    """A contrastive set directory (contrastive.build_set's format): an item per reference line, its
    first token against the reference's last token in its place."""
    out.mkdir(parents=True)
    (out / "src.zh").write_text("".join(x + "\n" for x in src), encoding="utf-8")
    (out / "ref.en").write_text("".join(x + "\n" for x in ref), encoding="utf-8")
    (out / "docs").write_text("".join(f"{d}\t0\n" for d in docs), encoding="utf-8")
    items = [{"line": i, "position": 0, "pronoun": r.split()[0], "class": "3SGM", "kind": "dp",
              "context_needed": context_needed, "rule": "agreement", "distance": 1, "contrasts": [r.split()[-1]]}
             for i, r in enumerate(ref) if r.split()[0] != r.split()[-1]]
    (out / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    (out / "summary.json").write_text(json.dumps({"context_needed": {"items": len(items)}}), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """Prepared reversal pairs with a 2-document test set, its references, a test and a held-out
    contrastive set, and a tiny sentence model trained 1 update on it (the rows' init)."""
    from doctrans import stages
    from doctrans.config import load_experiment

    root = tmp_path_factory.mktemp("full_table")
    pairs = reversal_pairs(24)
    prep = write_prepared(root / "prep", pairs, pairs)
    src, tgt = reversal_pairs(6, seed=3)
    docs = ["d0"] * 3 + ["d1"] * 3
    for name, lines in (("test.tok.zh", src), ("test.tok.en", tgt), ("test.docs", [f"{d}\t{i % 3}" for i, d in
                                                                                   enumerate(docs)])):
        (prep / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (root / "ref.txt").write_text("".join(x + "\n" for x in tgt), encoding="utf-8")
    h_src, h_tgt = reversal_pairs(8, seed=5)
    init = stages.train(load_experiment(TINY, [f"data.prepared={prep}", f"run_dir={root / 'init'}",
                                               "train.max_steps=1", *QUIET_TRAIN])) / "last.pt"
    return {"root": root, "prep": prep, "ref": root / "ref.txt", "init": init,
            "contrastive": _set(root / "cset", src, tgt, docs),
            "heldout": _set(root / "heldout", h_src, h_tgt, ["e0"] * 4 + ["e1"] * 4)}


def _spec(path: Path, init: Path, updates: int, rows: list[dict], recipe: list[str] = RECIPE) -> Path:
    path.write_text(yaml.safe_dump({"updates": updates, "init": str(init), "recipe": recipe, "rows": rows},
                                   sort_keys=False), encoding="utf-8")
    return path


def _args(tiny: dict, tmp_path: Path, spec: Path, work: str = "w") -> list[str]:
    return ["table", "full", "--spec", str(spec), "--prepared", str(tiny["prep"]), "--runs", str(tmp_path / "runs"),
            "--data", str(tmp_path / "no-data"), "--ref", str(tiny["ref"]), "--contrastive", str(tiny["contrastive"]),
            "--heldout", str(tiny["heldout"]), "--keep", str(tmp_path / "keep"), "--out", str(tmp_path / "t.md"),
            "--work", str(tmp_path / work), "--beam", "1", "--bootstrap", "20", "--threads", "1"]


def _bleu_cells(text: str) -> dict[str, str]:
    """Row title → its test BLEU cell."""
    return {c[1].strip(): c[5].strip() for c in (x.split("|") for x in text.splitlines() if x.startswith("| "))
            if len(c) > 6}


def test_full_table_trains_tabulates_keeps_and_rescores(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    spec = _spec(tmp_path / "spec.yaml", tiny["init"], 2, [
        {"name": "control", "title": "Transformer", "pipeline": str(TINY)},
        {"name": "han", "title": "HAN encoder", "pipeline": str(TINY), "set": [HAN]},
        {"name": "han_again", "title": "HAN, decoded again", "decode_of": "han"},
        {"name": "rnn", "title": "RNNSearch", "waits": "a GPU"}])
    r = CliRunner().invoke(cli, _args(tiny, tmp_path, spec) + ["--train"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    text = (tmp_path / "t.md").read_text(encoding="utf-8")
    rows = {x["name"]: x for x in json.loads((tmp_path / "w" / "rows.json").read_text(encoding="utf-8"))["rows"]}
    assert [rows[n]["updates"] for n in ("control", "han", "han_again")] == [2, 2, 2]
    assert rows["rnn"]["state"] == "waits" and "| RNNSearch | waits: a GPU | — |" in text
    assert "| HAN, decoded again | 2 (han's model) |" in text
    for name in ("control", "han", "han_again"):                            # kept: the text the table scored
        kept = (tmp_path / "keep" / f"{name}.en").read_text(encoding="utf-8")
        assert kept == (tmp_path / "w" / f"test.{name}.hyp").read_text(encoding="utf-8") and kept.count("\n") == 6
    assert not (tmp_path / "keep" / "rnn.en").exists()
    assert rows["control"]["cpu_h"] > 0 and rows["han"]["train_tok_s"] > 0
    assert "bootstrap_p" in rows["han"] and "bootstrap_p" not in rows["control"]
    assert rows["control"]["cxmi"] == 0.0 and rows["han"]["cxmi"] != 0.0   # only the HAN reads its context
    assert "lone_bleu" in rows["han"] and "lone_bleu" not in rows["control"]
    assert len(rows["han"]["heldout_per_item"]) == rows["han"]["heldout_items"] > 0
    assert 0 <= rows["han"]["mcnemar_heldout_p"] <= 1 and 0 <= rows["han"]["mcnemar_cn_p"] <= 1
    assert rows["han_again"]["cxmi"] == rows["han"]["cxmi"]                 # the same checkpoint's, reused
    assert "held-out context-needed (McNemar p)" in text and "context-needed, test (McNemar p)" in text
    assert f"{rows['han']['bleu']:.2f}" == _bleu_cells(text)["HAN encoder"]
    kept_rows = [json.loads(x.rstrip(",")) for x in (tmp_path / "keep" / "rows.json").read_text().splitlines()[1:-1]]
    assert [x["name"] for x in kept_rows] == ["control", "han", "han_again", "rnn"]
    assert set(kept_rows[1]["heldout_per_item"]) <= {"0", "1"}               # McNemar's input, as a string
    assert len(kept_rows[1]["heldout_per_item"]) == rows["han"]["heldout_items"]

    again = CliRunner().invoke(cli, _args(tiny, tmp_path, spec) + ["--train"], catch_exceptions=False)
    assert again.exit_code == 0 and "doctrans.cli train" not in again.output       # every row done: no training

    for ckpt in (tmp_path / "runs").rglob("*.pt"):                           # a fresh clone: no checkpoint
        ckpt.unlink()
    r = CliRunner().invoke(cli, _args(tiny, tmp_path, spec, work="w2") + ["--rescore"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    text2 = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert _bleu_cells(text2) == _bleu_cells(text) and "—" not in _bleu_cells(text2)["HAN encoder"]
    rows2 = {x["name"]: x for x in json.loads((tmp_path / "w2" / "rows.json").read_text(encoding="utf-8"))["rows"]}
    assert rows2["han"]["bleu"] == rows["han"]["bleu"] and rows2["han"]["bootstrap_p"] == rows["han"]["bootstrap_p"]
    assert rows2["han"]["mcnemar_heldout_p"] == rows["han"]["mcnemar_heldout_p"]   # carried
    (tmp_path / "keep" / "han_again.en").write_bytes(tiny["ref"].read_bytes())      # --rescore reads the kept files
    assert CliRunner().invoke(cli, _args(tiny, tmp_path, spec, work="w2") + ["--rescore"]).exit_code == 0
    assert _bleu_cells((tmp_path / "t.md").read_text(encoding="utf-8"))["HAN, decoded again"] == "100.00"


def test_a_new_machine_carries_the_kept_rows_and_trains_only_the_rest(tiny, tmp_path, monkeypatch):
    """The repository keeps rows.json and NAME.en; a machine without the run directories (a new one)
    carries the kept rows (not retrained, not dropped from rows.json: their translation scored again,
    their model columns and McNemar's per-item results as kept) and trains only a row never scored."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    rows_of = [{"name": "control", "title": "Transformer", "pipeline": str(TINY)},
               {"name": "han", "title": "HAN encoder", "pipeline": str(TINY), "set": [HAN]}]
    spec = _spec(tmp_path / "spec.yaml", tiny["init"], 2, rows_of)
    assert CliRunner().invoke(cli, _args(tiny, tmp_path, spec) + ["--train"], catch_exceptions=False).exit_code == 0
    first = {x["name"]: x for x in json.loads((tmp_path / "w" / "rows.json").read_text(encoding="utf-8"))["rows"]}
    shutil.rmtree(tmp_path / "runs")                                        # a new machine: no run, no work dir
    shutil.rmtree(tmp_path / "w")
    spec = _spec(tmp_path / "spec.yaml", tiny["init"], 2, [
        *rows_of, {"name": "han2", "title": "HAN again", "pipeline": str(TINY), "set": [HAN]},
        {"name": "joint", "title": "HAN joint", "pipeline": str(TINY), "init": "han", "set": [HAN]}])
    r = CliRunner().invoke(cli, _args(tiny, tmp_path, spec) + ["--train"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "runs" / "control").exists() and not (tmp_path / "runs" / "han").exists()
    assert (tmp_path / "runs" / "han2" / "last.pt").is_file()               # only the new row trained
    rows = {x["name"]: x for x in json.loads((tmp_path / "w" / "rows.json").read_text(encoding="utf-8"))["rows"]}
    assert [rows[n]["state"] for n in ("control", "han", "han2", "joint")] == ["kept", "kept", "done", "waits"]
    assert "a kept row" in rows["joint"]["status"]                          # its init's checkpoint is gone
    for key in ("bleu", "bootstrap_p", "cxmi", "heldout", "mcnemar_heldout_p", "cpu_h", "lone_bleu"):
        assert rows["han"][key] == first["han"][key], key
    assert 0 <= rows["han2"]["mcnemar_heldout_p"] <= 1                     # against the kept control's items
    text = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert "| HAN encoder | 2 (kept) |" in text and "(kept): a row scored by an earlier table" in text
    assert _bleu_cells(text)["HAN encoder"] == f"{first['han']['bleu']:.2f}"
    kept = {x["name"]: x for x in (json.loads(y.rstrip(",")) for y in
                                   (tmp_path / "keep" / "rows.json").read_text().splitlines()[1:-1])}
    assert kept["han"]["bleu"] == first["han"]["bleu"] and kept["han"]["status"] == "2 (kept)"
    again = CliRunner().invoke(cli, _args(tiny, tmp_path, spec) + ["--train"], catch_exceptions=False)
    assert again.exit_code == 0 and "| HAN encoder | 2 (kept) |" in (tmp_path / "t.md").read_text(encoding="utf-8")
    (tmp_path / "keep" / "han.en").unlink()                                 # scored but its translation lost
    bad = CliRunner().invoke(cli, _args(tiny, tmp_path, spec))
    assert bad.exit_code != 0 and "han.en not found: row han was scored" in str(bad.exception)


def test_sigterm_stops_the_training_after_it_saved_and_the_next_call_resumes(tiny, tmp_path):
    # (a training the signal does not reach stops by itself within half a minute: train.max_time_min)
    spec = _spec(tmp_path / "spec.yaml", tiny["init"], 100000, [{"name": "control", "pipeline": str(TINY)}],
                 [*RECIPE, "train.max_time_min=0.5"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "err.txt", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "doctrans.cli", *_args(tiny, tmp_path, spec), "--train"],
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log, env=env)
        last = tmp_path / "runs" / "control" / "last.pt"
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and not last.is_file():
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    err = (tmp_path / "err.txt").read_text(encoding="utf-8")
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted: row control: its training stopped by SIGTERM" in err
    from doctrans.experiments.full_spec import checkpoint_progress, load_spec, train_command
    from doctrans.experiments.full_table import FullTableConfig

    step = checkpoint_progress(last)[0]
    assert 1 <= step < 100000
    args = FullTableConfig(prepared=str(tiny["prep"]), runs=str(tmp_path / "runs"), threads=1)
    loaded = load_spec(spec)
    assert train_command(loaded, loaded.rows[0], args)[-1] == "--resume"


def test_heldout_metric_scores_the_set_and_compares_with_the_first_row(tiny, tmp_path):
    from dataclasses import dataclass

    from doctrans.evaluation.metrics import METRIC_TABLE, model_metrics
    from doctrans.evaluation.metrics.base import ModelInputs

    @dataclass
    class Table:
        prepared: str
        heldout: str

    m = METRIC_TABLE["heldout"]
    assert m in model_metrics(("full",)) and m not in model_metrics(("context_usage", "rec"))
    held = tmp_path / "heldout"
    shutil.copytree(tiny["heldout"], held, ignore=shutil.ignore_patterns("scores"))   # (no scores kept yet)
    table = Table(str(tiny["prep"]), str(held))
    cols = m.compute(ModelInputs(tiny["init"], table))
    n = len((held / "items.jsonl").read_text().splitlines())
    assert cols["heldout_items"] == n == len(cols["heldout_per_item"]) and n >= 4
    assert cols["heldout"] == sum(cols["heldout_per_item"]) / n
    assert len(list((held / "scores").glob("heldout-*.json"))) == 1          # kept for reuse
    right, wrong = {"heldout_per_item": [1] * 6}, {"heldout_per_item": [0] * 6}
    assert m.compare(wrong, right, table)["mcnemar_heldout_p"] == pytest.approx(2 * 0.5 ** 6)   # 6 of 6 discordant
    assert m.compare(cols, cols, table)["mcnemar_heldout_p"] == 1.0 and m.compare({}, cols, table) == {}
    assert cols["heldout_set"] == hashlib.sha1((held / "items.jsonl").read_bytes()).hexdigest()[:12]
    rebuilt = {**cols, "heldout_set": "0" * 12}                     # another build of the set (eflomal: no seed)
    assert m.compare(rebuilt, cols, table) == {"mcnemar_heldout_p": None}
    from doctrans.evaluation.metrics.heldout import against_first
    assert against_first(rebuilt, cols) == f" (another build: {n:,} items)" and against_first(cols, cols) == ""
    old = {"heldout": 0.6, "heldout_items": n + 12, "mcnemar_heldout_p": 0.26}   # kept before the fingerprint
    assert m.compare(old, cols, table) == {"mcnemar_heldout_p": None} and "another build" in against_first(old, cols)
    seen = []

    def reads(lines, docs):                            # a +DPs row: the set's source as its model reads it
        seen.append((list(lines), list(docs)))
        return [x + " w1" for x in lines]

    other = m.compute(ModelInputs(tiny["init"], table, source_of=reads))
    assert seen[-1][1] == ["e0"] * 4 + ["e1"] * 4 and len(seen[-1][0]) == 8
    assert len(list((held / "scores").glob("heldout-*.json"))) == 2 and other["heldout_items"] == n
    assert m.compute(ModelInputs(tiny["init"], Table(str(tiny["prep"]), ""))) == {}
