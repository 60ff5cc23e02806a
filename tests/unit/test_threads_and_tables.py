"""Small surprises of issue 50 item 18: `shortlist --threads` defaults to 0 (all usable cores) as
`translate --threads` does; `table context` takes `--threads` and prints the table it writes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from doctrans import stages
from doctrans.cli import cli
from doctrans.experiments import context_table
from doctrans.utils.provenance import cpu_count


def _default(command: str, option: str):
    cmd = cli
    for name in command.split():
        cmd = cmd.commands[name]
    return next(p.default for p in cmd.params if p.name == option)


def test_shortlist_threads_default_like_translate(tmp_path, monkeypatch):
    assert _default("shortlist", "threads") == _default("translate", "threads") == 0
    import doctrans.dp.align as align
    import doctrans.inference.shortlist as sl

    seen = {}

    def fake_eflomal(src, tgt, fwd, rev, n_samplers):
        seen["samplers"] = n_samplers
        Path(fwd).write_text("0-0\n"), Path(rev).write_text("0-0\n")

    def fake_build(prepared, output, top_k, frequent, align_path, align_fn):
        (tmp_path / "a.zh").write_text("w\n"), (tmp_path / "a.en").write_text("v\n")
        align_fn(tmp_path / "a.zh", tmp_path / "a.en")
        return Path(output)

    monkeypatch.setattr(align, "eflomal_align", fake_eflomal)
    monkeypatch.setattr(sl, "run_build", fake_build)
    stages.shortlist(str(tmp_path), str(tmp_path / "o.vmap"))
    assert seen["samplers"] == cpu_count()
    stages.shortlist(str(tmp_path), str(tmp_path / "o.vmap"), threads=1)
    assert seen["samplers"] == 1


def test_table_context_prints_the_table_and_takes_threads(tmp_path, monkeypatch):
    got = {}

    def fake_run(systems, args, options, tables):
        got["threads"] = args.threads
        out = Path(args.out)
        out.write_text("| system | BLEU |\n| --- | ---: |\n| HAN | 13.11 |\n", encoding="utf-8")
        return out

    monkeypatch.setattr(context_table, "build_context_table", fake_run)
    r = CliRunner().invoke(cli, ["table", "context", "--system", f"HAN={tmp_path}", "--threads", "3",
                                 "--out", str(tmp_path / "t.md"), "--work", str(tmp_path / "w")])
    assert r.exit_code == 0, r.output
    assert "| HAN | 13.11 |" in r.output and f"wrote {tmp_path / 't.md'}" in r.output and got["threads"] == 3


def test_table_context_run_sets_the_threads(tmp_path, monkeypatch):
    before = torch.get_num_threads()

    def fake_row(*a, **kw):
        raise RuntimeError(f"threads {torch.get_num_threads()}")

    monkeypatch.setattr(context_table, "_system_row", fake_row)
    try:
        with pytest.raises(RuntimeError, match="threads 3"):
            context_table.build_context_table([("HAN", tmp_path)],
                              context_table.ContextTableConfig(work=str(tmp_path / "w"), threads=3))
    finally:
        torch.set_num_threads(before)
