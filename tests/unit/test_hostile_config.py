"""Hostile configs (issue 50, item 7): a YAML alias bomb ("billion laughs") in a string or a
numeric key, a huge file, a recursive alias are refused at once with a one-line error; every
CLI error message is one line of bounded length."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from doctrans.config import ConfigError, load_experiment

LAUGHS = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + \
    [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]


@pytest.mark.parametrize("key", ["name.", "train.lr", "data.prepared"])
def test_an_alias_bomb_is_refused_at_once(tmp_path, key):
    path = tmp_path / "bomb.yaml"
    field = key.split(".")
    tail = f"{field[0]}: *i\n" if not field[1] else f"{field[0]}:\n  {field[1]}: *i\n"
    path.write_text("\n".join(LAUGHS) + "\n" + tail, encoding="utf-8")
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"{path}: YAML aliases expand this config beyond") as e:
        load_experiment(path)
    assert time.perf_counter() - t0 < 5           # a bound, not a timing: the bomb took minutes and GBs
    assert len(str(e.value)) < 300 and "\n" not in str(e.value)


def test_a_recursive_alias_and_a_huge_file_are_refused(tmp_path):
    rec = tmp_path / "rec.yaml"
    rec.write_text("train: &t {lr: 0.1, x: *t}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="recursive YAML alias"):
        load_experiment(rec)
    big = tmp_path / "big.yaml"
    big.write_text("name: " + "x" * (5 << 20) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{big}: .* a config is at most"):
        load_experiment(big)


def test_an_override_bomb_is_refused():
    with pytest.raises(ConfigError, match="override train.lr"):
        from doctrans.config import parse_overrides
        parse_overrides(["train.lr={" + ", ".join(LAUGHS) + ", z: *i}"])


def test_a_huge_value_in_an_error_is_cut(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text("train:\n  lr: " + "x" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_experiment(path)
    assert "must be a number" in str(e.value) and len(str(e.value)) < 600


def test_cli_error_messages_are_one_bounded_line(tmp_path, monkeypatch, capsys):
    import sys

    from doctrans import cli

    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(LAUGHS) + "\nname: *i\n", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["doctrans", "train", str(path)])
    with pytest.raises(SystemExit) as e:
        cli.main()
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.startswith("error: ") and err.count("\n") == 1 and "alias bomb" in err

    def boom(**kw):
        raise ValueError("line one\n" + "y" * 1_000_000)

    monkeypatch.setattr(cli, "cli", boom)
    with pytest.raises(SystemExit):
        cli.main()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 2200 and "more characters" in err
