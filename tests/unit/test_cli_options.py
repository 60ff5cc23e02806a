"""The click CLI as a whole (issue 27 item 4, issue 31 items 5, 7, 8): every numeric option is
range-checked with a one-line usage error, `score` reads its modes as subcommands (the former
mode flags name the new spelling), `-` and `-q`, `doctrans configs`, the experiment tables'
option parsing, and help that shows every command's summary whole."""
from __future__ import annotations

import json
import re

import click
import pytest
from click.testing import CliRunner

from doctrans import config_catalog
from doctrans.cli import cli
from doctrans.cli.options import CheckpointParam

NUMERIC = (click.types.IntParamType, click.types.FloatParamType)     # IntRange / FloatRange subclass these


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    """(path, command) of every leaf command under ``group``, hidden ones too."""
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))
        else:
            yield path + (name,), cmd


def _dummy(param: click.Parameter, tmp_path) -> str:
    """A value click accepts for a required parameter: an existing file or directory, a choice."""
    t = param.type
    if isinstance(t, CheckpointParam):
        return str(tmp_path / "dummy.txt")
    if isinstance(t, click.Path):
        return str(tmp_path if not t.file_okay else tmp_path / "dummy.txt")
    if isinstance(t, click.Choice):
        return str(t.choices[0])
    if isinstance(t, NUMERIC):
        return "1"
    return "a=b" if "=" in (param.metavar or "") else "x"


def _minimal_args(cmd: click.Command, tmp_path, skip: click.Parameter) -> list[str]:
    args: list[str] = []
    for p in cmd.params:
        if p is skip or not p.required:
            continue
        if isinstance(p, click.Option):
            args += [p.opts[0], _dummy(p, tmp_path)]
        else:
            args.append(_dummy(p, tmp_path))
    return args


def _numeric_options():
    for path, cmd in _commands(cli):
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.is_flag and isinstance(p.type, NUMERIC):
                yield path, cmd, p


def test_the_walk_finds_the_numeric_options():
    found = {(" ".join(path), p.opts[-1]) for path, _, p in _numeric_options()}
    assert {("translate", "--beam"), ("translate", "--batch-sentences"), ("score bleu", "--bootstrap"),
            ("score cxmi", "--threads"), ("table context", "--beam"), ("average", "--last")} <= found
    assert len(found) >= 30


@pytest.mark.parametrize("value", ["0", "-1"])
def test_every_numeric_option_is_range_checked(value, tmp_path):
    """0 and -1 for every numeric option of every command: a clean usage error naming the option
    (exit 2, no traceback), unless 0 is valid and the option's help says what 0 means."""
    (tmp_path / "dummy.txt").write_text("x\n", encoding="utf-8")
    runner = CliRunner()
    for path, cmd, p in _numeric_options():
        t = p.type
        lo = getattr(t, "min", None)
        zero_ok = lo is not None and (lo < 0 or (lo == 0 and not getattr(t, "min_open", False)))
        where = f"{' '.join(path)} {p.opts[-1]} {value}"
        if value == "0" and zero_ok:
            assert re.search(r"\b0\b", p.help or ""), f"{where}: 0 is accepted but the help does not say what it means"
            cmd.make_context(path[-1], _minimal_args(cmd, tmp_path, p) + [p.opts[0], value])   # parses
            continue
        assert lo is not None, f"{where}: no lower bound"
        r = runner.invoke(cli, [*path, *_minimal_args(cmd, tmp_path, p), p.opts[0], value])
        assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit), (where, r.output)
        assert r.exit_code == 2, (where, r.output)
        assert "Traceback" not in r.output and any(o in r.output for o in p.opts), (where, r.output)
        assert r.output.strip().splitlines()[-1].startswith("Error: Invalid value for"), (where, r.output)


