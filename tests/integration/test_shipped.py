"""Shipped models (runtime/shipped.py): a training checkpoint made shippable (fp16, no optimizer),
registered, found by name and kind, verified by checksum, and translating like the original; and
every model actually shipped with the package translates and is the file its card describes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import train_tiny
from doctrans.runtime import shipped, shipping
from doctrans.runtime.checkpoint_digest import with_digest
from doctrans.runtime.shipped import ShippedModel


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("ship"), 24, "train.max_steps=6")


def _ship(root: Path, ckpt: Path, name: str, kind: str) -> ShippedModel:
    info = shipping.make_shippable(ckpt, root / f"{name}.pt")
    (root / f"{name}.md").write_text(f"# {name}\n", encoding="utf-8")
    model = ShippedModel(name, kind, f"{name}.pt", info["sha256"], info["bytes"], f"{name}.md", "tiny", str(root))
    shipped.register(root, model)
    return model


def test_make_shippable_halves_the_weights_and_drops_the_optimizer(tmp_path, tiny_checkpoint):
    info = shipping.make_shippable(tiny_checkpoint, tmp_path / "m.pt")
    orig = torch.load(tiny_checkpoint, weights_only=True)
    ship = torch.load(tmp_path / "m.pt", weights_only=True)
    assert "optimizer" in orig and "optimizer" not in ship and "rng" not in ship
    assert ship["text"] == orig["text"] and ship["vocab"] == orig["vocab"] and ship["config"] == orig["config"]
    for k, v in orig["model"].items():
        if v.is_floating_point():
            assert ship["model"][k].dtype == torch.float16 and torch.equal(ship["model"][k], v.half())
    assert info["bytes"] == (tmp_path / "m.pt").stat().st_size < tiny_checkpoint.stat().st_size / 4
    assert info["sha256"] == shipped.sha256_of(tmp_path / "m.pt")


def test_make_shippable_keeps_tied_weights_shared(tmp_path, tiny_checkpoint):
    """Tied tensors (the decoder's embedding and output projection) are one storage in the
    checkpoint; halving each key on its own wrote them twice (a 6+2 d256 model: 33 MB, not 27)."""
    orig = torch.load(tiny_checkpoint, weights_only=True)["model"]
    tied = [k for k, v in orig.items() for k2, v2 in orig.items()
            if k < k2 and v.untyped_storage().data_ptr() == v2.untyped_storage().data_ptr()]
    assert tied, "the tiny model ties no weights: the test would not test anything"
    info = shipping.make_shippable(tiny_checkpoint, tmp_path / "m.pt")
    ship = torch.load(tmp_path / "m.pt", weights_only=True)["model"]
    ptrs = {v.untyped_storage().data_ptr() for v in ship.values()}
    assert len(ptrs) == len({v.untyped_storage().data_ptr() for v in orig.values()})
    unique = {v.untyped_storage().data_ptr(): v.numel() for v in orig.values() if v.is_floating_point()}
    assert info["params"] == sum(unique.values())


def test_shipped_checkpoint_translates_like_its_fp16_weights(tmp_path, tiny_checkpoint):
    from doctrans.api import Translator

    shipping.make_shippable(tiny_checkpoint, tmp_path / "m.pt")
    lines = ["w1 w2 w3", "", "w4 w5"]
    out = Translator.load(str(tmp_path / "m.pt")).translate_sentences(lines)
    assert len(out) == 3 and out[1] == "" and all(out[i] for i in (0, 2))
    ckpt = torch.load(tiny_checkpoint, weights_only=True)     # the original rounded to fp16 = what shipped
    ckpt["model"] = {k: (v.half().float() if v.is_floating_point() else v) for k, v in ckpt["model"].items()}
    torch.save(with_digest(ckpt), tmp_path / "rounded.pt")
    assert Translator.load(str(tmp_path / "rounded.pt")).translate_sentences(lines) == out


def test_registry_find_default_resolve_and_verify(tmp_path, tiny_checkpoint, monkeypatch):
    root = tmp_path / "shipped"
    root.mkdir()
    assert shipped.shipped_models(root) == []
    with pytest.raises(ValueError, match="no document model is shipped.*-c"):
        shipped.default_model("document", root)
    sent = _ship(root, tiny_checkpoint, "tiny-sentence", "sentence")
    doc = _ship(root, tiny_checkpoint, "tiny-document", "document")
    assert [m.name for m in shipped.shipped_models(root)] == ["tiny-sentence", "tiny-document"]
    assert shipped.default_model("document", root) == doc and shipped.default_model("sentence", root) == sent
    assert shipped.resolve(None, "sentence", root) == str(sent.path)
    assert shipped.resolve("tiny-document", "sentence", root) == str(doc.path)
    assert shipped.resolve(str(tiny_checkpoint), "document", root) == str(tiny_checkpoint)
    with pytest.raises(ValueError, match="no shipped model named 'nope'.*tiny-sentence, tiny-document"):
        shipped.find("nope", root)
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))     # the default directory is replaceable
    assert shipped.shipped_models() == shipped.shipped_models(root)
    _ship(root, tiny_checkpoint, "tiny-sentence", "sentence")  # re-registering keeps its place
    assert [m.name for m in shipped.shipped_models(root)] == ["tiny-sentence", "tiny-document"]
    with open(doc.path, "r+b") as f:                          # another file than the card describes
        f.seek(100)
        f.write(b"\x00\x01")
    with pytest.raises(ValueError, match="tiny-document.*SHA-256.*different or damaged"):
        shipped.resolve(None, "document", root)
    (root / "index.json").write_text(json.dumps({"models": [{"name": "x"}]}), encoding="utf-8")
    with pytest.raises(ValueError, match="index.json: not a valid index"):
        shipped.shipped_models(root)


@pytest.mark.parametrize("model", shipped.shipped_models(shipped.SHIPPED_DIR), ids=lambda m: m.name)
def test_each_shipped_model_is_its_card_and_translates(model: ShippedModel):
    from doctrans.api import Translator

    path = model.verify()
    card = model.card_path.read_text(encoding="utf-8")
    assert model.sha256 in card, f"{model.card_path} does not name the file's SHA-256"
    out = Translator.load(str(path)).translate_sentences(["谢谢。", "", "他来了。"])
    assert len(out) == 3 and out[1] == "" and out[0] and out[2]
    assert out[0][0].isupper() and out[2][0].isupper(), f"{model.name} writes lowercase: no recaser ({out})"


def test_models_command_lists_and_shows(tmp_path, tiny_checkpoint, monkeypatch):
    from click.testing import CliRunner

    from doctrans.cli import cli

    root = tmp_path / "shipped"
    root.mkdir()
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))
    res = CliRunner().invoke(cli, ["models"])
    assert res.exit_code == 0 and "no models are shipped" in res.output
    _ship(root, tiny_checkpoint, "tiny-document", "document")
    _ship(root, tiny_checkpoint, "tiny-document-2", "document")
    res = CliRunner().invoke(cli, ["models"])
    lines = res.output.splitlines()
    assert res.exit_code == 0 and len(lines) == 2
    assert "document (default)" in lines[0] and "(default)" not in lines[1] and "MiB" in lines[0]
    res = CliRunner().invoke(cli, ["models", "show", "tiny-document"])
    assert res.exit_code == 0 and res.output.startswith("# tiny-document") and "SHA-256" in res.output
    res = CliRunner().invoke(cli, ["models", "show", "nope"])
    assert res.exit_code != 0 and "no shipped model named 'nope'" in str(res.exception)


def test_translate_without_checkpoint_uses_the_shipped_model(tmp_path, tiny_checkpoint, monkeypatch):
    from click.testing import CliRunner

    from doctrans.cli import cli

    root = tmp_path / "shipped"
    root.mkdir()
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 w3\nw4 w5\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["translate", "-i", str(src), "-o", str(tmp_path / "a.txt")])
    assert res.exit_code != 0 and "no document model is shipped" in str(res.exception)
    _ship(root, tiny_checkpoint, "tiny-sentence", "sentence")
    res = CliRunner().invoke(cli, ["translate", "--sentence", "-i", str(src), "-o", str(tmp_path / "a.txt")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["translate", "-c", "tiny-sentence", "-i", str(src), "-o", str(tmp_path / "b.txt")])
    assert res.exit_code == 0, res.output
    a = (tmp_path / "a.txt").read_text(encoding="utf-8")
    assert a == (tmp_path / "b.txt").read_text(encoding="utf-8") and len(a.splitlines()) == 2
    res = CliRunner().invoke(cli, ["translate", "--sentence", "-c", "tiny-sentence", "-i", str(src)])
    assert res.exit_code != 0 and "without -c" in res.output


def test_models_add_ships_with_card_checksum_and_refuses_replacing_unasked(tmp_path, tiny_checkpoint, monkeypatch):
    from click.testing import CliRunner

    from doctrans.cli import cli

    root = tmp_path / "shipped"
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))
    card = tmp_path / "card.md"
    card.write_text("# tiny\n\nTrained 6 updates.\n", encoding="utf-8")
    args = ["models", "add", str(tiny_checkpoint), "--name", "tiny-doc", "--kind", "document",
            "--card", str(card), "--summary", "a tiny model"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    (model,) = shipped.shipped_models(root)
    assert model.name == "tiny-doc" and model.kind == "document" and model.summary == "a tiny model"
    text = model.card_path.read_text(encoding="utf-8")
    assert text.startswith("# tiny") and model.sha256 in text and model.verify() == model.path
    before = model.path.read_bytes()
    res = CliRunner().invoke(cli, args)                           # again: refused, the file untouched
    assert res.exit_code != 0 and "already shipped" in res.output and "--replace" in res.output
    assert model.path.read_bytes() == before
    res = CliRunner().invoke(cli, args + ["--replace"])
    assert res.exit_code == 0 and len(shipped.shipped_models(root)) == 1
    res = CliRunner().invoke(cli, ["models", "add", str(tiny_checkpoint), "--name", "../x", "--kind", "sentence",
                                   "--card", str(card), "--summary", "s"])
    assert res.exit_code != 0 and "model name" in res.output


# --- recasing (data/casing.py): from the checkpoint's text settings or the shipped index ---------

TABLE = {"version": 1, "lang": "en", "lines": 0, "min_count": 1, "best": {f"v{i}": f"V{i}" for i in range(0, 30, 2)}}


def _expected_recased(line: str) -> str:
    words = [TABLE["best"].get(w, w) for w in line.split()]
    return " ".join([words[0][:1].upper() + words[0][1:], *words[1:]]) if words else ""


def test_a_recaser_in_the_checkpoint_restores_case_of_detokenized_output(tmp_path, tiny_checkpoint):
    from doctrans.api import Translator

    ckpt = torch.load(tiny_checkpoint, weights_only=True)
    assert "recaser" not in ckpt["text"]["tgt"]
    ckpt["text"]["tgt"]["recaser"] = TABLE
    torch.save(with_digest(ckpt), tmp_path / "cased.pt")
    lines = ["w1 w2 w3", "", "w4 w5 w6 w8"]
    lower = Translator.load(str(tiny_checkpoint)).translate_sentences(lines)
    assert all(x == x.lower() for x in lower) and lower[0]
    cased = Translator.load(str(tmp_path / "cased.pt")).translate_sentences(lines)
    assert cased == [_expected_recased(x) for x in lower] and cased != lower
    assert Translator.load(str(tmp_path / "cased.pt"), recase="no").translate_sentences(lines) == lower
    assert Translator.load(str(tmp_path / "cased.pt"), tokenized=True).translate_sentences(lines) == lower
    assert Translator.load(str(tmp_path / "cased.pt"), tokenized=True, recase="yes").translate_sentences(lines) == cased
    with pytest.raises(ValueError, match="--recase yes: .* carries no recaser"):
        Translator.load(str(tiny_checkpoint), recase="yes")
    with pytest.raises(ValueError, match="recase must be one of auto, yes, no"):
        Translator.load(str(tmp_path / "cased.pt"), recase="maybe")


def test_a_shipped_checkpoint_without_one_gets_the_recaser_its_index_names(tmp_path, tiny_checkpoint, monkeypatch):
    from click.testing import CliRunner

    from doctrans.api import Translator
    from doctrans.cli import cli

    root = tmp_path / "shipped"
    root.mkdir()
    model = _ship(root, tiny_checkpoint, "tiny-sentence", "sentence")
    lines = ["w1 w2 w3", "w4 w5 w6 w8"]
    lower = Translator.load(str(model.path)).translate_sentences(lines)
    (root / "tiny.recaser.json").write_text(json.dumps(TABLE), encoding="utf-8")
    shipped.register(root, ShippedModel(**{**model.__dict__, "recaser": "tiny.recaser.json"}))
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))
    assert shipped.recaser_for(model.path).best == TABLE["best"] and shipped.recaser_for(tiny_checkpoint) is None
    assert Translator.load(str(model.path)).translate_sentences(lines) == [_expected_recased(x) for x in lower]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for flags, want in (([], [_expected_recased(x) for x in lower]), (["--recase", "no"], lower)):
        res = CliRunner().invoke(cli, ["translate", "--sentence", "-i", str(src), "-o", str(tmp_path / "o.txt"), *flags])
        assert res.exit_code == 0, res.output
        assert (tmp_path / "o.txt").read_text(encoding="utf-8").splitlines() == want
    # models add --recaser puts the table inside the shipped file (no index entry needed)
    card = tmp_path / "card.md"
    card.write_text("# tiny\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["models", "add", str(tiny_checkpoint), "--name", "tiny-cased", "--kind", "sentence",
                                   "--card", str(card), "--summary", "s", "--recaser", str(root / "tiny.recaser.json")])
    assert res.exit_code == 0, res.output
    inside = torch.load(root / "tiny-cased.pt", weights_only=True)["text"]["tgt"]["recaser"]
    assert inside["best"] == TABLE["best"] and shipped.find("tiny-cased").recaser == ""
    assert Translator.load(str(root / "tiny-cased.pt")).translate_sentences(lines) == [_expected_recased(x) for x in lower]


def test_a_copy_of_a_shipped_model_keeps_the_recaser_of_its_index_entry(tmp_path):
    """A shipped model copied elsewhere (verified by its SHA-256 at load, issue 73) lost the
    recaser its index entry names: its output came out lowercase ("hey, ross, thank you.")."""
    import shutil

    from doctrans.api import Translator

    model = shipped.find("tvsub-transformer-3x3")
    copy = tmp_path / "elsewhere" / "my-model.pt"
    copy.parent.mkdir()
    shutil.copyfile(model.path, copy)
    assert shipped.recaser_for(copy).best == shipped.recaser_for(model.path).best
    line = ["罗斯，谢谢"]
    assert Translator.load(str(copy), threads=1).translate_sentences(line) == \
        Translator.load(model.name, threads=1).translate_sentences(line)
    assert "Ross" in Translator.load(str(copy), threads=1).translate_sentences(line)[0]


def test_shipping_a_lowercasing_checkpoint_without_a_recaser_warns(tmp_path, tiny_checkpoint, caplog):
    assert torch.load(tiny_checkpoint, weights_only=True)["text"]["tgt"]["lowercase"]
    with caplog.at_level("WARNING", logger="doctrans.runtime.shipping"):
        shipping.make_shippable(tiny_checkpoint, tmp_path / "a.pt")
    assert "carries no recaser" in caplog.text
    caplog.clear()
    (tmp_path / "t.json").write_text(json.dumps(TABLE), encoding="utf-8")
    with caplog.at_level("WARNING", logger="doctrans.runtime.shipping"):
        shipping.make_shippable(tiny_checkpoint, tmp_path / "b.pt", recaser=tmp_path / "t.json")
    assert "carries no recaser" not in caplog.text


def test_api_load_and_serve_take_a_shipped_models_name_and_default(tmp_path, tiny_checkpoint, monkeypatch):
    """``Translator.load(NAME)`` loads the shipped model NAME as ``from_pretrained`` and
    ``translate -c NAME`` do (it said "model not found"); ``doctrans serve`` without -c serves the
    shipped document model, ``--sentence`` the sentence model, ``-c NAME`` a shipped one, as
    ``translate`` does (it required -c)."""
    from click.testing import CliRunner

    from doctrans.api import Translator
    from doctrans.cli import cli
    from doctrans.serve import run as serve_run

    root = tmp_path / "shipped"
    root.mkdir()
    sent = _ship(root, tiny_checkpoint, "tiny-sentence", "sentence")
    doc = _ship(root, tiny_checkpoint, "tiny-document", "document")
    monkeypatch.setenv("DOCTRANS_SHIPPED_DIR", str(root))
    lines = ["w1 w2 w3", "w4 w5"]
    by_name = Translator.load("tiny-sentence", input_format="bpe")
    assert by_name.config.model.checkpoint == str(sent.path)
    assert by_name.translate_sentences(lines) == Translator.load(sent.path, input_format="bpe").translate_sentences(lines)
    served = []
    monkeypatch.setattr(serve_run, "serve", lambda tr, *a, name="", **kw: served.append(name))
    for flags, want in (([], doc.path), (["--sentence"], sent.path), (["-c", "tiny-sentence"], sent.path)):
        res = CliRunner().invoke(cli, ["serve", *flags, "--threads", "1", "--extra-model", "none"])
        assert res.exit_code == 0, res.output
        assert served[-1] == str(want)
    res = CliRunner().invoke(cli, ["serve", "--sentence", "-c", "tiny-sentence"])
    assert res.exit_code == 2 and "without -c" in res.output


def test_the_shipped_index_is_read_once(tmp_path, tiny_checkpoint, monkeypatch):
    """Resolving a shipped name, finding its recaser and listing the models read ``index.json``
    once (it was parsed by ``resolve``, again by ``find`` and again by ``recaser_for``); an index
    replaced by ``register`` is read again."""
    root = tmp_path / "shipped"
    root.mkdir()
    model = _ship(root, tiny_checkpoint, "tiny-sentence", "sentence")
    reads = []
    real = shipped._read_index
    monkeypatch.setattr(shipped, "_read_index", lambda *a: reads.append(1) or real(*a))
    assert shipped.resolve("tiny-sentence", root=root) == str(model.path)
    assert shipped.recaser_for(model.path, root=root) is None and shipped.find("tiny-sentence", root).kind == "sentence"
    assert len(reads) == 1
    shipped.register(root, ShippedModel(**{**model.__dict__, "summary": "changed"}))
    assert shipped.find("tiny-sentence", root).summary == "changed" and len(reads) == 2
