"""All four stages through the click CLI on ~200 real TVsub lines (tmp_path, a few updates)."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from doctrans.cli import cli
from doctrans.data.sgml import read_sgml

from conftest import REPO, TVSUB, needs_tvsub


def _head(src: Path, dst: Path, n: int) -> list[str]:
    lines = src.read_text(encoding="utf-8").splitlines()[:n]
    dst.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return lines


def _small_corpus(root: Path) -> None:
    """Two 60-line training documents and 40-line dev/test sets with an SGML reference."""
    (root / "train").mkdir(parents=True)
    for doc in ("0", "1"):
        for lang in ("zh", "en"):
            _head(TVSUB / "train" / f"{doc}.{lang}", root / "train" / f"{doc}.{lang}", 60)
    for split in ("dev", "test"):
        (root / split).mkdir()
        for lang in ("zh", "en"):
            _head(TVSUB / split / f"{split}.{lang}", root / split / f"{split}.{lang}", 40)
        refs = read_sgml(TVSUB / "test" / "test.ref.sgm")
        body = ['<refset setid="t" srclang="zh" trglang="en">']
        for r in refs:
            body.append(f'<DOC docid="A" sysid="{r.sysid}">')
            body += [f"<seg id={i + 1}> {s} </seg>" for i, s in enumerate(r.segments[:25])]
            body.append("</DOC>")
            body.append(f'<DOC docid="B" sysid="{r.sysid}">')
            body += [f"<seg id={i + 1}> {s} </seg>" for i, s in enumerate(r.segments[25:40])]
            body.append("</DOC>")
        body.append("</refset>")
        (root / split / f"{split}.ref.sgm").write_text("\n".join(body) + "\n", encoding="utf-8")


@needs_tvsub()
def test_preprocess_train_translate_score(tmp_path):
    corpus, prep, run_dir = tmp_path / "tvsub", tmp_path / "prep", tmp_path / "run"
    _small_corpus(corpus)
    runner = CliRunner()
    r = runner.invoke(cli, ["preprocess", "--data-dir", str(corpus), "--train-docs", "0:2", "-o", str(prep),
                            "--bpe-merges", "200", "--workers", "1"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    meta = json.loads((prep / "meta.json").read_text())
    assert meta["splits"]["test"]["sentences"] == 40

    r = runner.invoke(cli, ["train", str(REPO / "pipelines" / "transformer" / "tiny.yaml"), f"data.prepared={prep}",
                            f"run_dir={run_dir}", "train.max_steps=4", "train.eval_every=2", "train.threads=1"],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert (run_dir / "best.pt").is_file() and (run_dir / "metrics.jsonl").is_file()

    hyp = tmp_path / "test.hyp"
    r = runner.invoke(cli, ["translate", "-c", str(run_dir / "best.pt"), "-i", str(corpus / "test" / "test.zh"),
                            "-o", str(hyp), "--beam", "2"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert len(hyp.read_text(encoding="utf-8").split("\n")) == 41        # 40 lines + final newline

    r = runner.invoke(cli, ["score", str(hyp), "-r", str(corpus / "test" / "test.ref.sgm"), "--json"],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    scores = json.loads(r.output)
    assert scores["n_refs"] == 3 and scores["n_lines"] == 40
    assert 0.0 <= scores["bleu_tok_lc"]["score"] <= 100.0


def test_unknown_override_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(cli, ["train", str(REPO / "pipelines" / "transformer" / "tiny.yaml"), "train.lrr=1"])
    assert r.exit_code != 0
    assert "train.lrr" in str(r.exception)