def test_translate_history_chunk_takes_auto_or_a_count(tmp_path):
    """--history-chunk: "auto" (the default) or an integer ≥ 0; anything else is a one-line usage
    error naming the option."""
    from doctrans.cli.translate import translate_cmd

    for value, want in (("auto", "auto"), ("0", 0), ("19", 19)):
        ctx = translate_cmd.make_context("translate", ["--history-chunk", value])
        assert ctx.params["history_chunk"] == want
    assert translate_cmd.make_context("translate", []).params["history_chunk"] == "auto"
    for bad in ("-1", "x", "2.5"):
        r = CliRunner().invoke(cli, ["translate", "--history-chunk", bad])
        assert r.exit_code == 2 and "Invalid value for '--history-chunk'" in r.output and "auto" in r.output


def test_translate_beam_zero_is_a_one_line_usage_error(tmp_path):
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(b"not used")
    for opt in ("--beam", "--batch-sentences"):
        r = CliRunner().invoke(cli, ["translate", "-c", str(ckpt), opt, "0"])
        assert r.exit_code == 2 and f"Invalid value for '{opt}': 0 is not in the range x>=1" in r.output


# --- score ---------------------------------------------------------------------------------------


def _files(tmp_path):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("the cat sat on the mat .\nhello there\n", encoding="utf-8")
    ref.write_text("the cat sat on the mat .\nhello there\n", encoding="utf-8")
    return str(hyp), str(ref)


def test_score_reads_the_hypothesis_from_stdin(tmp_path):
    hyp, ref = _files(tmp_path)
    from_file = CliRunner().invoke(cli, ["score", hyp, "-r", ref, "--json"])
    from_stdin = CliRunner().invoke(cli, ["score", "-", "-r", ref, "--json"],
                                    input=open(hyp, encoding="utf-8").read())
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_stdin.output
    a, b = json.loads(from_file.output), json.loads(from_stdin.output)
    assert b["hyp"] == "-" and b["bleu_tok_lc"]["score"] == a["bleu_tok_lc"]["score"] == pytest.approx(100.0)


def test_score_bleu_is_the_default_mode(tmp_path):
    hyp, ref = _files(tmp_path)
    plain = CliRunner().invoke(cli, ["score", hyp, "-r", ref, "--json"])
    named = CliRunner().invoke(cli, ["score", "bleu", hyp, "-r", ref, "--json"])
    assert plain.exit_code == named.exit_code == 0 and json.loads(plain.output) == json.loads(named.output)


@pytest.mark.parametrize("old, new", [(["--dp", "H", "--base", "B", "--oracle", "O"], "doctrans score dp "),
                                      (["--cxmi", "-c", "C", "--src", "S", "-r", "R"], "doctrans score cxmi "),
                                      (["--contrastive=DIR", "-c", "C"], "doctrans score contrastive ")])
def test_former_score_mode_flags_name_the_new_spelling(old, new):
    r = CliRunner().invoke(cli, ["score", *old])
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit)
    last = r.output.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "is now a subcommand" in last and new in last


def test_score_modes_check_their_own_options(tmp_path):
    hyp, ref = _files(tmp_path)
    r = CliRunner().invoke(cli, ["score", "dp", hyp, "--oracle", ref])
    assert r.exit_code == 2 and "Missing option '--base'" in r.output
    r = CliRunner().invoke(cli, ["score", hyp, "-r", ref, "--base", ref])
    assert r.exit_code == 2 and "needs both --base and --oracle" in r.output
    r = CliRunner().invoke(cli, ["score", "cxmi", "--src", hyp, "-r", ref])
    assert r.exit_code == 2 and "Missing option '-c'" in r.output


