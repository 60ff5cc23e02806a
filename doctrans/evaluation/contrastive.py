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
[I: no parser decides its case; an ungrammatical contrast only makes the item easier].

**Context-needed items** (issue 29): a DP item whose pronoun's form only the preceding
sentences decide, by one of two rules on the *segmented source* (what a model reads), each
recording its antecedent distance d (lines back, same document):

* ``agreement`` — a dropped 3rd-person pronoun (3SGM 他, 3SGF 她, 3SGN 它, 3PL 他们/她们/它们)
  whose current source has no overt 3rd-person pronoun at all, and whose nearest preceding line
  (d ≤ ``max_distance``) with an overt 3rd-person pronoun has exactly the item's class: the
  current sentence says nothing of gender or number, the last mentioned referent does;
* ``reply`` — a dropped 1SG (2) pronoun whose previous line (d = 1) has an overt 2 (1SG) pronoun
  and none of the item's class, and whose current source has no overt 2 (1SG): the answer to
  "你…?" is "(我)…" — the person flips between speakers.

[I: Chinese verbs do not inflect, so without an overt pronoun the current line cannot decide
these forms; the rules are strict rather than complete: a preceding name of known gender is not
used (no gender lexicon), antecedents further than ``max_distance`` are left out, and a line
whose nearest 3rd-person mention is of another class, or mixed, is not an item.] ``max_distance``
defaults to 3 (the HAN models' N); a model reading N < d previous sentences cannot see the
antecedent, so ``score_items_of`` also reports the items with d ≤ the model's N.

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

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from doctrans.dp.context_rules import (  # noqa: F401 - the shared rules, re-exported
    REPLY, THIRD_PERSON, english_class, pronoun_class, root_counts)
from doctrans.dp.pronouns import ENGLISH_PRONOUNS
from doctrans.utils.io import atomic_write_lines, atomic_write_text, read_lines

log = logging.getLogger(__name__)

CASES: dict[str, tuple[str, ...]] = {
    "subject": ("i", "you", "he", "she", "it", "we", "they"),
    "object": ("me", "you", "him", "her", "it", "us", "them"),
    "possessive_adjective": ("my", "your", "his", "her", "its", "our", "their"),
    "possessive_pronoun": ("mine", "yours", "his", "hers", "its", "ours", "theirs"),
    "reflexive": ("myself", "yourself", "himself", "herself", "itself", "ourselves", "themselves"),
}


def contrasts_of(form: str) -> list[str]:
    """Every other pronoun of each case ``form`` can fill, in ``CASES`` order, no repeats."""
    out: list[str] = []
    for forms in CASES.values():
        if form in forms:
            out += [f for f in forms if f != form and f not in out]
    return out


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


def context_need(seg: list[str], doc_ids: list[str], line: int, cls: str, max_distance: int = 3
                 ) -> tuple[str, int] | None:
    """Whether a DP item of class ``cls`` in ``line`` is context-needed (module docstring):
    (rule, antecedent distance d ≥ 1) or None. seg: the segmented source lines (no DPs);
    doc_ids: the document of each line (documents contiguous)."""
    cur = root_counts(seg[line])

    def previous(d: int) -> Counter | None:
        j = line - d
        return root_counts(seg[j]) if j >= 0 and doc_ids[j] == doc_ids[line] else None

    if cls in THIRD_PERSON:
        if any(cur[k] for k in THIRD_PERSON):
            return None
        for d in range(1, max_distance + 1):
            prev = previous(d)
            if prev is None:
                return None
            mentioned = {k for k in THIRD_PERSON if prev[k]}
            if mentioned:
                return ("agreement", d) if mentioned == {cls} else None
        return None
    other = REPLY.get(cls)
    prev = previous(1) if other else None
    if prev is not None and prev[other] and not prev[cls] and not cur[other]:
        return "reply", 1
    return None


def build_set(data: Path, split: str, out: Path, max_distance: int = 3) -> dict:
    """Build the contrastive set of TVsub ``split`` (dev or test) from ``data`` into ``out``;
    DP items get ``context_needed`` (bool), and those that are, ``rule`` and ``distance``
    (``context_need`` with ``max_distance`` ≥ 1); returns the summary. Raises
    FileNotFoundError naming a missing file and ValueError on line-count mismatches or
    ``max_distance`` < 1."""
    if max_distance < 1:
        raise ValueError(f"max_distance must be ≥ 1, got {max_distance}")
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
            need = context_need(seg, doc_ids, i, it["class"], max_distance) if it["kind"] == "dp" else None
            extra = {"context_needed": need is not None}
            if need is not None:
                extra.update(rule=need[0], distance=need[1])
            items.append({"line": i, **it, **extra})
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
               "context_needed": {"items": sum(it["context_needed"] for it in items), "max_distance": max_distance,
                                  "by_rule": dict(Counter(it["rule"] for it in items if it["context_needed"])),
                                  "by_distance": {str(k): v for k, v in sorted(Counter(
                                      it["distance"] for it in items if it["context_needed"]).items())}},
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
        if not it.get("contrasts"):
            raise ValueError(f"{path / 'items.jsonl'}:{k + 1}: the item has no contrast (nothing to score it against)")
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
              device: str = "auto", source: list[str] | None = None, ensemble: dict | None = None) -> dict:
    """Score a contrastive set directory with a checkpoint (see the module docstring) → the
    result of ``score_items_of``, plus ``checkpoint`` and ``set``. ``source``: other source
    lines for the set's lines, segmented (e.g. the DP-completed input a +DP model translates:
    ``experiments/dp_table.py``); default the set's raw ``src.zh``. ``ensemble``: as
    ``cxmi.load_scoring_set``'s. Raises ValueError if ``source`` has another line count."""
    from doctrans.evaluation.cxmi import load_scoring_set

    src, ref, docs, items = read_set(set_dir)
    if source is not None and len(source) != len(src):
        raise ValueError(f"{len(source)} source lines for the {len(src)} lines of {set_dir}")
    s = load_scoring_set(checkpoint, src if source is None else source, ref, docs, tokenized=source is not None,
                         ref_tokenized=True, device=device, ensemble=ensemble)
    return {"checkpoint": checkpoint, "set": str(set_dir),
            **score_items_of(s, ref, items, max_tokens=max_tokens, progress=progress)}


