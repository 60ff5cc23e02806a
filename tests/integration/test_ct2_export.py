"""`doctrans export --format ctranslate2` and `doctrans translate --engine ctranslate2`: tiny
trained models (pre-/post-norm, tied/untied output layer, the concatenation model) converted,
their greedy outputs equal native doctrans'; files, directories and documents keep lines; the
errors for models CTranslate2 cannot run, checkpoints given to the engine, and a missing extra.
The round trips skip when ctranslate2 is not installed (CI installs the ``ct2`` extra)."""
from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from conftest import reversal_pairs, train_tiny
from doctrans.cli import cli
from doctrans.inference.translate import TranslateConfig, Translator

SRC = reversal_pairs(12, seed=3)[0]
LINES = SRC[:4] + [""] + SRC[4:8] + ["", "w1 w99 w2"] + SRC[8:]      # empty lines and an unknown word
DOC_IDS = ["a"] * 5 + ["b"] * 4 + ["c"] * (len(LINES) - 9)
CONCAT = "context={type: concat, context_sents: 2, max_context_tokens: 9}"


def _ct2():
    return pytest.importorskip("ctranslate2")


def _tr(path, engine="native", beam=1, **kw) -> Translator:
    return Translator(TranslateConfig(checkpoint=str(path), engine=engine, input_format="bpe", tokenized=True,
                                      beam=beam, **kw))


