"""Translating documents (`doctrans translate` with a context model): --docs, SGML <DOC> input,
directories; line counts and document order kept; bad document inputs are clear errors."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from conftest import train_tiny
from doctrans.cli import cli
from doctrans.inference.translate import TranslateConfig, Translator, translate_input as translate_run

HAN_DEC = "context={type: han, context_sents: 2, attach: both, heads: 2, d_ff: 32, dropout: 0.0}"
LINES = ["w1 w2 w3", "w4 w5", "", "w6 w7 w8", "w9", "w1 w3", "w2"]
DOCS = ["a\t0", "a\t1", "a\t2", "b\t0", "b\t1", "b\t2", "c\t0"]


@pytest.fixture(scope="module")
def han_ckpt(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("han"), 20, "train.max_steps=30", HAN_DEC)


def _translator(ckpt):
    return Translator(TranslateConfig(checkpoint=str(ckpt), input_format="bpe", tokenized=True, beam=2))


def test_documents_batched_together_equal_documents_alone(han_ckpt):
    tr = _translator(han_ckpt)
    ids = [d.split("\t")[0] for d in DOCS]
    together = tr.translate(LINES, doc_ids=ids)
    alone = tr.translate(LINES[:3], doc_ids=ids[:3]) + tr.translate(LINES[3:6], doc_ids=ids[3:6]) \
        + tr.translate(LINES[6:], doc_ids=ids[6:])
    assert together == alone and len(together) == len(LINES)
    assert together[2] == "" and all(together[i] for i in (0, 1, 3, 4, 5, 6))
    assert tr.translate(LINES[3:6], doc_ids=["x"] * 3) == alone[3:6]        # names do not matter
    # context matters: the same sentence after different documents' sentences may differ, and
    # the first sentence of a document equals the sentence translated alone
    assert together[3] == tr.translate([LINES[3]])[0]


def test_cli_docs_sgml_and_bad_inputs(han_ckpt, tmp_path):
    inp, docs = tmp_path / "in.bpe", tmp_path / "in.docs"
    inp.write_text("".join(f"{x}\n" for x in LINES), encoding="utf-8")
    docs.write_text("".join(f"{x}\n" for x in DOCS), encoding="utf-8")
    common = ["-c", str(han_ckpt), "--input-format", "bpe", "--tokenized", "--beam", "2"]
    runner = CliRunner()
    r = runner.invoke(cli, ["translate", *common, "-i", str(inp), "--docs", str(docs), "-o", str(tmp_path / "o1")])
    assert r.exit_code == 0, r.output
    out = (tmp_path / "o1").read_text(encoding="utf-8").split("\n")[:-1]
    assert out == _translator(han_ckpt).translate(LINES, doc_ids=[d.split("\t")[0] for d in DOCS])

    sgm = tmp_path / "in.sgm"
    body = ['<srcset setid="t" srclang="zh">']
    for doc, segs in (("a", LINES[:2]), ("b", LINES[3:6])):
        body += [f'<doc docid="{doc}">'] + [f"<seg id={i + 1}> {s} </seg>" for i, s in enumerate(segs)] + ["</doc>"]
    sgm.write_text("\n".join(body + ["</srcset>"]) + "\n", encoding="utf-8")
    r = runner.invoke(cli, ["translate", *common, "-i", str(sgm), "-o", str(tmp_path / "o2")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "o2").read_text(encoding="utf-8").split("\n")[:-1] == out[:2] + out[3:6]

    bad = [("short.docs", DOCS[:-1], "has 6 lines"), ("back.docs", DOCS[:4] + ["b\t0"] + DOCS[5:], "back.docs:5"),
           ("split.docs", DOCS[:6] + ["a\t3"], "split.docs:7")]
    for name, content, msg in bad:
        (tmp_path / name).write_text("".join(f"{x}\n" for x in content), encoding="utf-8")
        with pytest.raises(ValueError, match=msg):
            translate_run(TranslateConfig(checkpoint=str(han_ckpt), input=str(inp), output=str(tmp_path / "o3"),
                                          input_format="bpe", docs=str(tmp_path / name)))
    nodoc = tmp_path / "nodoc.sgm"
    nodoc.write_text("<srcset>\n<seg id=1> w1 </seg>\n</srcset>\n", encoding="utf-8")
    r = runner.invoke(cli, ["translate", *common, "-i", str(nodoc), "-o", str(tmp_path / "o4")])
    assert r.exit_code != 0 and "nodoc.sgm" in r.output + str(r.exception)
