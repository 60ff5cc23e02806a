"""`doctrans score` as a new user meets it (issue 50): an SGML hypothesis (`translate
--output-format sgml`) is scored by its segments and SGML is known by its content (item 13); a
byte order mark is not text in the hypothesis, the references or the source (item 10); the
bleu_tok_lc signature says which tokenization made the figure, each score is printed once, and a
reference in another script than the hypothesis gets a warning (item 17)."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sacremoses
from click.testing import CliRunner

from doctrans.cli import cli
from doctrans.data.sgml import format_sgml
from doctrans.evaluation import score as S

HYP = ["it 's fine .", "see you .", "thank you very much ."]
REF = ["it 's fine .", "see you later .", "thanks a lot ."]
BOM = "\ufeff"


def _write(path: Path, lines: list[str], prefix: str = "") -> str:
    path.write_text(prefix + "".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _bleu(hyp: str, *refs: str, **kw) -> dict:
    return S.score_files(S.ScoreConfig(hyp=hyp, refs=refs, metrics=("bleu_tok_lc",), **kw))


def test_sgml_hypothesis_is_scored_by_its_segments(tmp_path):
    ref = _write(tmp_path / "ref.txt", REF)
    want = _bleu(_write(tmp_path / "hyp.txt", HYP), ref)["bleu_tok_lc"]["score"]
    sgml = format_sgml([("d1", 2), ("d2", 1)], HYP, setid="t")       # what translate --output-format sgml writes
    for name in ("hyp.sgm", "hyp.txt.out"):                          # by content, whatever the name
        (tmp_path / name).write_text(sgml, encoding="utf-8")
        res = _bleu(str(tmp_path / name), ref)
        assert res["n_lines"] == 3 and res["bleu_tok_lc"]["score"] == want
    # an SGML reference set named .txt is read as SGML too; a baseline in SGML likewise
    refset = sgml.replace("<tstset", "<refset").replace("</tstset>", "</refset>").replace('sysid="doctrans"',
                                                                                        'sysid="r1"')
    (tmp_path / "refs.txt").write_text(refset, encoding="utf-8")
    assert _bleu(str(tmp_path / "hyp.sgm"), str(tmp_path / "refs.txt"))["bleu_tok_lc"]["score"] == pytest.approx(100.0)
    res = _bleu(_write(tmp_path / "h2.txt", HYP), ref, baseline=str(tmp_path / "hyp.sgm"), bootstrap=10)
    assert res["significance"]["sign_test"]["ties"] == 3
    r = CliRunner().invoke(cli, ["score", "-", "-r", ref, "--metrics", "bleu_tok_lc", "--json"], input=sgml)
    assert r.exit_code == 0, r.output
    assert '"n_lines": 3' in r.stdout


def test_byte_order_mark_is_not_text(tmp_path):
    ref = _write(tmp_path / "ref.txt", REF)
    want = _bleu(_write(tmp_path / "hyp.txt", HYP), ref)["bleu_tok_lc"]["score"]
    assert want < 100
    bom_hyp = _write(tmp_path / "bom_hyp.txt", HYP, BOM)
    bom_ref = _write(tmp_path / "bom_ref.txt", REF, BOM)
    assert _bleu(bom_hyp, bom_ref)["bleu_tok_lc"]["score"] == want
    assert _bleu(bom_hyp, _write(tmp_path / "same.txt", HYP, BOM))["bleu_tok_lc"]["score"] == pytest.approx(100.0)
    sgml = format_sgml([("d1", 3)], REF).replace("<tstset", "<refset").replace("</tstset>", "</refset>")
    (tmp_path / "ref.sgm").write_text(BOM + sgml, encoding="utf-8")
    assert _bleu(bom_hyp, str(tmp_path / "ref.sgm"), refs_tokenized=True)["bleu_tok_lc"]["score"] == want
    # the source of DP recall (--base / --oracle) and of APT is read the same way
    assert S.read_lines(_write(tmp_path / "src.zh", ["他 来 了", "好"], BOM)) == ["他 来 了", "好"]


def test_signature_says_how_it_was_tokenized_and_scores_print_once(tmp_path, caplog):
    hyp, ref = _write(tmp_path / "hyp.txt", ["It's fine.", "See you."]), _write(tmp_path / "ref.txt", REF[:2])
    res = _bleu(hyp, ref)
    sig = res["bleu_tok_lc"]["signature"]
    assert "tok:none" not in sig and f"tok:moses-sacremoses-{sacremoses.__version__}-dash" in sig
    assert "-dash" not in _bleu(hyp, ref, split_hyphens=False)["bleu_tok_lc"]["signature"]
    assert "tok:13a" in S.score_files(S.ScoreConfig(hyp=hyp, refs=(ref,), metrics=("sacrebleu",)))[
        "sacrebleu"]["signature"]
    with caplog.at_level(logging.INFO):
        r = CliRunner().invoke(cli, ["score", hyp, "-r", ref, "--metrics", "bleu_tok_lc"])
    assert r.exit_code == 0, r.output
    score = f"{res['bleu_tok_lc']['score']:.2f}"
    assert r.stdout.count(score) == 1                                # the table …
    assert not [m for m in caplog.messages if score in m]            # … and not the log (stderr) as well


def test_reference_in_another_script_is_warned(tmp_path, caplog):
    hyp = _write(tmp_path / "hyp.txt", HYP)
    src = _write(tmp_path / "src.zh", ["没事 。", "再见 。", "非常 感谢 。"])
    with caplog.at_level(logging.WARNING):
        res = _bleu(hyp, src)
    assert any("reference 1 of 1 is 100%" in n and "the source given as a reference?" in n for n in res["notes"])
    assert "they are not in one language" in caplog.text
    assert "NOTE: the hypothesis is 0% CJK script" in S.format_table(res)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ok = _bleu(hyp, _write(tmp_path / "ref.txt", REF))
    assert not any("CJK" in n for n in ok["notes"]) and "CJK" not in caplog.text
    assert S.cjk_share(["abc 好"]) == 0.25 and S.cjk_share([""]) == 0.0
