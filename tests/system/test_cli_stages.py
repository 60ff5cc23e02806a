"""All five stages through the click CLI on a small slice of TVsub (``tvsub_slice``, cut at test
time from ../shared/corpora/tvsub in the corpus' own layout).

preprocess → annotate-dp → train → translate → score (BLEU against 3 SGML references, and
``score dp`` against the hand DP oracle); then a DP generator trained on the slice's
annotation and applied with ``annotate-dp --generator``. Everything is written under tmp_path.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import CHINESE_PRONOUNS, REPO, oracle_insertions
from doctrans.cli import cli
from doctrans.data.sgml import read_sgml

# The file formats of `annotate-dp` (its --help), spelled out so this test sees only the CLI.
DPP_TOKEN, NO_DP_LABEL = "#DP#", "N"


def _has_kenlm() -> bool:
    """lmplz and build_binary where annotate-dp looks: $DOCTRANS_KENLM_BIN, the venv, $PATH."""
    dirs = [os.environ.get("DOCTRANS_KENLM_BIN"), str(Path(sys.executable).parent)]
    return all(any(d and os.access(Path(d) / tool, os.X_OK) for d in dirs) or shutil.which(tool)
               for tool in ("lmplz", "build_binary"))


needs_kenlm = pytest.mark.skipif(not _has_kenlm(), reason="KenLM lmplz not built (run `make kenlm`)")


def _lines(path: Path) -> list[str]:
    """Lines split on \\n only; a file ends with a newline, so the last (empty) piece is dropped."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), path
    return text.split("\n")[:-1]


def _invoke(*args) -> str:
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def _oracle_dp_count(corpus: Path, split: str) -> int:
    """DPs of the slice's hand oracle (each of its lines is the base plus inserted pronouns)."""
    base = _lines(corpus / split / f"{split}.seg.zh")
    oracle = _lines(corpus / split / f"{split}.oracle-dp.seg.zh")
    return sum(len(oracle_insertions(b, o)) for b, o in zip(base, oracle))


@pytest.fixture(scope="module")
def slice_annotated(tvsub_slice, tmp_path_factory) -> Path:
    """Stages 1–2 on the slice: PREP (preprocess) with PREP/dp (annotate-dp)."""
    prep = tmp_path_factory.mktemp("slice") / "prep"
    _invoke("preprocess", "--data-dir", tvsub_slice, "--train-docs", "all", "-o", prep, "--bpe-merges", 60,
            "--workers", 1)
    _invoke("annotate-dp", "corpus", "-p", prep, "--workers", 1, "--align-samplers", 1, "--lm-memory", "64M")
    return prep


@needs_kenlm
def test_preprocess_reads_the_tvsub_layout(slice_annotated, tvsub_slice):
    prep, corpus = slice_annotated, tvsub_slice
    meta = json.loads((prep / "meta.json").read_text(encoding="utf-8"))
    n_train = sum(len(_lines(p)) for p in (corpus / "train").glob("*.zh"))
    assert meta["splits"]["train"]["documents"] == len(list((corpus / "train").glob("*.zh")))
    assert meta["splits"]["train"]["sentences"] == n_train == len(_lines(prep / "train.target"))
    assert meta["splits"]["train"]["targets"] + meta["filter"]["removed"] == n_train
    asked = []
    for split in ("dev", "test"):
        refs = read_sgml(corpus / split / f"{split}.ref.sgm")
        docs = [line.split("\t") for line in _lines(prep / f"{split}.docs")]
        assert [d for d, _ in docs] == refs[0].doc_ids()                      # <DOC> boundaries kept
        assert [int(p) for d, p in docs if d == docs[-1][0]] == list(range(refs[0].docs[-1][1]))
        raw, tok = _lines(corpus / split / f"{split}.zh"), _lines(prep / f"{split}.tok.zh")
        assert len(tok) == len(raw)
        asked += [t for r, t in zip(raw, tok) if "？" in r]
    assert asked and all("?" in t and "？" not in t for t in asked)           # full-width ？ normalised