def test_score_help_shows_the_bleu_options_and_the_modes():
    r = CliRunner().invoke(cli, ["score", "--help"])
    assert r.exit_code == 0
    assert "Usage: cli score [OPTIONS] HYP" in r.output and "--baseline" in r.output and "--cohesion" in r.output
    modes = r.output[r.output.index("Other modes"):]
    assert all(re.search(rf"^\s+{m}\s", modes, re.M) for m in ("dp", "cxmi", "contrastive"))
    for mode, opt in (("dp", "--oracle-base"), ("cxmi", "--random-context"), ("contrastive", "--max-tokens")):
        h = CliRunner().invoke(cli, ["score", mode, "--help"])
        assert h.exit_code == 0 and opt in h.output and "--threads" in h.output or mode == "dp"


# --- -q, help ------------------------------------------------------------------------------------


def test_quiet_turns_bars_off_and_logging_to_warnings(tmp_path, monkeypatch):
    from doctrans.utils import QUIET_ENV, bars_off

    monkeypatch.delenv(QUIET_ENV, raising=False)
    hyp, ref = _files(tmp_path)
    seen = {}

    import doctrans.evaluation.score as score

    real = score.score_translation

    def spy(cfg):
        seen["bars_off"] = bars_off()
        return real(cfg)

    monkeypatch.setattr(score, "score_translation", spy)
    assert CliRunner().invoke(cli, ["-q", "score", hyp, "-r", ref]).exit_code == 0
    assert seen["bars_off"] is True
    assert CliRunner().invoke(cli, ["score", hyp, "-r", ref]).exit_code == 0
    assert seen["bars_off"] is False                          # the next call without -q has its bars back
    r = CliRunner().invoke(cli, ["-q", "-v", "score", hyp, "-r", ref])
    assert r.exit_code == 2 and "exclude each other" in r.output


