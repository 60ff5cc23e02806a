"""`doctrans configs` gives each shipped YAML's first sentence whole, wrapped under its column,
never cut mid-sentence (issue 50 item 18)."""
from __future__ import annotations

from click.testing import CliRunner

from doctrans import config_catalog
from doctrans.cli import cli


def _entries(output: str) -> dict[str, str]:
    """path → its description, the wrapped lines joined."""
    out: dict[str, str] = {}
    last = None
    for line in output.splitlines()[1:]:
        head = line[2:].split(" ", 1)
        if line.startswith("  ") and not line.startswith("   ") and head[0].endswith(".yaml"):
            last = head[0]
            out[last] = head[1].strip() if len(head) > 1 else ""
        elif last:
            out[last] += " " + line.strip()
    return out


def test_every_description_is_a_whole_first_sentence():
    r = CliRunner().invoke(cli, ["configs"])
    assert r.exit_code == 0, r.output
    got = _entries(r.output)
    assert len(got) == len(list(config_catalog.find_pipelines().rglob("*.yaml")))
    cut = {p: d for p, d in got.items() if not d.endswith((".", ":"))}
    assert not cut, f"cut mid-sentence: {cut}"
    assert got["pipelines/context/han_encoder.yaml"].startswith("HAN encoder (Miculicich et al. 2018")
    assert got["pipelines/context/han_encoder.yaml"].endswith("gated into the encoder output.")


def test_description_takes_the_first_sentence_of_the_first_paragraph():
    text = ("# Cache (Tu et al. 2018; S2 eq. 3.6): a memory of the\n# previous words. Second sentence here.\n"
            "#\n# another paragraph\nname: x\n")
    assert config_catalog.description(text) == "Cache (Tu et al. 2018; S2 eq. 3.6): a memory of the previous words."
    example = "# Train on predicted DPs:\n#   doctrans annotate-dp -p PREP\nname: y\n"
    assert config_catalog.description(example) == "Train on predicted DPs:"
    assert config_catalog.description("name: z\n") == ""
    assert config_catalog.render_configs([("a.yaml", "w " * 60)], width=60).count("\n") > 1
