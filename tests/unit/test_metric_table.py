"""The metric table of ``doctrans score`` (``doctrans/evaluation/metrics/``, issue 49 item 5): a
metric is one module and one row. A row registered here, in the test only, is a ``ScoreConfig``
keyword, a ``doctrans score`` option, a line or row of the printed table, a key of the JSON and a
column of the experiment tables — without a line of ``evaluation/score.py`` or ``cli/score.py``
changed."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from doctrans.evaluation import score as S
from doctrans.evaluation.metrics import METRIC_TABLE, check_table, metric_columns, model_metrics
from doctrans.evaluation.metrics.base import Column, CorpusTexts, Metric, Option, ScoreInputs

HYP = ["it 's fine .", "see you later .", "thank you very much ."]
REF = ["it 's fine .", "see you .", "thanks a lot ."]


def _ter(texts: CorpusTexts) -> dict:
    from sacrebleu.metrics import TER

    hyps, refs, prep = texts.detokenized
    metric = TER(case_sensitive=not texts.lowercase)
    s = metric.corpus_score(hyps, refs)
    sig = str(metric.get_signature())
    return {"score": s.score, "signature": sig, "verbose": s.format(signature=sig), "preprocessing": prep}


def _length(inputs: ScoreInputs) -> dict:
    hyp, ref = (sum(len(x.split()) for x in side) for side in (inputs.hyp, inputs.refs[0]))
    return {"hyp": hyp, "ref": ref, "ratio": hyp / ref}


TER = Metric(name="ter", title="TER", kind="corpus", needs=frozenset({"hypothesis", "references"}), compute=_ter,
             form="detokenized", legend="ter = translation edit rate (sacrebleu)",
             columns=lambda e: {"ter": e["score"]})
LENGTH = Metric(name="length_ratio", title="length ratio", kind="analysis",
                needs=frozenset({"hypothesis", "references"}), compute=_length,
                options=(Option("length_ratio", False, flag="--length-ratio", type="flag",
                                help="Add the hypothesis / first reference token ratio."),),
                when=("length_ratio",), report=lambda e: [f"length ratio: {e['ratio']:.3f} ({e['hyp']} / {e['ref']})"],
                columns=lambda e: {"length_ratio": e["ratio"]})


@pytest.fixture
def registered(monkeypatch):
    """TER and a length ratio as rows of the table, and ``cli/score.py`` imported anew (the command
    line reads the table when it is imported); its ``score`` group."""
    import doctrans.cli.score as cli_score

    monkeypatch.setitem(METRIC_TABLE, "ter", TER)
    monkeypatch.setitem(METRIC_TABLE, "length_ratio", LENGTH)
    yield importlib.reload(cli_score).score_grp
    monkeypatch.undo()
    importlib.reload(cli_score)


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return str(path)


def test_a_registered_metric_shows_up_in_score(registered, tmp_path):
    hyp, ref = _write(tmp_path / "hyp.txt", HYP), _write(tmp_path / "ref.txt", REF)
    help_text = CliRunner().invoke(registered, ["--help"]).output
    assert "--length-ratio" in help_text and "bleu_tok_lc,sacrebleu,chrf,ter" in help_text
    r = CliRunner().invoke(registered, [hyp, "-r", ref, "--metrics", "bleu_tok_lc,ter", "--length-ratio"])
    assert r.exit_code == 0, r.output
    rows = r.output.split("\n\n")[0].splitlines()
    assert [x.split()[0] for x in rows[2:]] == ["bleu_tok_lc", "ter"] and "tok:tercom" in rows[3]
    assert "ter = translation edit rate (sacrebleu)" in r.output and "length ratio: 1.182 (13 / 11)" in r.output
    r = CliRunner().invoke(registered, [hyp, "-r", ref, "--metrics", "ter", "--length-ratio", "--json"])
    res = json.loads(r.output)
    assert 0 < res["ter"]["score"] < 100 and res["length_ratio"] == {"hyp": 13, "ref": 11, "ratio": 13 / 11}
    assert metric_columns(res) == {"ter": res["ter"]["score"], "pronouns": res["pronouns"]["hyp"],
                                   "ref_pronouns": res["pronouns"]["refs"], "length_ratio": 13 / 11}
    # off unless asked for; a keyword of ScoreConfig like the built-in ones
    assert "length_ratio" not in json.loads(CliRunner().invoke(registered, [hyp, "-r", ref, "--json"]).output)
    assert S.score_files(S.ScoreConfig(hyp, (ref,), metrics=("bleu_tok_lc",), length_ratio=True))["length_ratio"]


def test_the_table_is_checked():
    check_table(METRIC_TABLE)
    with pytest.raises(ValueError, match="row 'x' holds metric 'ter'"):
        check_table({"x": TER})
    other = Option("length_ratio", True, flag="--length-ratio", type="flag")
    twin = Metric(name="twin", title="t", kind="analysis", needs=frozenset(), compute=_length, options=(other,))
    with pytest.raises(ValueError, match="share one Option object"):
        check_table({"length_ratio": LENGTH, "twin": twin})
    with pytest.raises(ValueError, match="a ScoreConfig field"):
        check_table({"m": Metric(name="m", title="m", kind="analysis", needs=frozenset(), compute=_length,
                                 options=(Option("hyp"),))})
    with pytest.raises(ValueError, match="unknown needs"):
        Metric(name="m", title="m", kind="analysis", needs=frozenset({"model weights"}), compute=_length)
    with pytest.raises(ValueError, match="says its form"):
        Metric(name="m", title="m", kind="corpus", needs=frozenset(), compute=_ter)
    # a model metric (doctrans table's, ModelInputs) needs the model, takes no score options, and
    # says its markdown columns in known views
    with pytest.raises(ValueError, match="needs 'model' exactly when its kind is 'model'"):
        Metric(name="m", title="m", kind="model", needs=frozenset(), compute=_length)
    with pytest.raises(ValueError, match="no doctrans score options"):
        Metric(name="m", title="m", kind="model", needs=frozenset({"model"}), compute=_length, options=(Option("x"),))
    with pytest.raises(ValueError, match="unknown views \\['context'\\]"):
        Metric(name="m", title="m", kind="model", needs=frozenset({"model"}), compute=_length,
               views={"context": (Column("m", "m", ".2f"),)})
    with pytest.raises(ValueError, match="only a model metric compares rows"):
        Metric(name="m", title="m", kind="analysis", needs=frozenset(), compute=_length, compare=lambda *a: {})
    assert [m.name for m in model_metrics(("context_usage",))] == ["cxmi", "contrastive"]
    assert [m.name for m in model_metrics(("rec",))] == ["contrastive"]


def test_options_given_in_part_and_unknown_keywords(tmp_path):
    with pytest.raises(S.ScoreOptionError, match="DP translation recall needs both --base and --oracle"):
        S.ScoreConfig("h", ("r",), dp_base="b")
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['cohesion_windw'\]"):
        S.ScoreConfig("h", ("r",), cohesion_windw=3)
    cfg = S.ScoreConfig("h", ("r",), baseline="b", bootstrap=10)
    assert (cfg.baseline, cfg.bootstrap, cfg.cohesion, cfg.metrics) == ("b", 10, False, S.METRICS)
