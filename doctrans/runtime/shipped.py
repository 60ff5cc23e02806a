"""Models shipped with doctrans: fp16 checkpoints in the package, each with its model card, and
their index.

Layout (``SHIPPED_DIR`` = ``doctrans/shipped/``, installed as package data)::

    index.json      {"models": [{"name", "kind", "file", "sha256", "bytes", "card", "summary"[, "recaser"]}, …]}
    NAME.pt         a doctrans checkpoint (``runtime/checkpoint.py``) with fp16 weights, its BPE
                    codes and text settings inside (``text``), no optimizer state
    NAME.md         the model card: data, recipe and config, commit, updates, CPU-hours, test
                    BLEU, DP recall, pronoun count, CXMI, known limits
    *.recaser.LANG.json  a recaser table (``data/casing.py``) that entries name in ``recaser``: for
                    checkpoints shipped before doctrans learnt recasers (a newer checkpoint
                    carries its own in its text settings); ``recaser_for`` finds it at load time

``kind`` is ``"sentence"`` (a sentence-level model) or ``"document"`` (a context model; the
default of ``doctrans translate`` without ``-c``). At most one model of each kind is the default:
the first of its kind in the index. ``register`` adds an entry to an index (replacing an entry
of the same name); making a shippable file from a training checkpoint and shipping it
(``make_shippable``, ``ship``, ``doctrans models add``) is ``runtime/shipping.py``'s: this
module reads no checkpoint, so that loading one can consult the index — ``index_problem``
checks every checkpoint file ``runtime.checkpoint.verify_checkpoint`` loads.

A shipped checkpoint loads like any other: ``load_state_dict`` casts the fp16 tensors back to the
model's float32 parameters.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from doctrans.utils.io import atomic_write_text

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "shipped"
KINDS = ("document", "sentence")
_ENV = "DOCTRANS_SHIPPED_DIR"       # another directory of shipped models (tests, a user's own)


def shipped_dir() -> Path:
    """Where the shipped models are: ``$DOCTRANS_SHIPPED_DIR`` if set, else ``SHIPPED_DIR``."""
    return Path(os.environ.get(_ENV) or SHIPPED_DIR)


@dataclass(frozen=True)
class ShippedModel:
    """One entry of ``index.json``; ``root`` is the directory holding it."""

    name: str
    kind: str                       # "sentence" | "document"
    file: str                       # NAME.pt, relative to root
    sha256: str                     # of the file's bytes
    bytes: int
    card: str                       # NAME.md, relative to root
    summary: str                    # one line: what it is and what it scores
    root: str = ""
    recaser: str = ""               # a recaser table beside it for a checkpoint without one ("" = none)

    @property
    def path(self) -> Path:
        return Path(self.root) / self.file

    @property
    def card_path(self) -> Path:
        return Path(self.root) / self.card

    def verify(self) -> Path:
        """The checkpoint's path after checking its size and SHA-256 against the index. Raises
        FileNotFoundError (missing file) or ValueError (another file than the card describes)."""
        if not self.path.is_file():
            raise FileNotFoundError(f"shipped model {self.name}: {self.path} is missing")
        digest = sha256_of(self.path)
        if digest != self.sha256:
            raise ValueError(f"shipped model {self.name}: {self.path} has SHA-256 {digest[:12]}…, the index "
                             f"(and its card) describe {self.sha256[:12]}… — a different or damaged file")
        return self.path


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_INDEXES: dict[Path, tuple[tuple[int, int, int], list[ShippedModel]]] = {}   # index → (its file's stamp, models)


def shipped_models(root: str | Path | None = None) -> list[ShippedModel]:
    """The models of ``root``'s ``index.json`` (``shipped_dir()`` by default), in index order;
    [] without an index. The index is read once per process (again only when it changes: its
    inode, modification time or size; ``register`` replaces it atomically), so resolving a name,
    finding its recaser and listing the models read one record. Raises ValueError naming the file for an index that is not valid."""
    root = Path(root) if root is not None else shipped_dir()
    index = root / "index.json"
    try:
        st = index.stat()
    except OSError:
        return []
    if not index.is_file():
        return []
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    cached = _INDEXES.get(index)
    if cached is not None and cached[0] == stamp:
        return list(cached[1])
    models = _read_index(index, root)
    _INDEXES[index] = (stamp, models)
    return list(models)


def _read_index(index: Path, root: Path) -> list[ShippedModel]:
    """The models of ``index`` (``shipped_models``). Raises ValueError naming the file."""
    try:
        rows = json.loads(index.read_text(encoding="utf-8"))["models"]
        models = [ShippedModel(**{**row, "root": str(root)}) for row in rows]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{index}: not a valid index of shipped models ({e})") from None
    for m in models:
        if m.kind not in KINDS:
            raise ValueError(f"{index}: model {m.name} has kind {m.kind!r}, not one of {', '.join(KINDS)}")
    return models


def find(name: str, root: str | Path | None = None) -> ShippedModel:
    """The shipped model called ``name``. Raises ValueError listing the shipped names."""
    models = shipped_models(root)
    for m in models:
        if m.name == name:
            return m
    names = ", ".join(m.name for m in models) or "none"
    raise ValueError(f"no shipped model named {name!r} (shipped: {names}; `doctrans models` lists them)")


def default_model(kind: str, root: str | Path | None = None) -> ShippedModel:
    """The default shipped model of ``kind`` (the first of that kind in the index). Raises
    ValueError when none is shipped, saying to give a checkpoint with ``-c``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    for m in shipped_models(root):
        if m.kind == kind:
            return m
    raise ValueError(f"no {kind} model is shipped with this doctrans: give a checkpoint with -c "
                     "(train one with `make quickstart` or `make full`)")


