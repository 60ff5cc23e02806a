"""A contrastive pronoun test built from TVsub (ContraPro-style, Müller et al. 2018), and its scoring.

**Building** (``doctrans contrastive build --data TVSUB --split test -o DIR``,
deterministic): every English central pronoun (Table 4.2 forms) of the first reference of
``{split}.ref.sgm`` becomes an item when the hand DP annotation says unambiguously whether the
Chinese source drops it. Per line and pronoun class (Table 4.2 row, 2SG and 2PL merged into
``2``: 我 1SG, 你/你们/您 2, 他 3SGM, 她 3SGF, 它 3SGN, 我们/咱们 1PL, 他们/她们/它们 3PL):

* ``dp`` — the annotators inserted a pronoun of that class (``{split}.oracle-dp.seg.zh`` has
  more pronoun roots of the class than ``{split}.seg.zh``) and the source has none of it: every
  English pronoun of the class in the reference realises a dropped pronoun;
* ``overt`` — nothing of the class was inserted and the source has it overtly;
* any other combination (some overt, some dropped) is left out: which English token is which
  would need a word alignment [I: the count rule keeps the set exact rather than large].

Roots are found inside tokens (``dp.pronouns.chinese_roots``: 我爱你 holds 我 and 你). Each item's
contrasts are the reference with that one pronoun replaced by every other pronoun of the same
grammatical case (subject: i you he she it we they; object: me you him her it us them;
possessive adjective: my your his her its our their; possessive pronoun: mine yours his hers
its ours theirs; reflexive: myself … themselves). A form that fills several cases (*you*, *it*:
subject and object; *her*: object and possessive; *his*) gets the contrasts of all of them
[I: no parser decides its case; an ungrammatical contrast only makes the item easier]. The set
does not record antecedents, so there is no same-/previous-sentence breakdown.

The set is a directory: ``src.zh`` (the raw source, every line), ``ref.en`` (the tokenized,
lowercased reference, every line), ``docs`` (``doc_id<TAB>position``), ``items.jsonl`` (one item
per line: line, position, pronoun, class, kind, contrasts) and ``summary.json`` (counts).

**Scoring** (``doctrans score contrastive DIR -c CKPT``): the model's teacher-forced
log-probability (``evaluation.cxmi.score_items``, context = the previous N sentences of the
document with their references) of the reference and of each contrast; an item is right when
the reference scores strictly higher than every contrast. Accuracy overall, by kind (DP vs
overt), by pronoun and by class.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import numpy as np

from doctrans.dp.pronouns import ENGLISH_PRONOUNS, chinese_roots, root_rows
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines

log = logging.getLogger(__name__)

CASES: dict[str, tuple[str, ...]] = {
    "subject": ("i", "you", "he", "she", "it", "we", "they"),
    "object": ("me", "you", "him", "her", "it", "us", "them"),
    "possessive_adjective": ("my", "your", "his", "her", "its", "our", "their"),
    "possessive_pronoun": ("mine", "yours", "his", "hers", "its", "ours", "theirs"),
    "reflexive": ("myself", "yourself", "himself", "herself", "itself", "ourselves", "themselves"),
}


def pronoun_class(row: str) -> str:
    """Table 4.2 row → class (2SG and 2PL are one class: *you* does not tell them apart)."""
    return "2" if row.startswith("2") else row


def english_class(form: str) -> str:
    """Lower-cased English central pronoun → its class (KeyError for another word)."""
    return pronoun_class(ENGLISH_PRONOUNS[form].categories[0])


def contrasts_of(form: str) -> list[str]:
    """Every other pronoun of each case ``form`` can fill, in ``CASES`` order, no repeats."""
    out: list[str] = []
    for forms in CASES.values():
        if form in forms:
            out += [f for f in forms if f != form and f not in out]
    return out


def root_counts(line: str) -> Counter:
    """Class → number of Chinese pronoun roots in a segmented line (inside tokens too)."""
    return Counter(pronoun_class(root_rows(r)[0]) for tok in line.split() for r in chinese_roots(tok))


def line_items(seg: str, oracle: str, ref: str) -> list[dict]:
    """The items of one line (see the module docstring): seg / oracle the segmented source
    without / with the hand-inserted DPs, ref the tokenized reference (lower case)."""
    overt, full = root_counts(seg), root_counts(oracle)
    toks = ref.split()
    items = []
    for j, tok in enumerate(toks):
        if tok not in ENGLISH_PRONOUNS:
            continue
        cls = english_class(tok)
        dropped = max(0, full[cls] - overt[cls])
        if dropped and not overt[cls]:
            kind = "dp"
        elif overt[cls] and not dropped:
            kind = "overt"
        else:
            continue
        items.append({"position": j, "pronoun": tok, "class": cls, "kind": kind, "contrasts": contrasts_of(tok)})
    return items


def build_set(data: Path, split: str, out: Path) -> dict:
    """Build the contrastive set of TVsub ``split`` (dev or test) from ``data`` into ``out``;
    returns the summary. Raises FileNotFoundError naming a missing file and ValueError on
    line-count mismatches."""
    from doctrans.data.sgml import read_sgml

    d = Path(data) / split
    paths = {k: d / f"{split}.{k}" for k in ("zh", "seg.zh", "oracle-dp.seg.zh", "ref.sgm")}
    for p in paths.values():
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (the TVsub layout of ../shared/corpora/tvsub)")
    ref = read_sgml(paths["ref.sgm"])[0]
    src, seg, oracle = (read_lines(paths[k]) for k in ("zh", "seg.zh", "oracle-dp.seg.zh"))
    refs = [r.lower() for r in ref.segments]
    for name, lines in (("zh", src), ("seg.zh", seg), ("oracle-dp.seg.zh", oracle)):
        if len(lines) != len(refs):
            raise ValueError(f"{paths[name]} has {len(lines)} lines but {paths['ref.sgm']} has {len(refs)} segments")
    doc_ids = ref.doc_ids()
    pos, last = [], None
    for k, doc in enumerate(doc_ids):
        pos.append(pos[-1] + 1 if k and doc == last else 0)
        last = doc
    items = []
    for i, (s, o, r) in enumerate(zip(seg, oracle, refs)):
        for it in line_items(s, o, r):
            items.append({"line": i, **it})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_lines(out / "src.zh", src)
    atomic_write_lines(out / "ref.en", refs)
    atomic_write_lines(out / "docs", [f"{doc}\t{p}" for doc, p in zip(doc_ids, pos)])
    atomic_write_lines(out / "items.jsonl", [json.dumps(it, ensure_ascii=False) for it in items])
    summary = {"source": str(d), "split": split, "lines": len(refs), "items": len(items),
               "by_kind": dict(Counter(it["kind"] for it in items)),
               "by_pronoun": {k: dict(Counter(it["kind"] for it in items if it["pronoun"] == k))
                              for k in sorted({it["pronoun"] for it in items})},
               "contrasts": sum(len(it["contrasts"]) for it in items),
               "reference_pronouns": sum(t in ENGLISH_PRONOUNS for r in refs for t in r.split())}
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    return summary


def read_set(path: Path) -> tuple[list[str], list[str], list[str], list[dict]]:
    """A set directory → (source lines, reference lines, doc ids, items). Raises
    FileNotFoundError / ValueError naming the file (and line) on a malformed set."""
    path = Path(path)
    for name in ("src.zh", "ref.en", "docs", "items.jsonl"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path / name} not found: build the set with "
                                    "doctrans contrastive build --data TVSUB --split test -o DIR")
    src, ref = read_lines(path / "src.zh"), read_lines(path / "ref.en")
    docs = [x.split("\t")[0] for x in read_lines(path / "docs")]
    if not len(src) == len(ref) == len(docs):
        raise ValueError(f"{path}: src.zh, ref.en and docs have {len(src)}, {len(ref)} and {len(docs)} lines")
    items = []
    for k, line in enumerate(read_lines(path / "items.jsonl")):
        try:
            it = json.loads(line)
            tok = ref[it["line"]].split()[it["position"]]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{path / 'items.jsonl'}:{k + 1}: bad item ({e})") from None
        if tok != it["pronoun"]:
            raise ValueError(f"{path / 'items.jsonl'}:{k + 1}: token {it['position']} of reference line "
                             f"{it['line'] + 1} is {tok!r}, not {it['pronoun']!r}")
        items.append(it)
    return src, ref, docs, items


def contrast_lines(ref: str, item: dict) -> list[str]:
    """The reference line with the item's pronoun replaced by each contrast."""
    toks = ref.split()
    out = []
    for c in item["contrasts"]:
        toks2 = list(toks)
        toks2[item["position"]] = c
        out.append(" ".join(toks2))
    return out


