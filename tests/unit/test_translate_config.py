"""``TranslateConfig`` by job (issue 71): four groups of settings, each field declared once, the
command-line options and the API's keywords made from them."""
from __future__ import annotations

import dataclasses

import click
import pytest

from doctrans.cli import cli
from doctrans.inference.config import FIELD_GROUP, GROUPS, SearchOptions, TranslateConfig


def test_fields_by_name_go_to_their_group():
    cfg = TranslateConfig("m.pt", beam=3, input_format="bpe", engine="ctranslate2", dp_nbest=2)
    assert (cfg.model.checkpoint, cfg.model.engine) == ("m.pt", "ctranslate2")
    assert (cfg.search.beam, cfg.io.input_format, cfg.dp.dp_nbest) == (3, "bpe", 2)
    assert cfg.search.lenpen == SearchOptions().lenpen                  # the others keep their defaults
    changed = cfg.replace(beam=4, output="o.txt")
    assert (changed.search.beam, changed.io.output, changed.io.input_format) == (4, "o.txt", "bpe")
    assert cfg.search.beam == 3 and dataclasses.replace(cfg, beam=4) == changed.replace(output="-")
    assert TranslateConfig("m.pt", search=SearchOptions(beam=2), lenpen=0.5).search == SearchOptions(beam=2, lenpen=0.5)
    with pytest.raises(TypeError, match="unknown setting.*bogus"):
        TranslateConfig("m.pt", bogus=1)
    with pytest.raises(TypeError, match="checkpoint is required"):
        TranslateConfig(beam=2)


def test_each_name_is_in_one_group():
    names = [f.name for cls in GROUPS.values() for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names)) == len(FIELD_GROUP)


@pytest.mark.parametrize("command", ["translate", "serve"])
def test_the_options_defaults_are_the_fields(command):
    """Every option of translate / serve named as a setting has the field's default (None where the
    field's default is no value the option takes: it is then left to the field)."""
    params = {p.name: p for p in cli.commands[command].params if isinstance(p, click.Option)}
    shared = set(params) & set(FIELD_GROUP)
    assert {"beam", "lenpen", "batch_sentences", "engine", "threads"} <= shared
    for name in shared:
        field = {f.name: f for f in dataclasses.fields(GROUPS[FIELD_GROUP[name]])}[name]
        default = None if field.default is dataclasses.MISSING else field.default
        assert params[name].default in (default, None), name
        assert params[name].default == default or default not in getattr(params[name].type, "choices", [default]), name
