"""``doctrans table full``'s rows (issue 74; ``experiments/full_spec.py``): the spec's errors name
the file and the row, the training command of a row is exactly the one the runs were started with
(``--resume`` once a last.pt exists, ``init: ROW`` from that row's last.pt, placeholders filled),
each row's status (done / unfinished / not started / waits) and that the markdown says it, and a
failing training leaves the table written with that row unfinished."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import REPO
from doctrans.cli import cli
from doctrans.experiments import full_spec, full_table
from doctrans.experiments.full_spec import SpecError, load_spec, row_statuses, train_command
from doctrans.runtime.checkpoint_write import save_checkpoint


def _pipeline(tmp_path: Path) -> str:
    p = tmp_path / "p.yaml"
    p.write_text("extends: x\n", encoding="utf-8")
    return str(p)


def _spec(tmp_path: Path, rows: list[dict], **top) -> Path:
    tree = {"updates": 10, "init": "tvsub-transformer-3x3", "recipe": ["train.lr=5e-4", "train.warmup=2"],
            "rows": rows, **top}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return path


def _cfg(tmp_path: Path, **kw) -> full_table.FullTableConfig:
    return full_table.FullTableConfig(prepared=str(tmp_path / "prep"), runs=str(tmp_path / "runs"),
                                      out=str(tmp_path / "t.md"), work=str(tmp_path / "w"),
                                      keep=str(tmp_path / "keep"), threads=1, **kw)


def _last_pt(tmp_path: Path, name: str, step: int, cpu_s: float = 0.0) -> Path:
    path = tmp_path / "runs" / name / "last.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint({"model": {}, "config": {}, "state": {"step": step, "cpu_time_s": cpu_s}}, path)
    return path


def test_the_shipped_spec_loads():
    spec = load_spec(REPO / "pipelines" / "full_table.yaml")
    names = [r.name for r in spec.rows]
    assert names[0] == "control" and spec.updates == 731 and spec.init == "tvsub-transformer-3x3"
    assert spec.row("han_joint").init == "han_encoder" and spec.row("dp_nbest").decode_of == "dp"
    assert spec.row("dp").set == ("data.src_dir={jk}",) and spec.row("rnnsearch").waits.startswith("a GPU")
    assert "train.max_tokens=4096" in spec.recipe


@pytest.mark.parametrize("rows, top, message", [
    ([{"name": "a", "pipeline": "P", "colour": "red"}], {}, "row 'a': unknown key 'colour'"),
    ([{"title": "no name", "pipeline": "P"}], {}, "row 1: no name"),
    ([{"name": "a", "pipeline": "P"}, {"name": "b", "decode_of": "zz"}], {}, "row 'b': decode_of 'zz' names no row"),
    ([{"name": "a", "pipeline": "P", "init": "zz"}], {}, "row 'a': init 'zz' names no row"),
    ([{"name": "a", "pipeline": "P", "init": "b"}, {"name": "b", "pipeline": "P"}], {},
     "row 'a': init 'b' names a row that is not a trained row before this one"),
    ([{"name": "a", "pipeline": "missing.yaml"}], {}, "row 'a': pipeline 'missing.yaml' not found"),
    ([{"name": "a", "pipeline": "P"}, {"name": "a", "pipeline": "P"}], {}, "row 'a': a second row of this name"),
    ([{"name": "a", "pipeline": "P", "needs": ["gpu"]}], {}, "row 'a': unknown need 'gpu'"),
    ([{"name": "a", "pipeline": "P", "translate": ["beam=4"]}], {}, "row 'a': translate 'beam=4'"),
    ([{"name": "a", "pipeline": "P", "translate": ["dp_nbest=many"]}], {}, "dp_nbest=many: not an integer"),
    ([{"name": "a"}], {}, "row 'a': give one of pipeline"),
    ([{"name": "a", "pipeline": "P"}], {"colour": 1}, "unknown key 'colour'"),
])
def test_spec_errors_name_the_file_and_the_row(tmp_path, rows, top, message):
    p = _pipeline(tmp_path)
    rows = [{k: (p if v == "P" else v) for k, v in r.items()} for r in rows]
    path = _spec(tmp_path, rows, **top)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)


def test_a_yaml_error_names_the_line(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("updates: 3\ninit: x\nrows:\n  - name: dp\n    set: [data.src_dir={jk}]\n", encoding="utf-8")
    with pytest.raises(SpecError, match=rf"^{path}:5: not YAML"):
        load_spec(path)


def test_the_training_command_of_a_row(tmp_path):
    p = _pipeline(tmp_path)
    path = _spec(tmp_path, [{"name": "control", "pipeline": p},
                            {"name": "han", "pipeline": p, "set": ["context.heads=2"]},
                            {"name": "joint", "pipeline": p, "init": "han", "set": ["data.src_dir={jk}"],
                             "translate": ["dp_generator={jk_generator}"], "needs": ["jk"]}])
    spec, args = load_spec(path), _cfg(tmp_path, jk=str(tmp_path / "jk"))
    runs, prep = tmp_path / "runs", str(tmp_path / "prep")
    head = [sys.executable, "-m", "doctrans.cli", "train", p, f"data.prepared={prep}"]
    assert train_command(spec, spec.row("han"), args) == [
        *head, f"run_dir={runs / 'han'}", "train.init_from=tvsub-transformer-3x3", "train.lr=5e-4",
        "train.warmup=2", "context.heads=2", "train.max_steps=10", "train.threads=1"]
    _last_pt(tmp_path, "joint", 3)
    assert train_command(spec, spec.row("joint"), args) == [
        *head, f"run_dir={runs / 'joint'}", f"train.init_from={runs / 'han' / 'last.pt'}", "train.lr=5e-4",
        "train.warmup=2", f"data.src_dir={tmp_path / 'jk'}", "train.max_steps=10", "train.threads=1", "--resume"]
    with pytest.raises(FileNotFoundError, match=r"row joint: \{jk_generator\}: .*generator.txt not found"):
        full_spec.translate_options(spec.row("joint"), args)
    (tmp_path / "jk").mkdir()
    (tmp_path / "jk" / "generator.txt").write_text("a.pt:b.pt\n", encoding="utf-8")
    assert full_spec.translate_options(spec.row("joint"), args) == {"dp_generator": "a.pt:b.pt"}


def _status_spec(tmp_path: Path) -> Path:
    p = _pipeline(tmp_path)
    return _spec(tmp_path, [
        {"name": "control", "pipeline": p}, {"name": "half", "pipeline": p, "title": "half way"},
        {"name": "fresh", "pipeline": p}, {"name": "joint", "pipeline": p, "init": "half"},
        {"name": "rec", "pipeline": p, "needs": ["dp", "jk"]},
        {"name": "rerank", "decode_of": "half", "translate": ["rerank=reconstructor"]},
        {"name": "rnn", "title": "RNNSearch", "waits": "a GPU"}])


def test_row_statuses(tmp_path):
    spec, args = load_spec(_status_spec(tmp_path)), _cfg(tmp_path)
    _last_pt(tmp_path, "control", 10, cpu_s=7200.0)
    _last_pt(tmp_path, "half", 4)
    st = row_statuses(spec, args)
    assert (st["control"].state, st["control"].text, st["control"].cpu_time_s) == ("done", "10", 7200.0)
    assert (st["half"].state, st["half"].text) == ("unfinished", "unfinished: 4 of 10 updates")
    assert (st["fresh"].state, st["fresh"].text) == ("not started", "not started")
    assert st["joint"].text == "waits: row half (unfinished: 4 of 10 updates)"
    prep = tmp_path / "prep"
    assert st["rec"].text == f"waits: {prep / 'dp'} (annotate-dp corpus), {prep / 'dp_jk3'} (annotate-dp jackknife)"
    assert st["rerank"].text == "waits: row half (unfinished: 4 of 10 updates)"
    assert (st["rnn"].state, st["rnn"].text) == ("waits", "waits: a GPU")
    _last_pt(tmp_path, "half", 10)
    for need in ("dp", "dp_jk3"):
        (prep / need).mkdir(parents=True)
        (prep / need / "meta.json").write_text("{}", encoding="utf-8")
    st = row_statuses(spec, args)
    assert st["joint"].state == "not started" and st["rec"].state == "not started"
    assert (st["rerank"].state, st["rerank"].text) == ("done", "10 (half's model)")
    _last_pt(tmp_path, "joint", 10)          # a row trained on from another row: its updates come after that row's
    st = row_statuses(spec, args)
    assert (st["joint"].state, st["joint"].step, st["joint"].text) == ("done", 10, "10 after half's 10")


def test_the_table_says_where_each_row_stands_and_a_failed_training_leaves_it_written(tmp_path, monkeypatch, caplog):
    """No row done: nothing to translate; --train runs the two trainable rows (a stand-in command
    that fails), logs each exit status, and writes the table."""
    args = _cfg(tmp_path, spec=str(_status_spec(tmp_path)), train=True)
    _last_pt(tmp_path, "half", 4, cpu_s=1800.0)
    ran = []

    def fails(spec, row, a):
        ran.append(row.name)
        return [sys.executable, "-c", "import sys; sys.exit(3)"]

    monkeypatch.setattr(full_spec, "train_command", fails)
    out, failed = full_table.build_full_table(args)
    assert ran == ["control", "half", "fresh"] and failed == [("control", 3), ("half", 3), ("fresh", 3)]
    assert "control: the training exited with status 3" in caplog.text
    text = out.read_text(encoding="utf-8")
    r = CliRunner().invoke(cli, ["table", "full", "--spec", args.spec, "--prepared", args.prepared, "--runs", args.runs,
                                 "--out", args.out, "--work", args.work, "--keep", args.keep, "--train"])
    assert r.exit_code == 1 and "error: training failed: control (exit 3), half (exit 3)" in r.output
    assert out.read_text(encoding="utf-8").split("Made by")[0] == text.split("Made by")[0]
    assert "| control | not started | — | — | — | — |" in text
    assert "| half way | unfinished: 4 of 10 updates | 0.50 | — | — |" in text
    assert "| joint | waits: row half (unfinished: 4 of 10 updates) |" in text
    assert "| RNNSearch | waits: a GPU |" in text
    assert "recipe `train.lr=5e-4` `train.warmup=2`" in text
    rows = json.loads((tmp_path / "keep" / "rows.json").read_text(encoding="utf-8"))["rows"]
    assert [r["state"] for r in rows] == ["not started", "unfinished", "not started", "waits", "waits", "waits",
                                          "waits"]


def test_train_and_rescore_together_are_refused(tmp_path):
    with pytest.raises(ValueError, match="--train and --rescore"):
        full_table.build_full_table(_cfg(tmp_path, spec=str(_status_spec(tmp_path)), train=True, rescore=True))