def score_set(checkpoint: str, set_dir: Path, max_tokens: int = 3000, progress: bool = False,
              device: str = "auto", source: list[str] | None = None) -> dict:
    """Score a contrastive set directory with a checkpoint (see the module docstring) → the
    result of ``score_items_of``, plus ``checkpoint`` and ``set``. ``source``: other source
    lines for the set's lines, segmented (e.g. the DP-completed input a +DP model translates:
    ``experiments/dp_table.py``); default the set's raw ``src.zh``. Raises ValueError if ``source`` has
    another line count."""
    from doctrans.evaluation.cxmi import load_scoring_set

    src, ref, docs, items = read_set(set_dir)
    if source is not None and len(source) != len(src):
        raise ValueError(f"{len(source)} source lines for the {len(src)} lines of {set_dir}")
    s = load_scoring_set(checkpoint, src if source is None else source, ref, docs, tokenized=source is not None,
                         ref_tokenized=True, device=device)
    return {"checkpoint": checkpoint, "set": str(set_dir),
            **score_items_of(s, ref, items, max_tokens=max_tokens, progress=progress)}


def table_columns(checkpoint: str, set_dir: Path, data: Path, source: list[str] | None = None) -> dict:
    """The contrastive columns of the context and DP tables: the TVsub test set built into
    ``set_dir`` from ``data`` when it is not there yet (``build_set``), scored with ``checkpoint``
    (``score_set``, ``source`` as there) → {contrastive, contrastive_dp, contrastive_overt:
    accuracies in [0, 1] (NaN for a kind without items), contrastive_items}."""
    set_dir = Path(set_dir)
    if not (set_dir / "items.jsonl").is_file():
        build_set(Path(data), "test", set_dir)
    c = score_set(checkpoint, set_dir, source=source)
    return {"contrastive": c["accuracy"], "contrastive_dp": c["by_kind"].get("dp", {}).get("accuracy", float("nan")),
            "contrastive_overt": c["by_kind"].get("overt", {}).get("accuracy", float("nan")),
            "contrastive_items": c["items"]}