def test_every_tqdm_bar_consults_the_quiet_switch():
    """Every ``tqdm(...)`` in doctrans/ passes ``disable=`` an expression with ``bars_off()``."""
    import ast
    from pathlib import Path

    import doctrans

    calls = 0
    for path in Path(doctrans.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "tqdm":
                calls += 1
                disable = next((k.value for k in node.keywords if k.arg == "disable"), None)
                assert disable is not None and "bars_off()" in ast.unparse(disable), f"{path}:{node.lineno}"
    assert calls >= 7


def test_top_level_help_shows_each_summary_whole():
    r = CliRunner().invoke(cli, ["--help"], terminal_width=200)
    listing = r.output[r.output.index("Commands:"):]
    for name in ("annotate-dp", "average", "configs", "contrastive", "preprocess", "score", "table", "train",
                 "translate"):
        line = next(x for x in listing.splitlines() if x.strip().startswith(name + " "))
        assert not line.rstrip().endswith("..."), line
    assert "-q, --quiet" in r.output


def test_help_explains_what_users_could_not_find():
    train = CliRunner().invoke(cli, ["train", "--help"]).output
    assert "doctrans configs" in train
    mode = CliRunner().invoke(cli, ["annotate-dp", "corpus", "--help"], terminal_width=400).output
    assert "misaligned: also pronouns whose links all go to Chinese non-pronouns" in mode
    assert "see README" not in mode
    translate = CliRunner().invoke(cli, ["translate", "--help"], terminal_width=400).output
    assert re.search(r"--max-len-extra INTEGER RANGE\s+Tokens an output may have", translate)


def test_translate_help_reads_by_section():
    out = CliRunner().invoke(cli, ["translate", "--help"], terminal_width=400).output
    titles = re.findall(r"^(\S[^\n]*) options:$", out, flags=re.M)
    assert titles == ["Model and engine", "Input", "Output", "Subtitle files and streams", "Search", "Documents and context models",
                      "Directory input", "Dropped pronouns (DP input)", "Reconstructor (reranking, DP output)", "Other"]
    search = out.split("Search options:")[1].split("Documents and context models options:")[0]
    assert "--beam" in search and "--lenpen" in search and "--dp-nbest" not in search
    assert "--help" in out.split("Other options:")[1]


def test_sectioned_command_refuses_an_option_in_no_section():
    from doctrans.cli.options import SectionedCommand

    with pytest.raises(TypeError, match="b: in no section"):
        click.command(cls=SectionedCommand, sections=(("A", ("a",)),))(
            click.option("--a")(click.option("--b")(lambda a, b: None)))
    with pytest.raises(TypeError, match="c: no such option"):
        click.command(cls=SectionedCommand, sections=(("A", ("a", "c")),))(click.option("--a")(lambda a: None))


# --- annotate-dp: subcommands, and the former one-command spelling mapped to them ------------------


@pytest.mark.parametrize("old, new", [
    (["-p", "P", "--explain", "5"], ["corpus", "-p", "P", "--explain", "5"]),
    (["--generator", "G.pt", "IN", "-o", "O"], ["apply", "--generator", "G.pt", "IN", "-o", "O"]),
    (["-p", "P", "--source-bpe", "--splits", "train,dev"], ["source-bpe", "-p", "P", "--splits", "train,dev"]),
    (["-p", "P", "--jackknife", "3", "--jackknife-config=C.yaml", "--jackknife-set", "train.max_epochs=1"],
     ["jackknife", "-p", "P", "--folds", "3", "--config=C.yaml", "--set", "train.max_epochs=1"]),
])
def test_annotate_dp_former_spelling_maps_to_the_subcommand(old, new):
    from doctrans.cli.annotate import annotate_dp_grp

    assert annotate_dp_grp.legacy_args(old) == new


def test_annotate_dp_former_spelling_runs_the_subcommand_with_a_note(tmp_path, monkeypatch, caplog):
    from doctrans.dp import apply as dp_apply

    calls = []
    monkeypatch.setattr(dp_apply, "apply_generator", lambda *a, **kw: calls.append((a, kw)) or {"dp": tmp_path / "o.dp.zh"})
    src = tmp_path / "in.tok.zh"
    src.write_text("去 了\n", encoding="utf-8")
    for args in (["apply", "--generator", "g.pt", str(src), "--nbest", "3"],
                 ["--generator", "g.pt", str(src), "--nbest", "3"]):
        caplog.clear()
        r = CliRunner().invoke(cli, ["annotate-dp", *args])
        assert r.exit_code == 0, r.output
        assert "wrote" in r.output
        notes = [rec.getMessage() for rec in caplog.records if "former spelling" in rec.getMessage()]
        assert len(notes) == (args[0] != "apply")
        if notes:
            assert "use `doctrans annotate-dp apply --generator g.pt" in notes[0]
    assert calls[0] == calls[1] and calls[0][1]["nbest"] == 3


def test_annotate_dp_subcommands_check_their_own_options(tmp_path):
    r = CliRunner().invoke(cli, ["annotate-dp", "apply", str(tmp_path)])          # INPUT a directory, no --generator
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["annotate-dp", "jackknife", "-p", str(tmp_path)])
    assert r.exit_code == 2 and "--folds" in r.output
    r = CliRunner().invoke(cli, ["annotate-dp", "source-bpe", "-p", str(tmp_path)])
    assert r.exit_code == 2 and "annotate-dp corpus -p" in r.output


# --- configs -------------------------------------------------------------------------------------


def test_configs_lists_every_shipped_yaml_with_its_description():
    r = CliRunner().invoke(cli, ["configs"])
    assert r.exit_code == 0, r.output
    root = config_catalog.find_pipelines()
    n = len(list(root.rglob("*.yaml")))
    assert n >= 20 and f"{n} configs in {root}" in r.output
    line = next(x for x in r.output.splitlines() if "context/han_encoder.yaml" in x)
    assert "HAN encoder (Miculicich et al. 2018" in line