@needs_kenlm
def test_annotate_dp_finds_dropped_pronouns_and_scores_against_the_oracle(slice_annotated, tvsub_slice):
    prep, out, corpus = slice_annotated, slice_annotated / "dp", tvsub_slice
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert set(stats) == {"train", "dev", "test"}
    for split in ("train", "dev", "test"):
        src = _lines(prep / f"{split}.tok.zh")
        dp, dpp, lab = (_lines(out / f"{split}.{x}") for x in ("dp.zh", "dpp.zh", "dplabel"))
        assert len(src) == len(dp) == len(dpp) == len(lab)                     # line counts preserved
        n_dp = 0
        for s, d, p, l in zip(src, dp, dpp, lab):
            s, d, p, l = s.split(), d.split(), p.split(), l.split()
            assert [t for t in p if t != DPP_TOKEN] == s                       # only insertions
            inserted = [t for t, q in zip(d, p) if q == DPP_TOKEN]
            assert len(d) == len(p) and set(inserted) <= set(CHINESE_PRONOUNS)
            assert len(l) == len(s) + 1 and sum(x != NO_DP_LABEL for x in l) <= len(inserted)
            n_dp += len(inserted)
        targets = _lines(prep / "train.target").count("1") if split == "train" else len(src)
        assert stats[split]["dropped"] == n_dp and stats[split]["sentences"] == targets
    assert 0 < stats["train"]["dropped"] < stats["train"]["pronouns"]         # some, not every, pronoun
    agr = json.loads((out / "agreement.json").read_text(encoding="utf-8"))
    assert set(agr) == {"dev", "test"}
    for split, r in agr.items():
        assert r["lines"] == len(_lines(corpus / split / f"{split}.zh"))
        assert r["oracle_dps"] == _oracle_dp_count(corpus, split) > 0
        assert r["sys_dps"] == stats[split]["dropped"]
        for kind in ("position", "pronoun"):
            assert 0.0 <= r[kind]["precision"] <= 1.0 and 0.0 <= r[kind]["f1"] <= 1.0
        assert r["pronoun"]["matched"] <= r["position"]["matched"] <= min(r["sys_dps"], r["oracle_dps"])
    assert agr["dev"]["position"]["matched"] + agr["test"]["position"]["matched"] > 0

    # score dp recomputes the test row of agreement.json from the files
    res = json.loads(_invoke("score", "dp", out / "test.dp.zh", "--base", prep / "test.tok.zh",
                             "--oracle", corpus / "test" / "test.oracle-dp.seg.zh",
                             "--oracle-base", corpus / "test" / "test.seg.zh", "--json", "--bootstrap", 50))
    for key in ("sys_dps", "oracle_dps"):
        assert res[key] == agr["test"][key]
    assert res["position"]["f1"] == pytest.approx(agr["test"]["position"]["f1"])


def _degrade(base: list[str], oracle: list[str]) -> list[str]:
    """The oracle with every 3rd DP (counted over the file) left out and every 4th replaced by
    another pronoun: a system output whose scores are known exactly."""
    out, k = [], 0
    for b, o in zip(base, oracle):
        toks = o.split()
        for pos in oracle_insertions(b, o):
            k += 1
            if k % 3 == 0:
                toks[pos] = None
            elif k % 4 == 0:                       # a pronoun unlike it and its neighbours
                near = set(toks[max(pos - 1, 0):pos + 2])
                toks[pos] = next(p for p in ("它", "我", "你", "他") if p not in near)
        out.append(" ".join(t for t in toks if t is not None))
    return out


def test_score_dp_of_a_known_system_output(tvsub_slice, tmp_path):
    test = tvsub_slice / "test"
    system = tmp_path / "sys.dp.zh"
    system.write_text("".join(f"{x}\n" for x in _degrade(_lines(test / "test.seg.zh"),
                                                          _lines(test / "test.oracle-dp.seg.zh"))), encoding="utf-8")
    res = json.loads(_invoke("score", "dp", system, "--base", test / "test.seg.zh",
                             "--oracle", test / "test.oracle-dp.seg.zh", "--json", "--bootstrap", 0))
    n = _oracle_dp_count(tvsub_slice, "test")
    kept = [k for k in range(1, n + 1) if k % 3]
    right = [k for k in kept if k % 4]
    assert (res["oracle_dps"], res["sys_dps"]) == (n, len(kept))
    assert res["position"]["matched"] == len(kept) and res["position"]["precision"] == 1.0
    assert res["pronoun"]["matched"] == len(right)
    assert res["pronoun"]["recall"] == pytest.approx(len(right) / n)


@needs_kenlm
def test_five_stages_train_translate_score(slice_annotated, tvsub_slice, tmp_path):
    prep, run_dir, corpus = slice_annotated, tmp_path / "run", tvsub_slice
    _invoke("train", REPO / "pipelines" / "transformer" / "tiny.yaml", f"data.prepared={prep}",
            f"run_dir={run_dir}", "train.max_steps=4", "train.eval_every=2", "train.log_every=1",
            "train.threads=1")
    metrics = [json.loads(line) for line in _lines(run_dir / "metrics.jsonl")]
    assert [r["step"] for r in metrics if r["kind"] == "train"] == [1, 2, 3, 4]
    assert [r["step"] for r in metrics if r["kind"] == "dev"] == [2, 4]
    assert (run_dir / "best.pt").is_file() and (run_dir / "last.pt").is_file()

    src = _lines(corpus / "test" / "test.zh")
    inp, hyp = tmp_path / "in.zh", tmp_path / "out.en"
    inp.write_text("".join(f"{x}\n" for x in src[:3] + [""] + src[3:]), encoding="utf-8")
    _invoke("translate", "-c", run_dir / "best.pt", "-i", inp, "-o", hyp, "--beam", 2)
    out = _lines(hyp)
    assert len(out) == len(src) + 1 and out[3] == ""                          # empty line in, empty out
    hyp_test = tmp_path / "test.hyp"
    hyp_test.write_text("".join(f"{x}\n" for x in out[:3] + out[4:]), encoding="utf-8")

    sgm = corpus / "test" / "test.ref.sgm"
    scores = json.loads(_invoke("score", hyp_test, "-r", sgm, "--json"))
    assert scores["n_refs"] == 3 and scores["n_lines"] == len(src)
    # reference 1 itself (tokenized) scores 100 against the three references
    ref1 = tmp_path / "ref1.en"
    ref1.write_text("".join(f"{x}\n" for x in read_sgml(sgm)[0].segments), encoding="utf-8")
    perfect = json.loads(_invoke("score", ref1, "-r", sgm, "--hyp-tokenized", "--json"))
    assert perfect["n_refs"] == 3 and perfect["bleu_tok_lc"]["score"] == pytest.approx(100.0)
    assert 0.0 <= scores["bleu_tok_lc"]["score"] < perfect["bleu_tok_lc"]["score"]


