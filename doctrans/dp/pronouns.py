"""Pronoun inventories for dropped-pronoun (DP) annotation (Wang 2019 thesis, §4.2.1).

* ``ENGLISH_PRONOUNS``: the trigger list, every lower-cased form of the English central
  pronouns of Table 4.2, with the rows (person/number/gender) and functions it fills.
* ``ZH_CANDIDATES``: the English → Chinese candidate map of Table 4.3. A possessive is the basic
  Chinese pronoun + 的, a reflexive the basic pronoun + 自己. Ambiguous English forms map to
  **all** their Chinese forms, which the LM then ranks (§4.3.1): ``you`` → 你/你们,
  ``they``/``them`` → 他们/她们/它们, ``her`` → 她/她的 (object or possessive adjective) …
* ``CHINESE_PRONOUNS``: the 30 Chinese forms of Table 4.3 (10 basic, 10 + 的, 10 + 自己), the
  DP vocabulary ``table43_all`` of docs/models.md §3.1.

Functions (four in Table 4.2, five columns): ``subject``, ``object``, ``possessive`` (both the
possessive adjective *my* and the possessive pronoun *mine*) and ``reflexive``. A form that fills
several functions (*you*, *it*: subject and object; *her*: object and possessive) has all of
them in ``EnglishPronoun.types``; ``pronoun_type`` joins them with ``/``.
"""
from __future__ import annotations

from dataclasses import dataclass

TYPES: tuple[str, ...] = ("subject", "object", "possessive", "reflexive")
POSSESSIVE_SUFFIX = "的"
REFLEXIVE_SUFFIX = "自己"

# Table 4.2 × Table 4.3, one row per category:
# (category, subject, object, possessive adjective, possessive, reflexive, Chinese basic forms).
# 3rd PL has one English row but three Chinese rows (他们 M / 她们 F / 它们 N).
_TABLE_4_2: tuple[tuple[str, str, str, str, str, str, tuple[str, ...]], ...] = (
    ("1SG", "i", "me", "my", "mine", "myself", ("我",)),
    ("2SG", "you", "you", "your", "yours", "yourself", ("你",)),
    ("3SGM", "he", "him", "his", "his", "himself", ("他",)),
    ("3SGF", "she", "her", "her", "hers", "herself", ("她",)),
    ("3SGN", "it", "it", "its", "its", "itself", ("它",)),
    ("1PL", "we", "us", "our", "ours", "ourselves", ("我们",)),
    ("2PL", "you", "you", "your", "yours", "yourselves", ("你们",)),
    ("3PL", "they", "them", "their", "theirs", "themselves", ("他们", "她们", "它们")),
)
_COLUMN_TYPES = ("subject", "object", "possessive", "possessive", "reflexive")

# Pronouns that are overt in the source but never inserted (not in Table 4.3): an English
# pronoun aligned to one of these is not a DP.  [I] docs/models.md §3.1, §5 (A22)
EXTRA_OVERT_PRONOUNS: frozenset[str] = frozenset({"您", "您们", "咱", "咱们", "俺", "俺们"})


@dataclass(frozen=True)
class EnglishPronoun:
    """One lower-cased English trigger form (Table 4.2) and its Chinese candidates (Table 4.3)."""

    form: str                       # e.g. "her"
    categories: tuple[str, ...]     # Table 4.2 rows, e.g. ("2SG", "2PL") for "you"
    types: tuple[str, ...]          # functions in TYPES order, e.g. ("object", "possessive")
    candidates: tuple[str, ...]     # Chinese forms in Table 4.3 order, e.g. ("她", "她的")

    @property
    def person(self) -> int:
        """1, 2 or 3 (the same for every row of a form)."""
        return int(self.categories[0][0])

    @property
    def numbers(self) -> tuple[str, ...]:
        """``("SG",)``, ``("PL",)`` or ``("SG", "PL")`` for *you*, *your*, *yours*."""
        return tuple(n for n in ("SG", "PL") if any(n in c for c in self.categories))


def _chinese_form(basic: str, type_: str) -> str:
    """Table 4.3: subject/object → basic form, possessive → +的, reflexive → +自己."""
    return basic + {"possessive": POSSESSIVE_SUFFIX, "reflexive": REFLEXIVE_SUFFIX}.get(type_, "")


def _build_english() -> dict[str, EnglishPronoun]:
    """Collect every form of ``_TABLE_4_2`` with all its rows, functions and candidates."""
    cats: dict[str, list[str]] = {}
    types: dict[str, set[str]] = {}
    cands: dict[str, list[str]] = {}
    for category, *forms, basics in _TABLE_4_2:
        for form, type_ in zip(forms, _COLUMN_TYPES):
            if category not in cats.setdefault(form, []):
                cats[form].append(category)
            types.setdefault(form, set()).add(type_)
            for basic in basics:
                zh = _chinese_form(basic, type_)
                if zh not in cands.setdefault(form, []):
                    cands[form].append(zh)
    return {
        f: EnglishPronoun(f, tuple(cats[f]), tuple(t for t in TYPES if t in types[f]), tuple(cands[f]))
        for f in cats
    }


