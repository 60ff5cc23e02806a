"""`doctrans translate` never replaces its input and checks its outputs before any work (issue 50
items 2 and 16); a UTF-8 byte order mark is not text on any input path (item 10); SGML input is
known by its content (item 13); `--compute-type int8` with the native engine is `--quantize int8`
(item 15). Tiny models trained on conftest's reversal task."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import train_tiny
from doctrans.cli import cli
from doctrans.inference.options import model_languages
from doctrans.inference.translate import TranslateConfig, Translator
from doctrans.stages import translate as translate_run

LINES = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8"]
BOM = "\ufeff"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("safe"), 30, "train.max_steps=20", "train.eval_every=0")


def _cfg(ckpt, inp, out, **kw) -> TranslateConfig:
    kw.setdefault("beam", 2)
    return TranslateConfig(checkpoint=str(ckpt), input=str(inp), output=str(out), threads=1,
                           input_format="bpe", tokenized=True, **kw)


def _write(path: Path, lines: list[str], prefix: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prefix + "".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _no_model(monkeypatch):
    """Fail the test if a model is loaded: the checks must come before any work."""
    import doctrans.inference.translate as t
    import doctrans.inference.translator as tr

    def boom(cfg):
        raise AssertionError("the model was loaded before the outputs were checked")
    monkeypatch.setattr(t, "load_model", boom)
    monkeypatch.setattr(tr, "load_model", boom)         # (the one Translator calls)


def test_output_that_is_the_input_is_refused_before_any_work(trained, tmp_path, monkeypatch):
    src = _write(tmp_path / "in.bpe", LINES)
    before = src.read_bytes()
    _no_model(monkeypatch)
    with pytest.raises(ValueError, match=r"--output .*in\.bpe is the --input: writing it would replace the input"):
        translate_run(_cfg(trained, src, src))
    link = tmp_path / "link.bpe"
    link.symlink_to(src)
    with pytest.raises(ValueError, match=r"is the --input \(the same file as .*in\.bpe\)"):
        translate_run(_cfg(trained, src, link))
    hard = tmp_path / "hard.bpe"
    os.link(src, hard)
    with pytest.raises(ValueError, match="the same file as"):
        translate_run(_cfg(trained, hard, src))
    monkeypatch.chdir(tmp_path)                                       # a relative spelling of the same path
    with pytest.raises(ValueError, match=r"^--output in\.bpe is the --input: "):
        translate_run(_cfg(trained, src, "in.bpe"))
    docs = _write(tmp_path / "in.docs", ["a\t0", "a\t1", "a\t2", "a\t3"])
    with pytest.raises(ValueError, match="--nbest-out .* is the --docs"):
        translate_run(_cfg(trained, src, tmp_path / "o", docs=str(docs), nbest=1, nbest_out=str(docs)))
    with pytest.raises(ValueError, match="--dp-out .* is the --checkpoint"):
        translate_run(_cfg(trained, src, tmp_path / "o", dp_out=str(trained)))
    assert src.read_bytes() == before and (tmp_path / "in.docs").read_text().count("\n") == 4


def test_cli_refuses_i_x_o_x(trained, tmp_path):
    src = _write(tmp_path / "in.bpe", LINES)
    r = CliRunner().invoke(cli, ["translate", "-c", str(trained), "--input-format", "bpe", "-i", str(src),
                                 "-o", str(src)])
    assert r.exit_code != 0 and "would replace the input" in str(r.exception or r.output)
    assert _lines(src) == LINES


def test_file_output_that_is_a_directory_is_refused_before_any_work(trained, tmp_path, monkeypatch):
    src = _write(tmp_path / "in.bpe", LINES)
    (tmp_path / "outdir").mkdir()
    _no_model(monkeypatch)
    with pytest.raises(ValueError, match=r"--output .*outdir is an existing directory: give a file path"):
        translate_run(_cfg(trained, src, tmp_path / "outdir"))
    with pytest.raises(ValueError, match="--nbest-out .*outdir is an existing directory"):
        translate_run(_cfg(trained, src, tmp_path / "o", nbest=1, nbest_out=str(tmp_path / "outdir")))
    with pytest.raises(ValueError, match=r"in\.bpe is a file, not a directory"):
        translate_run(_cfg(trained, src, src / "new" / "out.txt"))
    if os.geteuid() != 0:                                             # (root may write anywhere)
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="is not writable"):
            translate_run(_cfg(trained, src, locked / "out.txt"))


def test_directory_outputs_take_the_target_language_suffix(trained, tmp_path, caplog):
    assert model_languages(str(trained)) == ("zh", "en")
    d = _write(tmp_path / "docs" / "ep1.zh", LINES).parent
    _write(d / "sub" / "ep2.zh", LINES[:2]), _write(d / "notes.txt", ["w1"])
    translate_run(_cfg(trained, d, tmp_path / "out", glob="*"))
    got = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert got == ["ep1.en", "notes.txt", "sub/ep2.en"]                 # .zh → .en; other names kept
    assert _lines(tmp_path / "out" / "ep1.en") == Translator(_cfg(trained, "-", "-")).translate(LINES)
    with caplog.at_level(logging.INFO):                                 # --resume finds the renamed outputs
        translate_run(_cfg(trained, d, tmp_path / "out", glob="*", resume=True))
    assert "0 translated, 3 skipped" in caplog.text
    translate_run(_cfg(trained, d, tmp_path / "keep", out_suffix=""))   # '' keeps every name
    assert sorted(p.name for p in (tmp_path / "keep").rglob("*") if p.is_file()) == ["ep1.zh", "ep2.zh"]
    r = CliRunner().invoke(cli, ["translate", "--help"])
    assert "ep1.zh's translation is OUT/ep1.en" in " ".join(r.output.split())


def test_byte_order_mark_is_not_text_on_any_input_path(trained, tmp_path):
    """A file of '\\ufeffw1 w2 w3' gives the translation of 'w1 w2 w3' (file, stdin, directory,
    SGML; the API in test_api_batch.py)."""
    plain = Translator(_cfg(trained, "-", "-")).translate(LINES)
    f = _write(tmp_path / "bom.bpe", LINES, prefix=BOM)
    translate_run(_cfg(trained, f, tmp_path / "o.txt"))
    assert _lines(tmp_path / "o.txt") == plain
    joined = tmp_path / "joined.bpe"                                    # `cat a b` of two files with a mark each
    joined.write_bytes(f.read_bytes() + f.read_bytes())
    translate_run(_cfg(trained, joined, tmp_path / "o2.txt"))
    assert _lines(tmp_path / "o2.txt") == plain + plain
    r = CliRunner().invoke(cli, ["translate", "-c", str(trained), "--input-format", "bpe", "--tokenized", "--beam", "2",
                                 "--threads", "1"], input=f.read_bytes())            # stdin
    assert r.exit_code == 0, r.output
    assert r.stdout.split("\n")[:-1] == plain
    d = tmp_path / "docs"
    _write(d / "a.zh", LINES, prefix=BOM)
    translate_run(_cfg(trained, d, tmp_path / "dout"))
    assert _lines(tmp_path / "dout" / "a.en") == plain
    sgm = tmp_path / "in.sgm"
    sgm.write_text(BOM + '<srcset setid="t" srclang="zh">\n<DOC docid="d1">\n'
                   + "".join(f"<seg id={i + 1}>{x}</seg>\n" for i, x in enumerate(LINES)) + "</DOC>\n</srcset>\n",
                   encoding="utf-8")
    translate_run(_cfg(trained, sgm, tmp_path / "sgm.txt"))
    assert _lines(tmp_path / "sgm.txt") == plain


def test_sgml_input_is_known_by_its_content(trained, tmp_path):
    plain = Translator(_cfg(trained, "-", "-")).translate(LINES)
    body = ("  \n<srcset setid=\"t\" srclang=\"zh\">\n<DOC docid=\"d1\">\n"
            + "".join(f"<seg id={i + 1}>{x}</seg>\n" for i, x in enumerate(LINES)) + "</DOC>\n</srcset>\n")
    txt = tmp_path / "src.txt"                                          # an .sgm copied to a .txt name
    txt.write_text(body, encoding="utf-8")
    translate_run(_cfg(trained, txt, tmp_path / "o.txt"))
    assert _lines(tmp_path / "o.txt") == plain                          # the segments, not the tags
    translate_run(_cfg(trained, txt, tmp_path / "o.sgm", output_format="sgml"))
    assert (tmp_path / "o.sgm").read_text(encoding="utf-8").startswith('<tstset setid="t"')
    doc_only = tmp_path / "docs_only"                                   # a bare <DOC> block, no set tag
    doc_only.write_text('<DOC docid="x">\n<seg id=1>w1 w2</seg>\n</DOC>\n', encoding="utf-8")
    translate_run(_cfg(trained, doc_only, tmp_path / "o3.txt"))
    assert _lines(tmp_path / "o3.txt") == Translator(_cfg(trained, "-", "-")).translate(["w1 w2"])


def test_native_compute_type_int8_is_quantize_int8(trained, tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        tr = Translator(_cfg(trained, "-", "-", compute_type="int8"))
    assert tr.cfg.model.quantize == "int8" and tr.cfg.model.compute_type == "default"
    assert "--compute-type int8 with the native engine: decoding with --quantize int8" in caplog.text
    assert tr.translate(LINES) == Translator(_cfg(trained, "-", "-", quantize="int8")).translate(LINES)
    with pytest.raises(ValueError, match="--compute-type float16 is CTranslate2's"):
        Translator(_cfg(trained, "-", "-", compute_type="float16"))
    assert Translator(_cfg(trained, "-", "-", compute_type="float32")).cfg.model.quantize == "none"


def test_output_that_is_the_file_behind_stdin_is_refused_before_any_work(trained, tmp_path, monkeypatch):
    """`translate -o a.zh < a.zh` (issue 73 item 1): standard input's file is an input too."""
    src = _write(tmp_path / "in.bpe", LINES)
    before = src.read_bytes()
    hard = tmp_path / "hard.bpe"
    os.link(src, hard)
    _no_model(monkeypatch)
    for out in (src, hard):
        with open(src, "rb") as f:
            monkeypatch.setattr("sys.stdin", open(f.fileno(), encoding="utf-8", closefd=False))
            with pytest.raises(ValueError, match=rf"--output {out} is the file standard input reads \(--input -\): "
                                                 r"writing it would replace the input"):
                translate_run(_cfg(trained, "-", out))
    assert src.read_bytes() == before


def test_directory_input_with_an_existing_file_output_is_refused_before_any_work(trained, tmp_path, monkeypatch):
    """`-i DIR -o FILE` (issue 73 item 10) was refused only after translating every document."""
    d = _write(tmp_path / "docs" / "ep1.zh", LINES).parent
    out = _write(tmp_path / "out.txt", ["keep"])
    _no_model(monkeypatch)
    with pytest.raises(ValueError, match=rf"--output {out} is an existing file: the directory input {d} needs an "
                                         r"output directory"):
        translate_run(_cfg(trained, d, out))
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ep1.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nw1 w2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"--output {out} is an existing file"):
        translate_run(_cfg(trained, subs, out))
    assert _lines(out) == ["keep"]


def test_subtitle_output_that_is_its_input_is_refused_before_any_work(trained, tmp_path, monkeypatch):
    src = tmp_path / "ep1.srt"
    src.write_text("1\n00:00:01,000 --> 00:00:02,000\nw1 w2\n", encoding="utf-8")
    before = src.read_bytes()
    _no_model(monkeypatch)
    with pytest.raises(ValueError, match=r"--output .*ep1\.srt is the --input: writing it would replace the input"):
        translate_run(_cfg(trained, src, src))
    assert src.read_bytes() == before
