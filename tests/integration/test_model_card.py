"""Run and export directories carry a model card (issue 50 item 18): MODEL_CARD.md with what the
model is, its data, updates, dev scores, config and the commit (runtime/model_card.py)."""
from __future__ import annotations

import re

import pytest
import yaml
from click.testing import CliRunner

from conftest import train_tiny
from doctrans.cli import cli
from doctrans.runtime.checkpoint import load_checkpoint
from doctrans.runtime.model_card import CARD, render_model_card


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("card"), 20, "train.max_steps=6", "train.eval_every=3")


def test_run_directory_gets_a_model_card(trained):
    text = (trained.parent / CARD).read_text(encoding="utf-8")
    ckpt = load_checkpoint(trained)
    assert text.startswith("# Model card: transformer-tiny\n")
    assert "| what | transformer sentence-level model, " in text and "M parameters" in text
    assert "| updates | 6 updates, " in text and "stopped: max_steps 6" in text
    assert f"`{trained.parent.parent / 'prep'}` (20 sentences in train)" in text
    assert re.search(r"\| best dev \| xent_nats [\d.]+ at update \d", text)
    assert re.search(r"\| dev xent_nats \(update 6\) \| [\d.]+ \|", text)           # the last evaluation
    assert re.search(r"by doctrans at commit (\w+|unknown)", text)
    config = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(config) == ckpt["config"]                                  # the whole config


def test_card_of_a_checkpoint_with_scores_and_notes(trained):
    text = render_model_card(load_checkpoint(trained), {"test BLEU (3 refs)": 13.11, "DP recall": "33.0%"},
                             name="shipped-x", notes="Lowercase output.")
    assert text.startswith("# Model card: shipped-x")
    assert "| test BLEU (3 refs) | 13.11 |" in text and "| DP recall | 33.0% |" in text
    assert "## Notes\n\nLowercase output." in text and "| checkpoint | (in memory) |" in text


def test_export_directory_gets_a_model_card(trained, tmp_path):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "ct2"
    r = CliRunner().invoke(cli, ["export", "-c", str(trained), "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = (out / CARD).read_text(encoding="utf-8")
    assert "(CTranslate2 export)" in text.splitlines()[0] and "| updates | 6 updates" in text
    assert f"doctrans translate --engine ctranslate2 -c {out} -i INPUT -o OUTPUT" in text