ENGLISH_PRONOUNS: dict[str, EnglishPronoun] = _build_english()
TRIGGERS: frozenset[str] = frozenset(ENGLISH_PRONOUNS)
ZH_CANDIDATES: dict[str, tuple[str, ...]] = {f: p.candidates for f, p in ENGLISH_PRONOUNS.items()}
CHINESE_BASIC: tuple[str, ...] = tuple(b for row in _TABLE_4_2 for b in row[6])
CHINESE_PRONOUNS: tuple[str, ...] = tuple(
    b + s for s in ("", POSSESSIVE_SUFFIX, REFLEXIVE_SUFFIX) for b in CHINESE_BASIC
)
_CHINESE_SET = frozenset(CHINESE_PRONOUNS)


def is_chinese_pronoun(token: str, extended: bool = False) -> bool:
    """True if ``token`` is one of the 30 Chinese forms of Table 4.3 (我, 我的, 我自己, …).

    With ``extended``, the overt-only forms ``EXTRA_OVERT_PRONOUNS`` (您, 咱们, …) count too;
    the annotator uses this to decide that an English pronoun is already overt.
    """
    return token in _CHINESE_SET or (extended and token in EXTRA_OVERT_PRONOUNS)


def zh_candidates(english: str) -> tuple[str, ...]:
    """Chinese candidates of an English pronoun (Table 4.3), e.g. ``"They"`` → (他们, 她们, 它们).

    Raises ``KeyError`` if ``english`` is not a trigger form.
    """
    return ZH_CANDIDATES[english.lower()]


def pronoun_types(english: str) -> tuple[str, ...]:
    """All functions (``TYPES``) of an English pronoun, e.g. ``"her"`` → (object, possessive)."""
    return ENGLISH_PRONOUNS[english.lower()].types


def pronoun_type(english: str) -> str:
    """The function of an English pronoun as one string: ``"subject"``, …, ``"reflexive"``.

    Forms that fill several functions give them joined by ``/`` in ``TYPES`` order:
    *you*, *it* → ``"subject/object"``; *her* → ``"object/possessive"``. Raises ``KeyError``
    if ``english`` is not a trigger form.
    """
    return "/".join(pronoun_types(english))


# --- overt pronouns inside source tokens (annotate's overt matching) ----------------------------

# Chinese pronoun roots, longest first, and the Table 4.2 rows they express. jieba often glues a
# pronoun to its neighbour (我要, 我爱你, 你别), so overt pronouns are found inside tokens.
_ROOT_ROWS: dict[str, tuple[str, ...]] = {
    "我们": ("1PL",), "咱们": ("1PL",), "俺们": ("1PL",), "你们": ("2PL",), "您们": ("2PL",),
    "他们": ("3PL",), "她们": ("3PL",), "它们": ("3PL",),
    "我": ("1SG",), "俺": ("1SG",), "咱": ("1SG", "1PL"), "你": ("2SG",), "您": ("2SG",),
    "他": ("3SGM",), "她": ("3SGF",), "它": ("3SGN",),
}
PRONOUN_ROOTS: tuple[str, ...] = tuple(sorted(_ROOT_ROWS, key=len, reverse=True))
# Words that contain a root but are not pronouns ("other", "guitar", the expletive 他妈的).
NON_PRONOUN_WORDS: tuple[str, ...] = ("其他", "其它", "吉他", "他妈", "她妈", "自我")


def chinese_roots(token: str) -> list[str]:
    """Chinese pronoun roots inside ``token``, left to right, longest match first.

    ``"我爱你"`` → ``["我", "你"]``; ``"我们的"`` → ``["我们"]``; words of ``NON_PRONOUN_WORDS``
    (``"其他"``, ``"吉他"``) are skipped.
    """
    out, k = [], 0
    while k < len(token):
        skip = next((w for w in NON_PRONOUN_WORDS if token.startswith(w, k)), None)
        if skip:
            k += len(skip)
            continue
        for root in PRONOUN_ROOTS:
            if token.startswith(root, k):
                out.append(root)
                k += len(root)
                break
        else:
            k += 1
    return out


def root_rows(root: str) -> tuple[str, ...]:
    """The Table 4.2 rows a Chinese pronoun root expresses, e.g. ``"你们"`` → ``("2PL",)``."""
    return _ROOT_ROWS[root]


def roots_compatible(english: str, root: str) -> bool:
    """True if the Chinese root can express the English pronoun (same Table 4.2 row), e.g.
    ``you``/你们, ``my``/我, ``them``/它们, ``we``/咱们."""
    return bool(set(ENGLISH_PRONOUNS[english.lower()].categories) & set(_ROOT_ROWS[root]))