def _export(ckpt, out):
    r = CliRunner().invoke(cli, ["export", "--format", "ctranslate2", "-c", str(ckpt), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def pre_norm(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("pre"), 30, "train.max_steps=40")


@pytest.fixture(scope="module")
def concat(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("concat"), 30, "train.max_steps=40", CONCAT)


@pytest.mark.parametrize("variant", ["pre", "post_untied"])
def test_greedy_outputs_equal_native(variant, pre_norm, tmp_path):
    _ct2()
    ckpt = pre_norm if variant == "pre" else train_tiny(
        tmp_path / "t", 30, "train.max_steps=40", "model.norm=post", "model.share_dec_embeddings=false")
    out = _export(ckpt, tmp_path / "ct2")
    native = _tr(ckpt).translate(LINES)
    ct2 = _tr(out, "ctranslate2").translate(LINES)
    assert ct2 == native
    assert len(ct2) == len(LINES) and ct2[4] == "" and ct2[9] == "" and all(ct2[i] for i in (0, 1, 2, 3, 5))
    assert len(set(native)) > 3                                  # a model that reads its input, not a constant
    # beam search runs too and keeps the lines (CTranslate2's own beam; not compared token for token)
    beam = _tr(out, "ctranslate2", beam=4, compute_type="int8").translate(LINES)
    assert len(beam) == len(LINES) and beam[4] == "" and beam[0]


def test_shortlist_greedy_outputs_equal_native_shortlist(pre_norm, tmp_path):
    """``--shortlist`` on CTranslate2 (its vocabulary map, ``use_vmap``) gives native's shortlisted
    greedy outputs (the arg-max over the same candidates), only candidate words, and leaves the
    export directory as it was."""
    _ct2()
    from doctrans.inference.shortlist import VocabularyMap, write_vmap

    out = _export(pre_norm, tmp_path / "ct2")
    files = sorted(p.name for p in out.iterdir())
    prep = pre_norm.parent.parent / "prep"
    src_words = [line.split("\t")[0] for line in (prep / "vocab.zh.txt").read_text().splitlines()]
    vmap = tmp_path / "sl.vmap"
    write_vmap(VocabularyMap(["v1", "v2"], {w: [f"v{w[1:]}"] for w in src_words}), vmap)
    native = _tr(pre_norm, shortlist=str(vmap)).translate(LINES)
    ct2 = _tr(out, "ctranslate2", shortlist=str(vmap)).translate(LINES)
    assert ct2 == native and ct2[4] == "" and ct2[0]
    assert native != _tr(pre_norm).translate(LINES)                    # the shortlist restricts this model
    allowed = {f"v{w[1:]}" for line in LINES for w in line.split()} | {"v1", "v2", "<unk>"}   # one batch
    assert {w for hyp in ct2 for w in hyp.split()} <= allowed
    assert sorted(p.name for p in out.iterdir()) == files
    bad = tmp_path / "bad.vmap"
    bad.write_text("x\tq\ny\tq\n", encoding="utf-8")
    with pytest.raises(ValueError, match="another model or dataset"):
        _tr(out, "ctranslate2", shortlist=str(bad))


def test_concat_documents_equal_native(concat, tmp_path):
    _ct2()
    out = _export(concat, tmp_path / "ct2")
    native = _tr(concat).translate(LINES, doc_ids=DOC_IDS)
    ct2 = _tr(out, "ctranslate2").translate(LINES, doc_ids=DOC_IDS)
    assert ct2 == native and ct2[4] == "" and ct2[0]
    # the whole input as one document (no doc ids): the context crosses the former boundaries
    assert _tr(out, "ctranslate2").translate(LINES) == _tr(concat).translate(LINES)


@pytest.fixture(scope="module")
def tgt_concat(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("tgt"), 30, "train.max_steps=40",
                      "context={type: tgt_concat, context_sents: 2, max_target_context_tokens: 12}")


def test_target_context_documents_equal_native(tgt_concat, tmp_path):
    """The target-side concatenation model (issue 52) as CTranslate2 forced ``target_prefix``
    decoding: documents translated with the rolling history of its own translations give
    native's greedy outputs, with the prefix stripped."""
    _ct2()
    out = _export(tgt_concat, tmp_path / "ct2")
    native = _tr(tgt_concat, no_repeat_ngram_size=0).translate(LINES, doc_ids=DOC_IDS)   # (CTranslate2: no guard with a prefix)
    ct2 = _tr(out, "ctranslate2").translate(LINES, doc_ids=DOC_IDS)
    assert ct2 == native and ct2[4] == "" and ct2[0]
    assert len(set(native)) > 3


DIALOGUE = ["你今天怎么这么晚才回来？", "路上堵车了，我也没办法。", "那你为什么不打电话给我？", "手机没电了。",
            "她刚才来找过你。", "真的吗？她说了什么？", "没说什么，只是让你明天去找她。", "好吧，我明天早上就去。",
            "别忘了带上那份文件。", "放心吧，不会忘的。", "我们晚上吃什么？", "随便吧，我不太饿。"]


def test_shipped_document_model_beam_equals_native(tmp_path):
    """The shipped (exportable) document model exported and translated with beam 5 gives native's
    translations: CTranslate2 normalises a forced-prefix hypothesis by its length with the
    prefix, and ``ct2.prefix_free_best`` re-ranks its finished hypotheses as native does (a bug:
    shorter translations — here "what are we eating?" for native's "… at night?"). A real model:
    the tiny ones' beam hypotheses reach the length limit, where the engines differ by design."""
    _ct2()
    from doctrans.runtime.shipped import find

    ckpt = find("tvsub-tgt-concat-3x3").verify()        # the exportable one (not the offset default)
    out = _export(ckpt, tmp_path / "ct2")
    cfg = dict(beam=5, input_format="raw", tokenized=False)
    native = Translator(TranslateConfig(checkpoint=str(ckpt), **cfg)).translate(DIALOGUE)
    ct2 = Translator(TranslateConfig(checkpoint=str(out), engine="ctranslate2", **cfg)).translate(DIALOGUE)
    assert ct2 == native and all(native)
    assert all(line[0].isupper() for line in ct2), "the export lost the shipped model's recaser"


def test_offset_document_model_is_refused_naming_the_setting(tmp_path):
    """The default document model numbers its context from 512 (context_position_offset), which
    no engine can: export refuses it and names the setting (a bug: the message said tgt_concat
    cannot be exported and, in the same sentence, that tgt_concat can), writing nothing."""
    _ct2()
    from doctrans.runtime.shipped import find

    r = CliRunner().invoke(cli, ["export", "--format", "ctranslate2", "-c",
                                 str(find("tvsub-tgt-concat-offset-3x3").verify()), "-o", str(tmp_path / "x")])
    assert r.exit_code != 0 and "context.context_position_offset" in r.output + str(r.exception)
    assert not (tmp_path / "x").exists()


def test_engine_without_checkpoint_names_an_exportable_shipped_model(tmp_path):
    """`translate --engine ctranslate2` without -c names the export command for a shipped model
    CTranslate2 can run (a bug: it suggested exporting the default document model, whose export
    then fails on context.context_position_offset); with --sentence, the sentence model. Needs
    no ctranslate2: the hint comes before the engine."""
    src = tmp_path / "in.zh"
    src.write_text("你好。\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["translate", "--engine", "ctranslate2", "-i", str(src), "-o", str(tmp_path / "o")])
    out = r.output + str(r.exception)
    assert r.exit_code != 0 and "-c tvsub-tgt-concat-3x3 -o DIR" in out, out
    assert "the default document model, tvsub-tgt-concat-offset-3x3, cannot be exported" in out
    assert "-c tvsub-tgt-concat-offset-3x3 -o" not in out and not (tmp_path / "o").exists()
    r = CliRunner().invoke(cli, ["translate", "--engine", "ctranslate2", "--sentence", "-i", str(src)])
    out = r.output + str(r.exception)
    assert r.exit_code != 0 and "-c tvsub-transformer-3x3 -o DIR" in out and "cannot be exported" not in out, out


class _CountingTranslator:
    """A ``ctranslate2.Translator`` that counts its ``translate_batch`` calls."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def translate_batch(self, *args, **kwargs):
        self.calls += 1
        return self.inner.translate_batch(*args, **kwargs)


def test_target_context_history_pieces_equal_native(tgt_concat, tmp_path):
    """``--history-chunk`` C with CTranslate2: a document is cut into pieces of C lines, each after
    N warm-up lines, as natively (``documents.in_history_pieces``), so its 13 non-empty lines take
    C + N = 4 sequential batches, not 13; the outputs are native's with the same C (a bug: the
    engine ignored C and walked the document line by line)."""
    _ct2()
    out = _export(tgt_concat, tmp_path / "ct2")
    native = _tr(tgt_concat, history_chunk=2, no_repeat_ngram_size=0).translate(LINES)
    tr = _tr(out, "ctranslate2", history_chunk=2)
    tr.engine.translator = _CountingTranslator(tr.engine.translator)
    assert tr.translate(LINES) == native
    assert tr.engine.translator.calls == 2 + 2
    whole = _tr(out, "ctranslate2", history_chunk=0)
    whole.engine.translator = _CountingTranslator(whole.engine.translator)
    assert whole.translate(LINES) == _tr(tgt_concat, history_chunk=0, no_repeat_ngram_size=0).translate(LINES)
    assert whole.engine.translator.calls == 13


def test_target_context_warmup_beam_equals_native(tgt_concat, tmp_path):
    """``--warmup-beam`` with CTranslate2: a piece's warm-up lines are searched with that beam in
    batches of their own, as natively (``documents.translate_documents``): one more engine call
    per warm-up step, and native's translations."""
    _ct2()
    out = _export(tgt_concat, tmp_path / "ct2")
    native = _tr(tgt_concat, beam=2, history_chunk=2, warmup_beam=1, no_repeat_ngram_size=0).translate(LINES)
    tr = _tr(out, "ctranslate2", beam=2, history_chunk=2, warmup_beam=1)
    tr.engine.translator = _CountingTranslator(tr.engine.translator)
    assert tr.translate(LINES) == native
    assert tr.engine.translator.calls == 2 + 2 + 2         # the N = 2 warm-up steps searched apart


def test_warm_up_lines_are_searched_greedily_by_default(tgt_concat, monkeypatch):
    """``TranslateConfig().warmup_beam`` is 1: a piece's warm-up lines, whose translations are only
    context, are searched greedily in calls of their own unless ``--warmup-beam`` says otherwise
    (0 = the beam of the kept lines: one search per step)."""
    from doctrans.inference import documents

    beams = []
    real = documents.beam_search

    def spy(model_, batch, vocab, search, *args, **kwargs):
        beams.append(search.beam)
        return real(model_, batch, vocab, search, *args, **kwargs)

    monkeypatch.setattr(documents, "beam_search", spy)
    default = _tr(tgt_concat, beam=2, history_chunk=2).translate(LINES)
    assert 1 in beams and 2 in beams
    assert default == _tr(tgt_concat, beam=2, history_chunk=2, warmup_beam=1).translate(LINES)
    beams.clear()
    _tr(tgt_concat, beam=2, history_chunk=2, warmup_beam=0).translate(LINES)
    assert set(beams) == {2}


def test_cli_files_and_directories(concat, tmp_path):
    _ct2()
    out = _export(concat, tmp_path / "ct2")
    inp = tmp_path / "in"
    inp.mkdir()
    for name, ids in (("a", "a"), ("b", "b"), ("c", "c")):
        (inp / f"{name}.zh").write_text("".join(f"{x}\n" for x, d in zip(LINES, DOC_IDS) if d == ids), encoding="utf-8")
    (inp / "empty.zh").write_text("", encoding="utf-8")
    common = ["translate", "--input-format", "bpe", "--tokenized", "--beam", "1"]
    runner = CliRunner()
    r = runner.invoke(cli, [*common, "-c", str(out), "--engine", "ctranslate2", "-i", str(inp), "-o", str(tmp_path / "o1")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, [*common, "-c", str(concat), "-i", str(inp), "-o", str(tmp_path / "o2")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, [*common, "-c", str(out), "--engine", "ctranslate2", "-i", str(inp), "-o", str(tmp_path / "o3"),
                            "--workers", "2", "--group-lines", "4"])
    assert r.exit_code == 0, r.output
    for name in ("a", "b", "c", "empty"):
        got = (tmp_path / "o1" / f"{name}.en").read_text(encoding="utf-8")
        assert got == (tmp_path / "o2" / f"{name}.en").read_text(encoding="utf-8")
        assert got == (tmp_path / "o3" / f"{name}.en").read_text(encoding="utf-8")       # 2 worker processes
        assert got.count("\n") == (inp / f"{name}.zh").read_text(encoding="utf-8").count("\n")
    f = tmp_path / "one.bpe"
    f.write_text("".join(f"{x}\n" for x in LINES), encoding="utf-8")
    r = runner.invoke(cli, [*common, "-c", str(out), "--engine", "ctranslate2", "--compute-type", "int8_float32",
                            "-i", str(f), "-o", str(tmp_path / "one.out")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "one.out").read_text(encoding="utf-8").count("\n") == len(LINES)


def test_clear_errors(pre_norm, tmp_path):
    han = train_tiny(tmp_path / "han", 10, "train.max_steps=2",
                     "context={type: han, context_sents: 1, attach: encoder, heads: 2, d_ff: 32}")
    r = CliRunner().invoke(cli, ["export", "-c", str(han), "-o", str(tmp_path / "x")])   # with or without ctranslate2
    assert r.exit_code != 0 and "cannot express" in str(r.exception)
    assert "context.type han" in str(r.exception) and "transformer" in str(r.exception) \
        and "concat" in str(r.exception)
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="doctrans export --format ctranslate2 -c .*last.pt -o DIR"):
        _tr(pre_norm, "ctranslate2")
    with pytest.raises(ValueError, match="is a directory: give a checkpoint file"):
        _tr(pre_norm.parent)                                     # a run directory given as the checkpoint
    (tmp_path / "occupied").mkdir()
    (tmp_path / "occupied" / "keep.txt").write_text("x")
    if _installed():
        with pytest.raises(ValueError, match="not an earlier export"):
            from doctrans.inference.export import export_ctranslate2
            export_ctranslate2(str(pre_norm), str(tmp_path / "occupied"))
        out = _export(pre_norm, tmp_path / "ct2")
        with pytest.raises(ValueError, match="--engine ctranslate2"):
            _tr(out)                                             # an export given to the native engine
        with pytest.raises(ValueError, match="--nbest 3 exceeds --beam 2"):     # n-best lists: supported (issue 50)
            _tr(out, "ctranslate2", beam=2, nbest=3, nbest_out="x")
        _export(pre_norm, out)                                  # an earlier export is replaced


def test_missing_extra_is_a_clear_error(pre_norm, monkeypatch, tmp_path):
    from doctrans.inference.ct2 import MissingCTranslate2, require_ctranslate2

    monkeypatch.setitem(sys.modules, "ctranslate2", None)        # import ctranslate2 → ImportError
    with pytest.raises(MissingCTranslate2, match=r"pip install 'doctrans\[ct2\]'"):
        require_ctranslate2()
    r = CliRunner().invoke(cli, ["export", "-c", str(pre_norm), "-o", str(tmp_path / "x")])
    assert isinstance(r.exception, MissingCTranslate2) and not (tmp_path / "x").exists()
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "doctrans.json").write_text("{}")
    with pytest.raises(MissingCTranslate2):
        _tr(tmp_path / "fake", "ctranslate2")


def _installed() -> bool:
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return False
    return True


def test_export_takes_a_shipped_models_name(pre_norm, tmp_path, monkeypatch):
    """`doctrans export -c NAME` exports a shipped model, as `translate -c NAME` translates with it
    (it refused the name: "File 'NAME' does not exist"); a name that is neither says both."""
    _ct2()
    from doctrans.runtime import shipping

    root = tmp_path / "shipped"
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))
    shipping.ship(pre_norm, "tiny-sent", "sentence", "# tiny\n", "tiny", root)
    r = CliRunner().invoke(cli, ["export", "-c", "tiny-sent", "-o", str(tmp_path / "ct2")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ct2" / "model.bin").is_file()
    r = CliRunner().invoke(cli, ["export", "-c", "no-such-model", "-o", str(tmp_path / "x")])
    assert r.exit_code != 0 and "nor a shipped model" in r.output and not (tmp_path / "x").exists()