def resolve(spec: str | None, kind: str = "document", root: str | Path | None = None) -> str:
    """The checkpoint path ``spec`` stands for: None → the default shipped model of ``kind``;
    the name of a shipped model → its file (checksum verified); anything else is returned as
    given (a checkpoint path or an export directory)."""
    if spec is None or spec == "":
        return str(default_model(kind, root).verify())
    if not Path(spec).exists():
        named = next((m for m in shipped_models(root) if m.name == spec), None)
        if named is not None:
            return str(named.verify())
    return spec


def index_problem(path: str | Path, shipped: bool, has_digest: bool) -> str | None:
    """What is wrong with the checkpoint file ``path`` as a shipped model, or None; the shipped
    indexes are ``shipped_dir()``'s and the package's (``SHIPPED_DIR``; one that is not valid is
    skipped here — ``doctrans models`` reports it). ``runtime.checkpoint.verify_checkpoint``
    asks this of every checkpoint it loads, so a shipped model is checked by its content,
    however it is named:

    * a file that lies where an index entry's file lies (``-c doctrans/shipped/NAME.pt``) is the
      model NAME and must have the SHA-256 the index gives it, as ``-c NAME`` requires;
    * a file written for shipping (``shipped``, ``make_shippable``) without a digest inside —
      the models shipped before checkpoints carried digests, and any copy of one — must have the
      SHA-256 of a file an index describes: a copy may lie anywhere under any name, but a
      changed byte is refused. (A file shipped since carries its own digest, checked wherever
      it lies.)
    """
    roots = list(dict.fromkeys([shipped_dir().resolve(), SHIPPED_DIR.resolve()]))
    models: list[ShippedModel] = []
    for root in roots:
        try:
            models += shipped_models(root)
        except ValueError:
            continue
    real = Path(path).resolve()
    for m in models:
        if m.path.resolve() == real:
            try:
                m.verify()
            except ValueError as e:
                return str(e)
            return None
    if shipped and not has_digest:
        digest = sha256_of(path)
        if digest not in {m.sha256 for m in models}:
            return (f"checkpoint {path} is damaged: it is a shipped model's file (without a digest inside) whose "
                    f"SHA-256 {digest[:12]}… is none of the shipped models' "
                    f"({', '.join(str(r / 'index.json') for r in roots)}); a model shipped by an older doctrans "
                    "is shipped again with `doctrans models add`")
    return None


def recaser_for(checkpoint: str | Path, root: str | Path | None = None):
    """The recaser (``data.casing.Recaser``) the index of ``root`` (``shipped_dir()`` by default)
    gives the shipped file ``checkpoint`` is, or None (not a shipped file, or no ``recaser``).
    A shipped file is the one at an entry's path or a copy of it elsewhere (same size and
    SHA-256; only a file of an entry's size is hashed). Raises FileNotFoundError / ValueError
    naming a recaser file the index names that is missing or not a recaser table."""
    from doctrans.data.casing import Recaser

    path = Path(checkpoint).resolve()
    cased = [m for m in shipped_models(root) if m.recaser]
    match = next((m for m in cased if m.path.resolve() == path), None)
    if match is None and any(m.bytes == path.stat().st_size for m in cased):
        digest = sha256_of(path)
        match = next((m for m in cased if m.sha256 == digest), None)
    return Recaser.load(Path(match.root) / match.recaser) if match is not None else None


def register(root: str | Path, model: ShippedModel) -> None:
    """Add ``model`` to ``root/index.json`` (replacing an entry of the same name; a new entry of
    a kind already shipped goes after it, so the default stays unless it is the one replaced)."""
    root = Path(root)
    rows = [asdict(m) for m in shipped_models(root) if m.name != model.name]
    old = [i for i, m in enumerate(shipped_models(root)) if m.name == model.name]
    row = {k: v for k, v in asdict(model).items() if k != "root"}
    for r in rows:
        r.pop("root", None)
    rows.insert(old[0], row) if old else rows.append(row)
    atomic_write_text(root / "index.json", json.dumps({"models": rows}, indent=2, ensure_ascii=False) + "\n")