def score_items_of(s, ref: list[str], items: list[dict], max_tokens: int = 3000, progress: bool = False) -> dict:
    """Judge each item with a loaded ``evaluation.cxmi.ScoringSet`` ``s`` (its lines = ``ref``'s):
    right when the reference's total log-probability beats every contrast's strictly → {accuracy,
    items, by_kind, by_pronoun, by_class: {key: {items, accuracy}}, per_item: [1/0],
    margin: [reference − best contrast, nats]}."""
    from doctrans.evaluation.forced import Item, model_context, score_items

    variants = [[ref[it["line"]]] + contrast_lines(ref[it["line"]], it) for it in items]
    bpe = s.tgt_proc.apply_bpe([v for vs in variants for v in vs])
    owner = [k for k, vs in enumerate(variants) for _ in vs]
    work = [Item(items[k]["line"], s.tgt_vocab.encode(b), model_context(s.model, s.doc, items[k]["line"]))
            for k, b in zip(owner, bpe)]
    scores, = score_items(s.model, work, s.src, s.tgt, max_tokens=max_tokens, progress=progress)
    totals = np.array([float(x.sum()) for x in scores])
    right, margin, k0 = [], [], 0
    for vs in variants:
        block = totals[k0:k0 + len(vs)]
        margin.append(float(block[0] - block[1:].max()))
        right.append(int(margin[-1] > 0))
        k0 += len(vs)

    def summary(key: str) -> dict:
        groups: dict[str, list[int]] = {}
        for it, r in zip(items, right):
            groups.setdefault(it[key], []).append(r)
        return {g: {"items": len(v), "accuracy": float(np.mean(v))} for g, v in sorted(groups.items())}

    return {"items": len(items), "accuracy": float(np.mean(right)) if right else float("nan"),
            "by_kind": summary("kind"), "by_pronoun": summary("pronoun"), "by_class": summary("class"),
            "per_item": right, "margin": margin}


def render_scores(r: dict) -> str:
    """Plain-text summary of ``score_set``."""
    lines = [f"contrastive pronoun accuracy: {100 * r['accuracy']:.1f}% of {r['items']} items ({r['set']})"]
    for key in ("by_kind", "by_class", "by_pronoun"):
        lines.append("  " + key.replace("_", " ") + ": " + ", ".join(
            f"{g} {100 * v['accuracy']:.1f}% ({v['items']})" for g, v in r[key].items()))
    return "\n".join(lines) + "\n"