SCORES_VERSION = 1          # bump when score_set's results change: cached scores are then recomputed


def _scores_key(checkpoint: str, set_dir: Path, source: list[str] | None) -> str:
    """The identity of one scoring: the checkpoint file (resolved path, size, mtime), the set's
    items (size, mtime of items.jsonl) and the scored source (its SHA-1, or none)."""
    ck, items = Path(checkpoint).resolve(), set_dir / "items.jsonl"
    st, it = ck.stat(), items.stat()
    src = None if source is None else hashlib.sha1("\n".join(source).encode("utf-8")).hexdigest()
    key = {"v": SCORES_VERSION, "checkpoint": str(ck), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
           "items_size": it.st_size, "items_mtime_ns": it.st_mtime_ns, "source": src}
    return hashlib.sha1(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()


def table_columns(checkpoint: str, set_dir: Path, data: Path, source: list[str] | None = None,
                  reuse: bool = True) -> dict:
    """The contrastive columns of the context, DP and rec tables: the TVsub test set built into
    ``set_dir`` from ``data`` when it is not there yet (``build_set``), scored with ``checkpoint``
    (``score_set``, ``source`` as there) → {contrastive, contrastive_dp, contrastive_overt,
    contrastive_context_needed: accuracies in [0, 1] (NaN for a kind without items),
    contrastive_items, contrastive_context_needed_items, contrastive_per_item (1/0 per item,
    for McNemar's test between rows)}. A set built before the context-needed items existed is
    rebuilt. With ``reuse`` the columns are kept and reused (``cached_columns``)."""
    set_dir = Path(set_dir)
    summary = set_dir / "summary.json"
    if not (set_dir / "items.jsonl").is_file() or "context_needed" not in json.loads(
            summary.read_text(encoding="utf-8") if summary.is_file() else "{}"):
        build_set(Path(data), "test", set_dir)

    def columns(c: dict) -> dict:
        return {"contrastive": c["accuracy"],
                "contrastive_dp": c["by_kind"].get("dp", {}).get("accuracy", float("nan")),
                "contrastive_overt": c["by_kind"].get("overt", {}).get("accuracy", float("nan")),
                "contrastive_context_needed": c["context_needed"]["accuracy"],
                "contrastive_context_needed_items": c["context_needed"]["items"],
                "contrastive_items": c["items"], "contrastive_per_item": c["per_item"]}

    return cached_columns(checkpoint, set_dir, columns, source, reuse)


def cached_columns(checkpoint: str, set_dir: Path, columns: Callable[[dict], dict], source: list[str] | None = None,
                   reuse: bool = True, prefix: str = "") -> dict:
    """``columns`` (a ``score_set`` result → a table row's columns) of ``checkpoint`` on the set
    ``set_dir`` (``source`` as ``score_set``'s). With ``reuse`` they are kept in
    ``set_dir/scores/PREFIX KEY.json`` (KEY: the checkpoint file, the set's items and the source,
    ``_scores_key``) and a later call with the same key reads them instead of scoring again
    (minutes a row on a CPU); a set directory that cannot be written to only loses the reuse."""
    set_dir = Path(set_dir)
    cached = set_dir / "scores" / f"{prefix}{_scores_key(checkpoint, set_dir, source)}.json" if reuse else None
    if cached is not None and cached.is_file():
        log.info("contrastive scores of %s: reusing %s", checkpoint, cached)
        return json.loads(cached.read_text(encoding="utf-8"))
    cols = columns(score_set(checkpoint, set_dir, source=source))
    if cached is not None:
        try:
            cached.parent.mkdir(exist_ok=True)
            atomic_write_text(cached, json.dumps(cols) + "\n")
        except OSError as e:
            log.warning("contrastive scores not kept for reuse (%s): %s", cached, e)
    return cols


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

    spec = s.model.document                 # a sub-document model: every antecedent counted as in reach
    n_ctx = spec.context_sents if spec.context_sents else max_distance_of(items) if spec.context_block else 0

    def subset(keep) -> dict:
        v = [r for it, r in zip(items, right) if keep(it)]
        return {"items": len(v), "accuracy": float(np.mean(v)) if v else float("nan")}

    return {"items": len(items), "accuracy": float(np.mean(right)) if right else float("nan"),
            "by_kind": summary("kind"), "by_pronoun": summary("pronoun"), "by_class": summary("class"),
            "context_needed": subset(lambda it: it.get("context_needed", False)),
            "context_needed_in_reach": {**subset(lambda it: it.get("context_needed", False)
                                                 and it["distance"] <= n_ctx), "max_distance": int(n_ctx)},
            "per_item": right, "margin": margin}


def max_distance_of(items: list[dict]) -> int:
    """The largest antecedent distance of a set's context-needed items (0 without any)."""
    return max((it["distance"] for it in items if it.get("context_needed")), default=0)


def mcnemar(a: list[int], b: list[int]) -> dict:
    """McNemar's exact test (two-sided binomial on the discordant pairs; McNemar 1947) of two
    systems' per-item right/wrong ``a``, ``b`` (1/0 lists of one length) → {a_only, b_only,
    p_value}. Raises ValueError on different lengths."""
    from doctrans.evaluation.significance import sign_test_p

    if len(a) != len(b):
        raise ValueError(f"{len(a)} and {len(b)} items")
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    return {"a_only": a_only, "b_only": b_only, "p_value": sign_test_p(a_only, b_only)}


def compare(result: dict, baseline: dict, items: list[dict]) -> dict:
    """McNemar's test of ``result`` against ``baseline`` (two ``score_set`` results on the same
    set, whose ``items`` are given) on all items, the DP items and the context-needed items:
    {subset: {items, accuracy, baseline_accuracy, a_only (only ``result`` right), b_only, p_value}}."""
    out = {}
    for name, keep in (("all", lambda it: True), ("dp", lambda it: it["kind"] == "dp"),
                       ("context_needed", lambda it: it.get("context_needed", False))):
        idx = [k for k, it in enumerate(items) if keep(it)]
        a = [result["per_item"][k] for k in idx]
        b = [baseline["per_item"][k] for k in idx]
        out[name] = {"items": len(idx), "accuracy": float(np.mean(a)) if a else float("nan"),
                     "baseline_accuracy": float(np.mean(b)) if b else float("nan"), **mcnemar(a, b)}
    return out


def render_scores(r: dict) -> str:
    """Plain-text summary of ``score_set``."""
    lines = [f"contrastive pronoun accuracy: {100 * r['accuracy']:.1f}% of {r['items']} items ({r['set']})"]
    for key in ("by_kind", "by_class", "by_pronoun"):
        lines.append("  " + key.replace("_", " ") + ": " + ", ".join(
            f"{g} {100 * v['accuracy']:.1f}% ({v['items']})" for g, v in r[key].items()))
    cn, reach = r.get("context_needed"), r.get("context_needed_in_reach")
    if cn and cn["items"]:
        lines.append(f"  context-needed: {100 * cn['accuracy']:.1f}% ({cn['items']}); antecedent within the model's "
                     f"{reach['max_distance']} context sentences: {100 * reach['accuracy']:.1f}% ({reach['items']})")
    for name, c in r.get("compare", {}).items():
        lines.append(f"  vs {r['baseline']} on {name} items ({c['items']}): {100 * c['accuracy']:.1f}% vs "
                     f"{100 * c['baseline_accuracy']:.1f}%, right only here {c['a_only']}, only there {c['b_only']}, "
                     f"McNemar p = {c['p_value']:.3f}")
    return "\n".join(lines) + "\n"
