"""annotate-dp as a pipeline: symmetrisation, eflomal, KenLM, and the CLI on ~400 TVsub lines."""
from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from conftest import needs_tvsub, write_tvsub_slice
from doctrans.cli import cli
from doctrans.dp.align import (
    eflomal_align, format_alignment, grow_diag_final_and, symmetrize, symmetrize_lines)
from doctrans.dp.annotate import NO_DP_LABEL, parse_alignment
from doctrans.dp.explain import original_boundaries
from doctrans.dp.ngram_lm import KenLMToolNotFound, find_kenlm_tool


def _has_lmplz() -> bool:
    try:
        find_kenlm_tool("lmplz")
        find_kenlm_tool("build_binary")
        return True
    except KenLMToolNotFound:
        return False


needs_lmplz = pytest.mark.skipif(not _has_lmplz(), reason="KenLM lmplz not built (run `make kenlm`)")


# ---------------------------------------------------------------- symmetrisation

def test_intersection_union_and_directions():
    fwd, rev = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (2, 2)}
    assert symmetrize(fwd, rev, "intersect") == {(0, 0), (1, 1)}
    assert symmetrize(fwd, rev, "union") == {(0, 0), (1, 1), (2, 1), (2, 2)}
    assert symmetrize(fwd, rev, "forward") == fwd and symmetrize(fwd, rev, "reverse") == rev
    with pytest.raises(ValueError, match="unknown symmetrization"):
        symmetrize(fwd, rev, "gdfa")


def test_grow_diag_final_and_hand_example():
    # grow: (2,1) neighbours (1,1) and source 2 is unaligned → added; then (2,2) (diagonal of
    # (1,1), target 2 unaligned) → added. (0,3) is in the union but source 0 and target 3? target
    # 3 is unaligned, so it is grown only if it neighbours a link: it does not; final-and adds it
    # only if both words are unaligned (source 0 is aligned) → not added. (5,5): both unaligned,
    # far away → added by final-and.
    fwd = {(0, 0), (1, 1), (2, 1), (5, 5)}
    rev = {(0, 0), (1, 1), (2, 2), (0, 3)}
    assert grow_diag_final_and(fwd, rev) == {(0, 0), (1, 1), (2, 1), (2, 2), (5, 5)}
    assert symmetrize_lines(["0-0 1-1"], ["0-0 1-2"], "intersect") == ["0-0"]
    assert format_alignment({(2, 1), (0, 0), (1, 3)}) == "0-0 1-3 2-1"


def test_eflomal_learns_a_synthetic_dictionary(tmp_path):
    """600 pairs over a 12-word dictionary, target order reversed: the intersection must find
    the dictionary links in nearly every sentence."""
    rng = random.Random(0)
    src, tgt = [], []
    for _ in range(600):
        words = [rng.randrange(12) for _ in range(rng.randint(2, 6))]
        src.append(" ".join(f"z{w}" for w in words))
        tgt.append(" ".join(f"e{w}" for w in reversed(words)))
    (tmp_path / "s").write_text("\n".join(src) + "\n\n", encoding="utf-8")   # + an empty pair
    (tmp_path / "t").write_text("\n".join(tgt) + "\n\n", encoding="utf-8")
    eflomal_align(tmp_path / "s", tmp_path / "t", tmp_path / "f", tmp_path / "r", n_samplers=1)
    fwd = (tmp_path / "f").read_text(encoding="utf-8").split("\n")[:-1]
    rev = (tmp_path / "r").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(fwd) == len(rev) == 601 and fwd[-1] == "" and rev[-1] == ""
    correct = total = 0
    for s, t, f, r in zip(src, tgt, fwd, rev):
        links = symmetrize(parse_alignment(f), parse_alignment(r), "intersect")
        sw, tw = s.split(), t.split()
        correct += sum(sw[i][1:] == tw[j][1:] for i, j in links)
        total += len(sw)
    assert correct / total > 0.9


# ---------------------------------------------------------------- KenLM

@needs_lmplz
def test_kenlm_estimates_and_scores(tmp_path):
    from doctrans.dp.ngram_lm import KenLMScorer, estimate_lm

    text = tmp_path / "zh.txt"
    text.write_text("我 爱 你\n你 爱 我\n我 不 知道\n他 不 知道\n" * 20, encoding="utf-8")
    lm = KenLMScorer(estimate_lm(text, tmp_path / "lm.bin", order=3, memory="64M"))
    assert lm.order == 3
    assert lm("我 不 知道".split()) > lm("知道 不 我".split())
    assert lm("我 爱 你".split()) > lm("我 爱 爱 你".split())


