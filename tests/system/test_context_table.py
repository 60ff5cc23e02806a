"""`make context-table`'s pieces on a small TVsub slice (``tvsub_slice``): a sentence model
(stage 1), the Transformer continued and a HAN encoder from it (stage 2, equal updates), then
the table."""
from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import REPO
from doctrans.cli import cli

QUIET = ["train.threads=1", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min",
         "train.tensorboard=false", "train.plot=false", "train.max_time_min=0"]


def _invoke(*args) -> str:
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def _table(args: list[str]):
    """``doctrans table context ARGS`` → the written table's path."""
    from pathlib import Path
    return Path(_invoke("table", "context", *args).strip().rpartition("wrote ")[2])


def _stage1(tvsub_slice, tmp_path, tiny, stage1_checkpoint: str) -> tuple:
    """Preprocess the slice and train ``tiny`` for 3 updates (stage 1) → (prep, runs, the stage-2
    overrides: 2 updates from stage 1's ``stage1_checkpoint``)."""
    prep, runs = tmp_path / "prep", tmp_path / "runs"
    _invoke("preprocess", "--data-dir", tvsub_slice, "--train-docs", "all", "-o", prep, "--bpe-merges", "50", "--workers", "1")
    _invoke("train", tiny, f"data.prepared={prep}", f"run_dir={runs / 's1'}", "train.max_steps=3", *QUIET)
    return prep, runs, [f"data.prepared={prep}", "train.max_steps=2", f"train.init_from={runs / 's1' / stage1_checkpoint}",
                        *QUIET]


def _table_args(prep, tvsub_slice, out, work) -> list[str]:
    return ["--prepared", str(prep), "--data", str(tvsub_slice), "--beam", "2", "--bootstrap", "50",
            "--out", str(out), "--work", str(work)]


def test_context_table_on_a_tvsub_slice(tvsub_slice, tmp_path):
    tiny = REPO / "pipelines" / "transformer" / "tiny.yaml"
    prep, runs, stage2 = _stage1(tvsub_slice, tmp_path, tiny, "best.pt")
    _invoke("train", tiny, f"run_dir={runs / 'transformer'}", *stage2)
    _invoke("train", tiny, f"run_dir={runs / 'han'}", *stage2,
            "context={type: han, context_sents: 2, attach: encoder, heads: 2, d_ff: 32}")
    out = _table(["--system", f"Transformer={runs / 'transformer'}", "--system", f"HAN={runs / 'han'}",
                              "--discourse", "--lone",
                              *_table_args(prep, tvsub_slice, tmp_path / "table.md", tmp_path / "work")])
    table = out.read_text(encoding="utf-8")
    assert "| Transformer | 2 |" in table and "| HAN | 2 |" in table
    rows = json.loads((tmp_path / "work" / "rows.json").read_text())
    assert rows[1]["params_m"] > rows[0]["params_m"]                        # the HAN block adds parameters
    assert "bootstrap_p" in rows[1] and "bootstrap_p" not in rows[0]
    assert rows[0]["cxmi"] == 0.0 and rows[1]["cxmi"] != 0.0                # only the HAN reads its context
    assert rows[0]["cxmi_random"] == 0.0 and rows[1]["cxmi_random"] != 0.0  # issue 29: vs a random context too
    assert "lone_bleu" in rows[1] and "lone_bleu" not in rows[0]            # every line its own document
    assert "mcnemar_cn_p" in rows[1] and "| context-needed |" in table
    assert len(rows[1]["contrastive_per_item"]) == rows[1]["contrastive_items"]
    assert all(0.0 <= r[k] <= 1.0 for r in rows for k in ("dp_recall", "contrastive", "contrastive_dp"))
    assert rows[0]["contrastive_items"] > 0 and "| contrastive DP |" in table and "| reference 1 |" in table
    assert 0.0 < rows[0]["ref_cohesion"] <= 1.0 and -1.0 <= rows[0]["ref_coherence"] <= 1.0
    assert all("cohesion" in r and "coherence" in r and "apt_pronoun" in r for r in rows)     # NaN where a tiny model's output has no content word
    hyps = (tmp_path / "work" / "test.HAN.hyp").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == len((prep / "test.tok.zh").read_text(encoding="utf-8").split("\n")[:-1])
    # --engine ctranslate2: the Transformer row is exported and decoded by CTranslate2, the HAN row
    # (which CTranslate2 cannot express) natively; the decode column names the engine
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return
    work2 = tmp_path / "work_ct2"
    out = _table(["--system", f"Transformer={runs / 'transformer'}", "--system", f"HAN={runs / 'han'}",
                  "--engine", "ctranslate2", "--compute-type", "float32",
                  *_table_args(prep, tvsub_slice, tmp_path / "table_ct2.md", work2)])
    rows2 = json.loads((work2 / "rows.json").read_text())
    assert [r["engine"] for r in rows2] == ["ctranslate2 float32", "native"]
    assert (work2 / "Transformer.ct2" / "model.bin").is_file() and "CTranslate2 float32" in out.read_text()
    assert (work2 / "test.HAN.hyp").read_text() == (tmp_path / "work" / "test.HAN.hyp").read_text()
    assert len((work2 / "test.Transformer.hyp").read_text().split("\n")) == len(hyps) + 1