# After the DP config is sectioned (data.prepared, train.max_epochs, model.name …) only these
# overrides need their new names.
def _dp_overrides(prep: Path, run_dir: Path) -> list[str]:
    return [f"data.prepared={prep}", f"run_dir={run_dir}"]


@pytest.fixture(scope="module")
def slice_dp_generator(slice_annotated, tmp_path_factory) -> Path:
    """The run directory of ``doctrans train pipelines/dp/tiny.yaml`` on the slice's annotation
    (one training shared by the tests below; they only read it)."""
    run_dir = tmp_path_factory.mktemp("slice_dp") / "dp_run"
    _invoke("train", REPO / "pipelines" / "dp" / "tiny.yaml", *_dp_overrides(slice_annotated, run_dir))
    return run_dir


@needs_kenlm
def test_dp_generator_trained_on_the_slice_annotation(slice_annotated, slice_dp_generator, tvsub_slice, tmp_path):
    prep, run_dir, corpus = slice_annotated, slice_dp_generator, tvsub_slice
    assert (run_dir / "best.pt").is_file()

    gen = tmp_path / "test"
    _invoke("annotate-dp", "--generator", run_dir / "best.pt", prep / "test.tok.zh",
            "--docs", prep / "test.docs", "-o", gen, "--nbest", 3)
    base = _lines(prep / "test.tok.zh")
    dp, dpp = _lines(Path(f"{gen}.dp.zh")), _lines(Path(f"{gen}.dpp.zh"))
    assert len(dp) == len(dpp) == len(base)
    for b, d, p in zip(base, dp, dpp):
        b, d, p = b.split(), d.split(), p.split()
        assert [t for t in p if t != DPP_TOKEN] == b and len(d) == len(p)
        assert {t for t, q in zip(d, p) if q == DPP_TOKEN} <= set(CHINESE_PRONOUNS)
    res = json.loads(_invoke("score", "dp", f"{gen}.dp.zh", "--base", prep / "test.tok.zh",
                             "--oracle", corpus / "test" / "test.oracle-dp.seg.zh",
                             "--oracle-base", corpus / "test" / "test.seg.zh", "--json", "--bootstrap", 0))
    assert res["lines"] == len(base) and res["oracle_dps"] == _oracle_dp_count(corpus, "test")
    assert res["sys_dps"] == sum(p.split().count(DPP_TOKEN) for p in dpp)


@needs_kenlm
def test_dp_table_discourse_columns(slice_annotated, slice_dp_generator, tvsub_slice, tmp_path):
    """``make dp-table``'s script with ``--discourse`` on tiny models: every single-input row gets
    contrastive accuracy scored on the input it translates, APT, cohesion and coherence; the
    N-best mixture rows get no contrastive figure."""
    prep, corpus = slice_annotated, tvsub_slice
    nmt, gen = tmp_path / "nmt", slice_dp_generator
    _invoke("train", REPO / "pipelines" / "transformer" / "tiny.yaml", f"data.prepared={prep}", f"run_dir={nmt}",
            "train.max_steps=4", "train.eval_every=4", "train.threads=1")
    out = _invoke("table", "dp", *["--baseline", str(nmt / "best.pt"), "--dp", str(nmt / "best.pt"), "--generator",
                    str(gen / "best.pt"), "--prepared", str(prep), "--data", str(corpus), "--out",
                    str(tmp_path / "table.md"), "--work", str(tmp_path / "work"), "--nbest", "2", "--beam", "1",
                    "--bootstrap", "10", "--discourse"])
    out = Path(out.strip().rpartition("wrote ")[2])
    rows = {r["key"]: r for r in json.loads((tmp_path / "work" / "rows.json").read_text(encoding="utf-8"))}
    for key in ("baseline", "dp_1best", "oracle_manual", "oracle_auto"):
        assert 0.0 <= rows[key]["contrastive"] <= 1.0 and 0.0 <= rows[key]["apt_pronoun"] <= 1.0, rows[key]
        assert "cohesion" in rows[key] and "coherence" in rows[key]
    assert "contrastive" not in rows["dp_2best"] and "cohesion" in rows["dp_2best"]
    items = json.loads((tmp_path / "work" / "contrastive_test" / "summary.json").read_text(encoding="utf-8"))["items"]
    assert items > 0
    text = out.read_text(encoding="utf-8")
    assert "| system | contrastive DP |" in text and "| reference 1 |" in text