def test_missing_kenlm_tool_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    monkeypatch.delenv("DOCTRANS_KENLM_BIN", raising=False)
    with pytest.raises(KenLMToolNotFound, match="make kenlm"):
        find_kenlm_tool("lmplz")


# ---------------------------------------------------------------- explain geometry

def test_original_boundaries_undo_earlier_insertions():
    from doctrans.dp.annotate import find_dps
    # 给 / give me it: "me" goes to the end (boundary 1); "it" is searched in 给 我 and its
    # gaps 1, 2 both lie at original boundary 1
    res = find_dps(["给"], ["give", "me", "it"], {(0, 0)}, lambda toks: 0.0, link_inserted=False)
    assert original_boundaries(res) == [([1], 1), ([1, 1], 1)]


# ---------------------------------------------------------------- the command on real lines

@needs_tvsub()
@needs_lmplz
def test_annotate_dp_cli_on_tvsub(tmp_path):
    corpus, prep = tmp_path / "tvsub", tmp_path / "prep"
    write_tvsub_slice(corpus, train_docs=2, train_lines=200, eval_lines=30)         # 60 dev/test lines
    runner = CliRunner()
    r = runner.invoke(cli, ["preprocess", "--data-dir", str(corpus), "--train-docs", "0:2", "-o", str(prep),
                            "--bpe-merges", "100", "--workers", "1"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["annotate-dp", "corpus", "-p", str(prep), "--workers", "1", "--align-samplers", "1",
                            "--lm-order", "3", "--lm-memory", "64M", "--explain", "2"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = prep / "dp"
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    for split in ("train", "dev", "test"):
        src = (prep / f"{split}.tok.zh").read_text(encoding="utf-8").split("\n")
        dp = (out / f"{split}.dp.zh").read_text(encoding="utf-8").split("\n")
        dpp = (out / f"{split}.dpp.zh").read_text(encoding="utf-8").split("\n")
        lab = (out / f"{split}.dplabel").read_text(encoding="utf-8").split("\n")
        ali = (out / f"{split}.align").read_text(encoding="utf-8").split("\n")
        assert len(src) == len(dp) == len(dpp) == len(lab) == len(ali)             # line-aligned
        assert (out / f"{split}.docs").read_text() == (prep / f"{split}.docs").read_text()
        n_dp = 0
        for s, d, p, l in zip(src, dp, dpp, lab):
            s, d, p, l = s.split(), d.split(), p.split(), l.split()
            if not s and not l:
                continue
            assert len(l) == len(s) + 1 and len(d) == len(p)
            assert [t for t in p if t != "#DP#"] == s                                # only insertions
            assert [t for t, q in zip(d, p) if q != "#DP#"] == s
            n_dp += p.count("#DP#")
            assert sum(x != NO_DP_LABEL for x in l) <= p.count("#DP#")
        st = stats[split]
        if split == "train":          # filtered lines (train.target 0): context only, not annotated
            flags = (prep / "train.target").read_text(encoding="utf-8").split("\n")
            skipped = [k for k, f in enumerate(flags) if f == "0"]
            assert skipped and st["sentences"] == flags.count("1")
            for k in skipped:
                assert dp[k] == dpp[k] == src[k] and ali[k] == "" and set(lab[k].split()) == {NO_DP_LABEL}
                assert len(lab[k].split()) == len(src[k].split()) + 1
        assert st["dropped"] == n_dp and 0 < st["dropped"] < st["pronouns"]
        assert st["dropped"] == sum(v["dropped"] for v in st["by_type"].values())
    agr = json.loads((out / "agreement.json").read_text(encoding="utf-8"))
    assert set(agr) == {"dev", "test"} and agr["dev"]["lines"] == 60
    assert 0.0 < agr["dev"]["position"]["f1"] <= 1.0 and agr["dev"]["oracle_dps"] > 0
    assert len(list((out / "explain").glob("*.png"))) == 2 and len(list((out / "explain").glob("*.txt"))) == 2
    assert "agreement with the hand-annotated oracle" in r.output
    # rerun: alignment and LM reused, the same annotation written again
    before = (out / "train.dp.zh").read_text(encoding="utf-8")
    r = runner.invoke(cli, ["annotate-dp", "corpus", "-p", str(prep), "--workers", "2", "--lm-order", "3"],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert (out / "train.dp.zh").read_text(encoding="utf-8") == before