def test_configs_keys_show_defaults_and_comments():
    r = CliRunner().invoke(cli, ["configs", "--keys", "train"])
    assert r.exit_code == 0
    assert re.search(r"^  max_steps: 0\s+updates; 0 = unlimited$", r.output, re.M)
    ctx = CliRunner().invoke(cli, ["configs", "--keys", "context"]).output
    assert "context.type: han" in ctx and re.search(r"^  attach: encoder\s+encoder \| decoder \| both", ctx, re.M)
    dp = CliRunner().invoke(cli, ["configs", "--keys", "dp"]).output
    assert re.search(r"^  max_epochs: 10\b", dp, re.M)                    # the DP trainer's default, not 0
    assert CliRunner().invoke(cli, ["configs", "--keys", "nope"]).exit_code == 2
    assert CliRunner().invoke(cli, ["configs", "train"]).exit_code == 2


def test_field_comments_take_continuation_lines():
    from dataclasses import dataclass

    @dataclass
    class C:
        a: int = 1          # first
        #   and more
        b: str = "#x"       # b's
        c: int = 0

    assert config_catalog.field_comments(C) == {"a": "first and more", "b": "b's"}


def test_configs_without_pipelines_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setattr(config_catalog, "pipelines_candidates", lambda: [tmp_path / "a", tmp_path / "b"])
    r = CliRunner().invoke(cli, ["configs"])
    assert r.exit_code != 0 and isinstance(r.exception, FileNotFoundError)
    assert f"looked in {tmp_path / 'a'}, {tmp_path / 'b'}" in str(r.exception)


# --- table, contrastive --------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--system", "noequals"], "expected NAME=RUN_DIR"),
    (["--system", "A=r", "--context-option", "B:x=1"], "NAME one of the --system names"),
    (["--system", "A=r", "--table", "T=A,Z"], "of --system names"),
    (["--system", "A=r", "--context-option", "A:x=1", "--discourse"], "leave out --context-option"),
])
def test_table_context_rejects_bad_specs_with_a_usage_error(args, message, tmp_path):
    r = CliRunner().invoke(cli, ["table", "context", *args, "--work", str(tmp_path / "w")])
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "w").exists()                   # nothing ran


def test_table_dp_nbest_is_checked(tmp_path):
    f = tmp_path / "m.pt"
    f.write_bytes(b"x")
    base = ["table", "dp", "--baseline", str(f), "--dp", str(f), "--generator", str(f)]
    r = CliRunner().invoke(cli, [*base, "--nbest", "2,1"])
    assert r.exit_code == 2 and "N ≥ 2" in r.output


def test_contrastive_build_names_the_missing_file(tmp_path):
    r = CliRunner().invoke(cli, ["contrastive", "build", "--data", str(tmp_path), "-o", str(tmp_path / "set")])
    assert isinstance(r.exception, FileNotFoundError) and "test.zh not found" in str(r.exception)


def test_scoring_commands_take_a_shipped_models_name(tmp_path):
    """`score cxmi -c`, `score contrastive -c/--baseline` and `serve -c` take a shipped model's
    name as `translate -c` and `export -c` do (a bug: a usage error "File 'NAME' does not exist"); a name
    that is neither a file nor a shipped model is a usage error naming the option."""
    from doctrans.runtime.shipped import default_model

    shipped = default_model("sentence")
    for args in (["score", "cxmi", "--src", "s", "-r", "r"], ["score", "contrastive", str(tmp_path)]):
        cmd = cli
        for name in args[:2]:
            cmd = cmd.commands[name]
        params = {p.name: p for p in cmd.params}
        assert params["checkpoint"].type.convert(shipped.name, None, None) == str(shipped.path)
    serve = {p.name: p for p in cli.commands["serve"].params}["checkpoint"].type      # an export directory too
    assert serve.convert(shipped.name, None, None) == str(shipped.path)
    assert serve.convert(str(tmp_path), None, None) == str(tmp_path)
    r = CliRunner().invoke(cli, ["score", "contrastive", str(tmp_path), "-c", "no-such-model"])
    assert r.exit_code == 2 and "-c' / '--checkpoint'" in r.output and "no-such-model" in r.output
