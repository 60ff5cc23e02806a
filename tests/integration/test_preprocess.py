"""`doctrans preprocess`: readers, filtering, layout, and document structure on real TVsub."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from doctrans.cli import cli
from doctrans.data.corpus import read_doc_dir, read_lines, read_sgml_aligned, select_documents
from doctrans.data.preprocess import PreprocessConfig, tvsub_config
from doctrans.data.preprocess import prepare_dataset as run
from doctrans.data.text import TextProcessor

TVSUB = (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "tvsub").resolve()
needs_tvsub = pytest.mark.skipif(not (TVSUB / "train").is_dir(), reason=f"TVsub corpus not at {TVSUB}")
SPLIT_FILES = ("tok.zh", "tok.en", "bpe.zh", "bpe.en", "docs")


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")


def _docs(path: Path) -> list[tuple[str, int]]:
    return [(d, int(p)) for d, p in (line.split("\t") for line in read_lines(path))]


# --- readers --------------------------------------------------------------------------------


@pytest.mark.parametrize("sel, expected", [
    ("0:3", ["0", "2", "10"]), ("2", ["0", "2"]), ("all", ["0", "2", "10", "11"]),
    ("1:", ["2", "10", "11"]), ("::2", ["0", "10"]), (3, ["0", "2", "10"]),
])
def test_select_documents(sel, expected):
    assert select_documents(["0", "2", "10", "11"], sel) == expected


@pytest.mark.parametrize("sel", ["x", "1:2:3:4", "5:5"])
def test_select_documents_rejects(sel):
    with pytest.raises(ValueError, match="selection"):
        select_documents(["0", "1"], sel)


def test_doc_dir_numeric_order_and_mismatch(tmp_path):
    for n in (10, 2):
        _write(tmp_path / f"{n}.zh", [f"z{n}a", f"z{n}b"])
        _write(tmp_path / f"{n}.en", [f"e{n}a", f"e{n}b"])
    _write(tmp_path / "2.np.tk.zh", ["ignored"])           # public clone keeps such files too
    got = [(s.doc_id, s.position, s.src) for s in read_doc_dir(tmp_path, docs="all")]
    assert got == [("2", 0, "z2a"), ("2", 1, "z2b"), ("10", 0, "z10a"), ("10", 1, "z10b")]
    _write(tmp_path / "10.en", ["only one line"])
    with pytest.raises(ValueError, match=r"10\.zh has 2 lines but .*10\.en has 1"):
        list(read_doc_dir(tmp_path, docs="all"))


@needs_tvsub
def test_sgml_aligned_mismatch_names_both_files(tmp_path):
    _write(tmp_path / "dev.zh", ["一", "二"])
    _write(tmp_path / "dev.en", ["one", "two"])
    sgm = TVSUB / "dev" / "dev.ref.sgm"
    with pytest.raises(ValueError, match=r"dev\.zh has 2 lines but .*dev\.ref\.sgm has 1086 segments"):
        list(read_sgml_aligned(tmp_path / "dev", sgm))


# --- filtering, empty lines, atomic meta (tiny hand-made corpus) ------------------------------


@pytest.fixture
def toy_corpus(tmp_path: Path) -> dict:
    long_zh, long_en = " ".join(["字"] * 9), " ".join(["word"] * 9)
    _write(tmp_path / "train" / "0.zh", ["你好", "", long_zh, "是", "谢谢 你"])
    _write(tmp_path / "train" / "0.en", ["hello .", "empty source", long_en, "yes it is so true", "thank you ."])
    _write(tmp_path / "train" / "1.zh", ["再见"])
    _write(tmp_path / "train" / "1.en", ["bye ."])
    dev_zh, dev_en = ["你好", "", long_zh, "是"], ["hello .", "", long_en, "yes it is so true"]
    _write(tmp_path / "dev" / "dev.zh", dev_zh)
    _write(tmp_path / "dev" / "dev.en", dev_en)
    segs = "".join(f"<seg id={i}>{e}</seg>\n" for i, e in enumerate(dev_en, 1))
    (tmp_path / "dev" / "dev.sgm").write_text(
        f'<refset>\n<DOC docid="A" sysid="r">\n{segs}</DOC>\n</refset>\n', encoding="utf-8")
    return dict(train_dir=str(tmp_path / "train"), train_docs="all", dev_prefix=str(tmp_path / "dev" / "dev"),
                dev_sgm=str(tmp_path / "dev" / "dev.sgm"), bpe_merges=5, max_len=8, max_len_ratio=3.0)


def test_filter_applies_to_train_only(tmp_path, toy_corpus):
    out = run(PreprocessConfig(out=str(tmp_path / "prep"), workers=1, **toy_corpus))
    # train: every sentence stays; empty source, 9-token pair (> max_len 8) and 1:5 ratio are
    # marked 0 in train.target (context only), the empty side stays an empty line
    assert _docs(out / "train.docs") == [("0", 0), ("0", 1), ("0", 2), ("0", 3), ("0", 4), ("1", 0)]
    assert read_lines(out / "train.target") == ["1", "0", "0", "0", "1", "1"]
    assert read_lines(out / "train.tok.en")[::4] == ["hello .", "thank you ."]
    assert read_lines(out / "train.tok.zh")[1] == "" == read_lines(out / "train.bpe.zh")[1]
    assert len(read_lines(out / "train.bpe.zh")[2].split()) >= 9
    # vocabularies count the target lines only
    vocab_en = dict(line.split("\t") for line in read_lines(out / "vocab.en.txt"))
    assert "word" not in vocab_en and "empty" not in vocab_en and vocab_en["."] == "3"
    # dev: nothing dropped, the empty line stays empty on both sides; no dev.target
    assert _docs(out / "dev.docs") == [("A", i) for i in range(4)] and not (out / "dev.target").exists()
    assert read_lines(out / "dev.tok.zh")[1] == "" and read_lines(out / "dev.bpe.en")[1] == ""
    assert len(read_lines(out / "dev.bpe.zh")[2].split()) >= 9
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["version"] == 2
    assert meta["filter"]["removed_by_reason"] == {"empty": 1, "too_long": 1, "ratio": 1}
    assert (meta["filter"]["kept"], meta["filter"]["removed"]) == (3, 3)
    assert meta["splits"]["train"] | {"source": ""} == {
        "sentences": 6, "documents": 2, "documents_selected": 2, "targets": 3, "filtered": 3, "source": "",
        "held_out_documents": 0}
    assert meta["splits"]["dev"]["sentences"] == 4 and "test" not in meta["splits"]


def test_held_out_documents_never_reach_train(tmp_path, toy_corpus):
    out = run(PreprocessConfig(out=str(tmp_path / "prep"), workers=1, held_out=("0",), **toy_corpus))
    assert _docs(out / "train.docs") == [("1", 0)] and read_lines(out / "train.tok.en") == ["bye ."]
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["splits"]["train"]["held_out_documents"] == 1 and meta["config"]["held_out"] == ["0"]
    assert "less 1 held-out" in meta["splits"]["train"]["source"]
    with pytest.raises(ValueError, match="no training documents left"):
        run(PreprocessConfig(out=str(tmp_path / "none"), workers=1, held_out=("0", "1"), **toy_corpus))


@pytest.mark.skipif(not TVSUB.is_dir(), reason="needs the TVsub corpus")
def test_tvsub_held_out_list():
    from doctrans.data.corpus import list_documents
    from doctrans.data.heldout import TVSUB_HELD_OUT

    # every 30th episode from sorted position 300: the quickstart slice 0:300 keeps all its episodes
    ids = list_documents(TVSUB / "train", "zh", "en")
    assert TVSUB_HELD_OUT == tuple(ids[300::30]) and len(TVSUB_HELD_OUT) == 89
    assert not set(ids[:300]) & set(TVSUB_HELD_OUT)
    assert tvsub_config(TVSUB, "o").held_out == TVSUB_HELD_OUT
    assert tvsub_config(TVSUB, "o", held_out=()).held_out == ()


def test_parallel_equals_sequential(tmp_path, toy_corpus):
    seq = run(PreprocessConfig(out=str(tmp_path / "seq"), workers=1, **toy_corpus))
    par = run(PreprocessConfig(out=str(tmp_path / "par"), workers=2, chunk_lines=2, **toy_corpus))
    for f in sorted(p.name for p in seq.iterdir() if p.name != "meta.json"):
        assert (seq / f).read_bytes() == (par / f).read_bytes(), f
    assert not [p for p in par.iterdir() if ".tmp" in p.name]


def test_recaser_is_learnt_from_the_cased_targets_and_changes_no_prepared_line(tmp_path, toy_corpus):
    """The train targets are tokenized cased (for the recaser) and lowercased afterwards: every
    prepared file is byte-identical to a run without a recaser, which tokenizes them lowercased."""
    _write(Path(toy_corpus["train_dir"]) / "1.en", ["so I saw Ross .", "and I met Ross ."])
    _write(Path(toy_corpus["train_dir"]) / "1.zh", ["我 看见 罗斯", "我 见 罗斯"])
    cased = run(PreprocessConfig(out=str(tmp_path / "cased"), workers=1, **toy_corpus))
    plain = run(PreprocessConfig(out=str(tmp_path / "plain"), workers=1, recaser_min_count=0, **toy_corpus))
    assert {p.name for p in cased.iterdir()} == {p.name for p in plain.iterdir()} | {"recaser.en.json"}
    for f in sorted(p.name for p in plain.iterdir() if p.name != "meta.json"):
        assert (cased / f).read_bytes() == (plain / f).read_bytes(), f
    assert "so i saw ross ." in (cased / "train.tok.en").read_text(encoding="utf-8")
    table = json.loads((cased / "recaser.en.json").read_text(encoding="utf-8"))
    assert table["best"] == {"i": "I", "ross": "Ross"} and table["lines"] == 7
    proc = TextProcessor.from_prepared(cased, "en")
    assert proc.recase(["i saw ross ."]) == ["I saw Ross ."] and proc.settings()["recaser"] == table
    assert TextProcessor.from_prepared(cased, "zh").recaser is None
    kept = run(PreprocessConfig(out=str(tmp_path / "kept"), workers=1, lowercase=False, **toy_corpus))
    assert not (kept / "recaser.en.json").exists()


def test_a_failed_rerun_keeps_the_finished_dataset(tmp_path, toy_corpus):
    """Issue 50 item 6: the new dataset is built beside the old one and moved in when complete,
    so a failed (or killed) rerun leaves the finished dataset as it was, and no staging files."""
    out = run(PreprocessConfig(out=str(tmp_path / "prep"), workers=1, **toy_corpus))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "meta.json" in before
    _write(Path(toy_corpus["train_dir"]) / "1.en", ["bye .", "extra line"])
    with pytest.raises(ValueError, match="1.zh has 1 lines"):
        run(PreprocessConfig(out=str(out), workers=1, **toy_corpus))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev", "prep", "train"]
    stale = tmp_path / ".prep.999999999.abcdefgh.tmp"             # a killed run's staging directory
    stale.mkdir()
    (stale / "train.bpe.zh").write_text("x\n", encoding="utf-8")
    _write(Path(toy_corpus["train_dir"]) / "1.en", ["bye ."])
    run(PreprocessConfig(out=str(out), workers=1, **toy_corpus))
    assert not stale.exists() and (out / "meta.json").is_file()


def test_config_validation_and_missing_tvsub(tmp_path):
    with pytest.raises(ValueError, match="dev_prefix and dev_sgm"):
        PreprocessConfig(out="o", train_dir="t", dev_prefix="x")
    with pytest.raises(ValueError, match="unknown preprocess config keys: bogus"):
        PreprocessConfig.from_dict({"out": "o", "train_dir": "t", "bogus": 1})
    with pytest.raises(FileNotFoundError, match="git clone https://github.com/longyuewangdcu/tvsub"):
        tvsub_config(tmp_path / "absent", tmp_path / "out")


def test_cli_help_and_explicit_paths(tmp_path, toy_corpus):
    res = CliRunner().invoke(cli, ["preprocess", "--help"])
    assert res.exit_code == 0 and "meta.json" in res.output and "{split}.docs" in res.output
    args = ["preprocess", "--train-dir", toy_corpus["train_dir"], "--train-docs", "1", "-o", str(tmp_path / "p"),
            "--bpe-merges", "5", "--keep-case", "--workers", "1"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "p" / "meta.json").read_text(encoding="utf-8"))
    assert meta["lowercase"] is False and set(meta["splits"]) == {"train"}
    assert meta["splits"]["train"]["documents"] == 1


# --- real TVsub: document boundaries survive every step ----------------------------------------


@pytest.fixture(scope="module")
def tvsub_prepared(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tvsub") / "prep"
    return run(tvsub_config(TVSUB, out, train_docs="0:3", bpe_merges=200, workers=2, test_prefix=None,
                            test_sgm=None))


@needs_tvsub
def test_tvsub_layout_and_alignment(tvsub_prepared):
    out = tvsub_prepared
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert (meta["version"], meta["src"], meta["tgt"], meta["lowercase"]) == (2, "zh", "en", True)
    assert meta["bpe"]["merges"] == 200 and meta["bpe"]["joint"] is False
    for name in ("bpe.codes.zh", "bpe.codes.en", "vocab.zh.txt", "vocab.en.txt"):
        assert (out / name).is_file()
    for split in ("train", "dev"):
        files = SPLIT_FILES + (("target",) if split == "train" else ())
        counts = {f: len(read_lines(out / f"{split}.{f}")) for f in files}
        assert set(counts.values()) == {meta["splits"][split]["sentences"]}, counts
        for lang in ("zh", "en"):
            tok, bpe = read_lines(out / f"{split}.tok.{lang}"), read_lines(out / f"{split}.bpe.{lang}")
            assert [TextProcessor.merge_bpe(b) for b in bpe] == tok
    vocab = [line.split("\t") for line in read_lines(out / "vocab.en.txt")]
    counts = [int(c) for _, c in vocab]
    assert counts == sorted(counts, reverse=True) and not {"<pad>", "<s>", "</s>", "<unk>"} & {t for t, _ in vocab}
    targets = [t == "1" for t in read_lines(out / "train.target")]
    assert sum(counts) == sum(len(line.split()) for line, t in zip(read_lines(out / "train.bpe.en"), targets) if t)


@needs_tvsub
def test_tvsub_train_documents_keep_order_and_positions(tvsub_prepared):
    """Line k of train.tok.* / train.docs is sentence p of raw document d: no shift anywhere,
    also right after a filtered sentence (kept as a context-only line, 0 in train.target)."""
    out = tvsub_prepared
    docs = _docs(out / "train.docs")
    tok = {lang: read_lines(out / f"train.tok.{lang}") for lang in ("zh", "en")}
    target = read_lines(out / "train.target")
    procs = {lang: TextProcessor(lang, lowercase=True) for lang in ("zh", "en")}
    expected, raw_docs = [], {}
    for doc in ("0", "1", "2"):
        raw_docs[doc] = {lang: read_lines(TVSUB / "train" / f"{doc}.{lang}") for lang in ("zh", "en")}
        expected += [(doc, p) for p in range(len(raw_docs[doc]["zh"]))]
    assert docs == expected and len(docs) == 947 + 994 + 1155        # every sentence, in order
    for lang in ("zh", "en"):
        raw = [raw_docs[d][lang][p] for d, p in docs]
        assert tok[lang] == procs[lang].tokenize(raw)
    filtered = [k for k, t in enumerate(target) if t == "0"]
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert len(filtered) == meta["splits"]["train"]["filtered"] > 0
    for k in filtered[:20]:                    # the neighbours of a filtered line are true neighbours
        d, p = docs[k]
        for j in (k - 1, k, k + 1):
            if 0 <= j < len(docs) and docs[j][0] == d:
                assert docs[j] == (d, p + j - k)
                assert tok["zh"][j] == procs["zh"].tokenize([raw_docs[d]["zh"][p + j - k]])[0]


@needs_tvsub
def test_tvsub_dev_documents_match_sgml(tvsub_prepared):
    docs = _docs(tvsub_prepared / "dev.docs")
    assert docs == [("SUB01", i) for i in range(319)] + [("SUB02", i) for i in range(767)]
    tok_en = read_lines(tvsub_prepared / "dev.tok.en")
    assert tok_en[8].startswith("don 't you give me")      # unescaped, not re-split
    assert all(line for line in read_lines(tvsub_prepared / "dev.tok.zh"))


@needs_tvsub
def test_tvsub_doc_data_targets_are_the_sentence_level_pairs(tvsub_prepared):
    """DocData of the prepared train split: documents and positions as in train.docs, and its
    target rows are exactly load_parallel's pairs (context-only rows between them)."""
    from doctrans.data.batching import load_parallel
    from doctrans.data.documents import load_doc_split
    from doctrans.data.vocab import Vocab

    out = tvsub_prepared
    sv, tv = Vocab.from_counts_file(out / "vocab.zh.txt"), Vocab.from_counts_file(out / "vocab.en.txt")
    data = load_doc_split(out, "train", sv, tv, max_len=80)
    pairs, _ = load_parallel(out / "train.bpe.zh", out / "train.bpe.en", sv, tv, 80, out / "train.target")
    assert data.doc_ids == ["0", "1", "2"] and list(data.doc_start) == [0, 947, 947 + 994, 947 + 994 + 1155]
    assert list(data.pos[:947]) == list(range(947))
    assert list(data.line[data.is_target]) == list(pairs.line) and 0 < len(pairs) < len(data)
    assert all((data.src[i] == s).all() and (data.tgt[i] == t).all() for i, s, t in zip(pairs.line, pairs.src, pairs.tgt))
