"""Models shipped with doctrans: fp16 checkpoints in the package, each with its model card.

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
the first of its kind in the index. ``make_shippable`` turns a training checkpoint into a
shippable file; ``register`` adds it to an index (replacing an entry of the same name).

A shipped checkpoint loads like any other: ``load_state_dict`` casts the fp16 tensors back to the
model's float32 parameters.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from doctrans.utils.io import atomic_write_text

log = logging.getLogger(__name__)

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
    inode, modification time or size: ``register`` replaces it atomically), so resolving a name, finding its recaser and listing the
    models read one record. Raises ValueError naming the file for an index that is not valid."""
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


def recaser_for(checkpoint: str | Path, root: str | Path | None = None):
    """The recaser (``data.casing.Recaser``) the index of ``root`` (``shipped_dir()`` by default)
    gives the shipped file ``checkpoint`` is, or None (not a shipped file, or no ``recaser``).
    Raises FileNotFoundError / ValueError naming a recaser file the index names that is
    missing or not a recaser table."""
    from doctrans.data.casing import Recaser

    path = Path(checkpoint).resolve()
    for m in shipped_models(root):
        if m.recaser and m.path.resolve() == path:
            return Recaser.load(Path(m.root) / m.recaser)
    return None


def make_shippable(checkpoint: str | Path, out: str | Path, recaser: str | Path | None = None) -> dict:
    """Write ``checkpoint`` as a shippable file at ``out``: floating-point weights in fp16, no
    optimizer state or RNG; vocabularies, text settings (BPE codes), config and training state
    kept; ``recaser`` (a table ``data/casing.py`` wrote) goes into the target side's text settings.
    Returns {"sha256", "bytes", "params"}. Raises ValueError for a checkpoint without ``text``
    (it could not translate without its dataset) or with non-finite weights."""
    from doctrans.runtime.checkpoint import load_checkpoint
    from doctrans.utils.io import atomic_torch_save

    ckpt = load_checkpoint(checkpoint)
    if not ckpt.get("text"):
        raise ValueError(f"{checkpoint} has no text settings (BPE codes): it would not translate on its own")
    weights = half_weights(ckpt["model"], checkpoint)
    keep = {k: v for k, v in ckpt.items() if k not in ("optimizer", "rng", "rng_ranks", "model")}
    if recaser is not None:
        from doctrans.data.casing import Recaser

        table = Recaser.load(recaser).to_dict()
        keep["text"] = {**keep["text"], "tgt": {**keep["text"]["tgt"], "recaser": table}}
    elif keep["text"].get("tgt", {}).get("lowercase") and not keep["text"].get("tgt", {}).get("recaser"):
        log.warning("%s carries no recaser: the shipped model will write lowercase (give a recaser table, "
                    "e.g. doctrans/shipped/tvsub.recaser.en.json, with --recaser)", checkpoint)
    atomic_torch_save({**keep, "model": weights, "shipped": True}, out)
    unique = {v.untyped_storage().data_ptr(): v.numel() for v in weights.values() if v.is_floating_point()}
    params = sum(unique.values())                                   # tied tensors counted once
    return {"sha256": sha256_of(out), "bytes": Path(out).stat().st_size, "params": params}


def half_weights(model: dict[str, torch.Tensor], source: str | Path = "") -> dict[str, torch.Tensor]:
    """``model`` (a state dict) with its floating-point tensors in fp16; tensors that share one
    storage (tied weights: the decoder embedding and the output projection) stay one tensor, so
    they are written once. Raises ValueError naming ``source`` and the key of a non-finite weight."""
    from doctrans.runtime.checkpoint import storage_key

    out, done = {}, {}
    for k, v in model.items():
        if v.is_floating_point():
            key = storage_key(v)
            if key not in done:
                if not torch.isfinite(v).all():
                    raise ValueError(f"{source}: weight {k} is not finite; not shipping it")
                done[key] = v.half()
            v = done[key]
        out[k] = v
    return out


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


def ship(checkpoint: str | Path, name: str, kind: str, card: str, summary: str,
         root: str | Path | None = None, replace: bool = False, max_mb: float = 30.0,
         recaser: str | Path | None = None) -> ShippedModel:
    """Ship ``checkpoint`` as ``NAME``: ``root/NAME.pt`` (``make_shippable``: fp16, no optimizer),
    ``root/NAME.md`` = ``card`` (markdown) followed by a "File" section (SHA-256, bytes,
    parameters), and its ``index.json`` entry (``register``); ``recaser``: a table put inside it. Raises ValueError for an unknown
    ``kind``, a name that is not a plain file stem, a name already shipped without ``replace``
    (a shipped model is replaced only when asked), or a file over ``max_mb`` MB (removed again)."""
    root = Path(root) if root is not None else shipped_dir()
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: expected one of {', '.join(KINDS)}")
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise ValueError(f"model name {name!r}: use letters, digits, '-', '_' and '.'")
    if not replace and any(m.name == name for m in shipped_models(root)):
        raise ValueError(f"{name} is already shipped in {root}: pass replace=True (--replace) to replace it")
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"{name}.pt"
    info = make_shippable(checkpoint, out, recaser)
    if info["bytes"] > max_mb * 1e6:
        out.unlink()
        raise ValueError(f"{checkpoint}: {info['bytes'] / 1e6:.1f} MB in fp16, over the {max_mb:g} MB a shipped "
                         f"model may take")
    atomic_write_text(root / f"{name}.md", card.rstrip() + f"\n\n## File\n\n`{name}.pt`: {info['bytes']:,} bytes, "
          f"{info['params']:,} parameters (fp16), SHA-256 `{info['sha256']}`.\n")
    model = ShippedModel(name, kind, f"{name}.pt", info["sha256"], info["bytes"], f"{name}.md", summary, str(root))
    register(root, model)
    return model