def test_rnn_context_table_options_and_split_tables(tvsub_slice, tmp_path):
    """`make rnn-context-table`'s pieces: an ISG row from a tiny RNNSearch, its S3 Table 1 ablation
    as a row of the same run (``--context-option``), and rows split into titled tables whose
    significance is against their own first row."""
    tiny = REPO / "pipelines" / "rnnsearch" / "tiny.yaml"
    prep, runs, stage2 = _stage1(tvsub_slice, tmp_path, tiny, "last.pt")
    _invoke("train", tiny, f"run_dir={runs / 'base_cont'}", *stage2)
    _invoke("train", REPO / "pipelines" / "context" / "isg.yaml", f"run_dir={runs / 'isg'}", *stage2,
            "model.emb_size=32", "model.rnn_size=32", "train.max_tokens=512")
    work = tmp_path / "work"
    out = _table([
        "--system", f"stage 1={runs / 's1'}", "--system", f"RNNSearch={runs / 'base_cont'}",
        "--system", f"NMT_ISG={runs / 'isg'}", "--system", f"+z=0={runs / 'isg'}",
        "--context-option", "+z=0:test_ablation=zero",
        "--table", "A=stage 1,NMT_ISG", "--table", "ISG=RNNSearch,NMT_ISG,+z=0",
        *_table_args(prep, tvsub_slice, tmp_path / "table.md", work)])
    table = out.read_text(encoding="utf-8")
    assert table.index("## A") < table.index("## ISG") and table.count("| system | updates |") == 2
    rows = {r["system"]: r for r in json.loads((work / "rows.json").read_text())}
    assert rows["+z=0"]["options"] == ["test_ablation=zero"] and rows["+z=0"]["run"] == rows["NMT_ISG"]["run"]
    isg, zero = ((work / f"test.{n}.hyp").read_text(encoding="utf-8") for n in ("NMT_ISG", "_z_0"))
    assert isg != zero                                       # the ablation changes the translation
    isg_part = table[table.index("## ISG"):]
    assert "| RNNSearch | 2 |" in isg_part and "| RNNSearch | 2 | " in isg_part.split("\n")[4]
    assert isg_part.split("\n")[4].split("|")[5].strip() == "—"     # the ISG table's first row has no p-value
    # a second call reuses every translation whose stamp matches (a changed checkpoint is redone)
    stamp = json.loads((work / "test.NMT_ISG.json").read_text())
    assert stamp["options"] == [] and stamp["beam"] == 2 and stamp["decode_s"] > 0
    base_stamp = json.loads((work / "test.RNNSearch.json").read_text())
    (work / "test.NMT_ISG.hyp").write_text(isg.replace("\n", " x\n"), encoding="utf-8")   # marks a reused file
    _invoke("train", tiny, f"run_dir={runs / 'base_cont'}", *stage2, "train.max_steps=3", "--resume")
    _table(["--system", f"RNNSearch={runs / 'base_cont'}", "--system", f"NMT_ISG={runs / 'isg'}",
                        *_table_args(prep, tvsub_slice, tmp_path / "table2.md", work)])
    assert (work / "test.NMT_ISG.hyp").read_text(encoding="utf-8") == isg.replace("\n", " x\n")
    rows = {r["system"]: r for r in json.loads((work / "rows.json").read_text())}
    assert rows["RNNSearch"]["updates"] == 3                             # the resumed run's new last.pt …
    assert json.loads((work / "test.RNNSearch.json").read_text())["checkpoint_mtime"] > base_stamp["checkpoint_mtime"]


def test_make_rnn_context_table_recipe(tmp_path):
    """`make -n rnn-context-table` (nothing runs): stage 1 from pipelines/rnnsearch/small.yaml,
    the 11 stage-2 trainings from YAMLs that exist, each from stage 1's last.pt with RNN_STEPS
    updates, and one table call with the 15 rows, the three ablations and the three tables."""
    import re
    import shlex
    import subprocess
    out = subprocess.run(["make", "-n", "rnn-context-table", f"PREP={tmp_path}/prep", f"RNN_RUNS={tmp_path}/runs",
                          f"RNN_BASE={tmp_path}/base", f"DATA={tmp_path}/data", "RNN_STEPS=7"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.replace("\\\n", " ")
    trains = [shlex.split(line) for line in out.splitlines() if "doctrans train" in line]
    assert len(trains) == 12
    configs = [next(a for a in cmd if a.endswith(".yaml")) for cmd in trains]
    assert all((REPO / c).is_file() for c in configs) and configs.count("pipelines/rnnsearch/small.yaml") == 2
    stage2 = [cmd for cmd in trains if f"train.init_from={tmp_path}/base/last.pt" in cmd]
    assert len(stage2) == 11 and all("train.max_steps=7" in cmd for cmd in stage2)
    table = shlex.split(next(line for line in out.splitlines() if "doctrans table context" in line))
    systems = [table[i + 1] for i, a in enumerate(table) if a == "--system"]
    assert len(systems) == 15 and "+Gating Auxi" in {s.rpartition("=")[0] for s in systems}
    assert [table[i + 1] for i, a in enumerate(table) if a == "--context-option"] == [
        "+NULL:test_ablation=null", "+z=0:test_ablation=zero", "+RV:test_ablation=random"]
    titles = [re.sub(r"=.*", "", table[i + 1]) for i, a in enumerate(table) if a == "--table"]
    assert len(titles) == 3 and titles[1].startswith("Thesis Table 3.9")
