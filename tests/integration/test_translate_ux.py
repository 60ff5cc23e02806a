"""`doctrans translate` without surprises (issue 31): warnings for a context model without
documents and for directory options on a file; --glob / --out-suffix for directories;
--output-format sgml; --nbest / --nbest-out. Tiny models trained on conftest's reversal task."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import train_tiny
from doctrans.cli import cli
from doctrans.data.sgml import read_sgml
from doctrans.inference.collection import default_pattern, document_files
from doctrans.inference.translate import TranslateConfig, Translator
from doctrans.stages import translate as translate_run

HAN = "context={type: han, context_sents: 2, attach: both, heads: 2, d_ff: 32, dropout: 0.0}"
LINES = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8", "w9 w1 w3 w2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("ux"), 40, "train.max_steps=30", "train.eval_every=0")


@pytest.fixture(scope="module")
def han(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("ux_han"), 20, "train.max_steps=20", "train.eval_every=0", HAN)


def _cfg(ckpt, inp, out, **kw) -> TranslateConfig:
    kw.setdefault("beam", 3)
    return TranslateConfig(checkpoint=str(ckpt), input=str(inp), output=str(out), threads=1,
                           input_format="bpe", tokenized=True, **kw)


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_context_model_without_documents_warns(han, tmp_path, caplog):
    inp = _write(tmp_path / "in.bpe", LINES)
    with caplog.at_level(logging.WARNING):
        translate_run(_cfg(han, inp, tmp_path / "o1"))
    assert "no documents given: the context model translates the whole input as one document" in caplog.text
    assert "--docs FILE, an .sgm input, or a directory" in caplog.text
    docs = _write(tmp_path / "in.docs", ["a\t0", "a\t1", "a\t2", "b\t0", "b\t1"])
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        translate_run(_cfg(han, inp, tmp_path / "o2", docs=str(docs)))
    assert "no documents given" not in caplog.text
    with pytest.raises(ValueError, match="--nbest is for sentence-level models.*context model"):
        Translator(_cfg(han, inp, tmp_path / "o3", nbest=2, nbest_out=str(tmp_path / "n")))


def test_sentence_model_without_documents_and_directory_options_on_a_file(trained, tmp_path, caplog):
    inp = _write(tmp_path / "in.bpe", LINES)
    with caplog.at_level(logging.WARNING):
        translate_run(_cfg(trained, inp, tmp_path / "o1"))
    assert caplog.text == ""                                     # nothing to say
    with caplog.at_level(logging.WARNING):
        translate_run(_cfg(trained, inp, tmp_path / "o2", workers=2, resume=True, out_suffix=".en"))
    assert f"--workers 2 is for a directory input: ignored for {inp}" in caplog.text
    assert "--resume is for a directory input" in caplog.text and "--out-suffix is for a directory" in caplog.text
    assert _lines(tmp_path / "o2") == _lines(tmp_path / "o1")


def test_default_pattern_and_document_files(tmp_path, caplog):
    d = tmp_path / "docs"
    for name in ("a.zh", "b.zh", "readme.txt", "sub/c.zh", "sub/notes.txt", ".hidden.zh"):
        _write(d / name, ["w1"])
    assert default_pattern(d) == "*.zh"
    with caplog.at_level(logging.INFO):
        got = [p.relative_to(d).as_posix() for p in document_files(d, None)]
    assert got == ["a.zh", "b.zh", "sub/c.zh"] and "2 other files left out" in caplog.text
    assert len(document_files(d, "*")) == 5
    assert [p.name for p in document_files(d, "sub/*")] == ["c.zh", "notes.txt"]
    e = tmp_path / "only_sub"
    _write(e / "x" / "a.txt", ["w"]), _write(e / "x" / "b.zh", ["w"]), _write(e / "x" / "c.zh", ["w"])
    assert default_pattern(e) == "*.zh"                          # no top-level files: all of them count
    f = tmp_path / "plain"
    _write(f / "doc1", ["w"]), _write(f / "doc2", ["w"]), _write(f / "x.txt", ["w"])
    assert [p.name for p in document_files(f, None)] == ["doc1", "doc2"]
    g = tmp_path / "tie"
    _write(g / "a.en", ["w"]), _write(g / "b.zh", ["w"])
    assert default_pattern(g) == "*.en" and default_pattern(tmp_path / "only_sub" / "x" / "..") == "*.zh"


def test_directory_glob_out_suffix_and_resume(trained, tmp_path, caplog):
    d, out = tmp_path / "docs", tmp_path / "out"
    _write(d / "a.zh", LINES[:2]), _write(d / "sub" / "b.zh", LINES[3:]), _write(d / "readme.txt", ["w1 w2"])
    translate_run(_cfg(trained, d, out, out_suffix=".en"))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == ["a.en", "sub/b.en"]
    tr = Translator(_cfg(trained, "-", "-"))
    assert _lines(out / "a.en") == tr.translate(LINES[:2])
    mtime = (out / "a.en").stat().st_mtime_ns
    _write(out / "sub" / "b.en", ["incomplete"])
    with caplog.at_level(logging.INFO):
        translate_run(_cfg(trained, d, out, out_suffix=".en", resume=True))
    assert (out / "a.en").stat().st_mtime_ns == mtime and "1 translated, 1 skipped" in caplog.text
    assert _lines(out / "sub" / "b.en") == tr.translate(LINES[3:])
    out2 = tmp_path / "out2"
    translate_run(_cfg(trained, d, out2, glob="*", out_suffix=""))      # every file, the sources' names
    assert sorted(p.name for p in out2.rglob("*") if p.is_file()) == ["a.zh", "b.zh", "readme.txt"]
    _write(d / "a.txt", ["w1"])
    with pytest.raises(ValueError, match=r"a\.txt and .*a\.zh would both be translated to .*a\.en"):
        translate_run(_cfg(trained, d, tmp_path / "out3", glob="*", out_suffix=".en"))


def test_sgml_output_mirrors_the_input_documents(trained, tmp_path):
    sgm = tmp_path / "in.sgm"
    body = ['<srcset setid="tiny" srclang="zh">']
    for doc, segs in (("d1", LINES[:3]), ("d2", LINES[3:])):
        body += [f'<DOC docid="{doc}">'] + [f"<seg id={i + 1}> {s} </seg>" for i, s in enumerate(segs)] + ["</DOC>"]
    sgm.write_text("\n".join(body + ["</srcset>"]) + "\n", encoding="utf-8")
    translate_run(_cfg(trained, sgm, tmp_path / "plain.txt"))
    translate_run(_cfg(trained, sgm, tmp_path / "out.sgm", output_format="sgml"))
    text = (tmp_path / "out.sgm").read_text(encoding="utf-8")
    assert text.startswith('<tstset setid="tiny" srclang="zh" trglang="en">\n<DOC docid="d1" sysid="doctrans">\n<p>\n')
    back = read_sgml(tmp_path / "out.sgm")[0]
    assert back.docs == [("d1", 3), ("d2", 2)] and back.segments == _lines(tmp_path / "plain.txt")
    with pytest.raises(ValueError, match="--output-format sgml needs an SGML input file"):
        translate_run(_cfg(trained, _write(tmp_path / "x.bpe", LINES), tmp_path / "o", output_format="sgml"))
    r = CliRunner().invoke(cli, ["translate", "-c", str(trained), "-i", str(sgm), "--input-format", "bpe",
                                 "--output-format", "sgml", "--beam", "2"])
    assert r.exit_code == 0 and r.stdout.startswith("<tstset") and r.stdout.count("<seg id=") == 5


def test_nbest_lists_with_scores_and_unchanged_1best(trained, tmp_path):
    inp = _write(tmp_path / "in.bpe", LINES)
    translate_run(_cfg(trained, inp, tmp_path / "one"))
    translate_run(_cfg(trained, inp, tmp_path / "two", nbest=3, nbest_out=str(tmp_path / "nb.jsonl")))
    assert (tmp_path / "two").read_bytes() == (tmp_path / "one").read_bytes()
    rows = [json.loads(x) for x in _lines(tmp_path / "nb.jsonl")]
    assert [r["line"] for r in rows] == [1, 2, 3, 4, 5] and rows[2]["hypotheses"] == []
    one = _lines(tmp_path / "one")
    for r, best in zip(rows, one):
        hyps = r["hypotheses"]
        if not best:
            continue
        assert 1 <= len(hyps) <= 3 and [h["rank"] for h in hyps] == list(range(1, len(hyps) + 1))
        assert hyps[0]["text"] == best
        scores = [h["score"] for h in hyps]
        assert scores == sorted(scores, reverse=True) and all(s <= 0 for s in scores)
    assert any(len(r["hypotheses"]) == 3 for r in rows)
    for bad, msg in (({"nbest": 4, "nbest_out": "x"}, "--nbest 4 exceeds --beam 3"),
                     ({"nbest": 2}, "--nbest N needs --nbest-out FILE"),
                     ({"nbest_out": "x"}, "--nbest-out needs --nbest N")):
        with pytest.raises(ValueError, match=msg):
            translate_run(_cfg(trained, inp, tmp_path / "o", **bad))
    r = CliRunner().invoke(cli, ["translate", "-c", str(trained), "-i", str(inp), "--input-format", "bpe",
                                 "--tokenized", "--beam", "3", "-o", str(tmp_path / "o3"), "--nbest", "2",
                                 "--nbest-out", "-"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4, 5] and rows[2]["hypotheses"] == []
    assert _lines(tmp_path / "o3") == one
