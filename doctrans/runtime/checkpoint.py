"""Reading a checkpoint file, for every consumer — resuming training, translation and
validation, the DP generators: ``load_torch_file`` (``torch.load(weights_only=True)`` with errors
naming the file), ``load_checkpoint``, ``config_of`` and ``check_translation_checkpoint`` (the
checks before a model is built to translate). Checkpoints hold tensors and primitive types only,
so that ``weights_only=True`` works.

A checkpoint holds ``model``, ``optimizer``, ``state`` (TrainState), ``config`` (the resolved
ExperimentConfig), ``vocab`` (source/target token lists), ``rng`` (torch CPU RNG state),
``prepared`` (the dataset dir it was trained on) and ``version``; an NMT checkpoint also
``text`` (``{"src": …, "tgt": …}``, each ``TextProcessor.settings()``: lowercasing and the BPE
codes' text), so that it translates anywhere without its dataset. ``Trainer.save``
(``training/trainer.py``) writes them, atomically; what training does with a run's checkpoints
(resume checks, the step checkpoints, averaging) is ``training/checkpoint.py``.

Every checkpoint doctrans writes (``checkpoint_write.save_checkpoint``: training, ``doctrans
average``, shipping) also holds ``digest`` = ``{"scheme": "doctrans-1", "sha256": HEX}``, the
``content_digest`` of everything else in it (``checkpoint_digest.py``: every tensor — the model,
the optimizer state, the RNG states — and every other value), and ``load_torch_file`` checks it
(``verify_checkpoint``), so a changed byte is refused naming the file instead of translating or
resuming with it silently. A checkpoint without a digest (written before digests, or by a
script's own ``torch.save``) loads as before, except a shipped model's file, checked against the
shipped index (``shipped.index_problem``), as is any file lying where the index puts one.
``DOCTRANS_NO_VERIFY_CHECKPOINT=1`` loads a damaged file anyway, with a warning (forensics).
[choice: an environment variable, not a flag: checkpoints are loaded by every command, the
Python API, the server and each torchrun rank, which all see the environment.]
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import pickle
import re
import zipfile
from pathlib import Path

import torch

from doctrans.config import ExperimentConfig, experiment_from_dict
from doctrans.runtime.checkpoint_digest import DIGEST_KEY, DIGEST_SCHEME, content_digest
from doctrans.runtime.shipped import index_problem
from doctrans.utils.errors import one_line, short_repr

log = logging.getLogger(__name__)

NO_VERIFY_ENV = "DOCTRANS_NO_VERIFY_CHECKPOINT"    # "1": load a checkpoint that fails verification


class DamagedCheckpoint(ValueError):
    """A checkpoint file whose contents are not those written (``verify_checkpoint``)."""


def load_torch_file(path: str | Path, required: tuple[str, ...] = ()) -> dict:
    """``torch.load(weights_only=True)`` of a doctrans checkpoint, with errors a user can act on.

    Shared by ``load_checkpoint`` and the DP generator loader. Raises FileNotFoundError naming
    a missing path; ValueError "PATH is not a doctrans checkpoint" for a file that is not a torch
    zip archive (random bytes, text, a legacy pickle), a zip archive torch cannot read, or a
    loaded object that is not a dict holding every key of ``required``; ValueError "PATH is
    truncated or corrupt" for a torch archive that cannot be read to the end; DamagedCheckpoint
    (a ValueError) from ``verify_checkpoint``. The digest entry is checked and removed: what
    it returns is the checkpoint's content.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        raise ValueError(f"{path} is not a doctrans checkpoint (not a torch zip archive)")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is truncated or corrupt (incomplete zip archive; copy or save it again)")
    try:
        with zipfile.ZipFile(path) as z:
            is_torch = any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f"{path} is truncated or corrupt ({e})") from None
    if not is_torch:
        raise ValueError(f"{path} is not a doctrans checkpoint (a zip archive without torch data)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path} is truncated or corrupt ({str(e).splitlines()[0]})") from None
    except pickle.UnpicklingError:
        raise ValueError(f"{path} is not a doctrans checkpoint (torch data of other types)") from None
    missing = [k for k in required if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise ValueError(f"{path} is not a doctrans checkpoint (no {', '.join(missing)})")
    if isinstance(ckpt, dict):
        verify_checkpoint(ckpt, path)
    return ckpt


def verify_checkpoint(ckpt: dict, path: str | Path) -> None:
    """Check that ``ckpt``, loaded from ``path``, holds what was written, then remove its digest
    entry. With a ``digest`` (``checkpoint_write.save_checkpoint`` writes one): its
    ``content_digest`` must match. Without one, a file written for shipping (``shipped``) must be
    a file a shipped index describes (``shipped.index_problem``), and a file that lies where an
    index entry's file lies must be that file, digest or not. Raises DamagedCheckpoint naming
    ``path``, unless ``DOCTRANS_NO_VERIFY_CHECKPOINT`` is set (not "0"): then a warning is logged
    and the checkpoint is used as it is."""
    digest = ckpt.get(DIGEST_KEY)
    problem = None
    if digest is not None:
        if not (isinstance(digest, dict) and digest.get("scheme") == DIGEST_SCHEME
                and isinstance(digest.get("sha256"), str)):
            problem = (f"checkpoint {path} is damaged or of a newer doctrans: its digest entry "
                       f"{short_repr(digest)} is not one this doctrans reads")
        else:
            try:
                actual = content_digest(ckpt)
            except (TypeError, ValueError, RecursionError) as e:      # keys JSON cannot write, a cycle
                actual = f"none: {one_line(e, 200)}"
            if actual != digest["sha256"]:
                problem = (f"checkpoint {path} is damaged: its contents do not match the digest written with it "
                           "(copy it again or use an earlier checkpoint; a script that edits a checkpoint saves "
                           "it with doctrans.runtime.checkpoint_write.save_checkpoint, which writes a new digest)")
    problem = problem or index_problem(path, shipped=bool(ckpt.get("shipped")), has_digest=digest is not None)
    ckpt.pop(DIGEST_KEY, None)
    if problem is None:
        return
    if os.environ.get(NO_VERIFY_ENV, "") not in ("", "0"):
        log.warning("%s — loading it anyway (%s is set)", problem, NO_VERIFY_ENV)
        return
    raise DamagedCheckpoint(f"{problem}; {NO_VERIFY_ENV}=1 loads it anyway (forensics)")


def load_checkpoint(path: str | Path) -> dict:
    """Load an NMT/training-loop checkpoint with ``weights_only=True`` (``load_torch_file``).

    Raises FileNotFoundError naming the path; ValueError "… is not a doctrans checkpoint" or
    "… is truncated or corrupt" (see ``load_torch_file``).
    """
    return load_torch_file(path, required=("model", "config"))


def config_of(ckpt: dict) -> ExperimentConfig:
    """The resolved ``ExperimentConfig`` a checkpoint was trained with. Raises ConfigError for
    keys this doctrans does not know."""
    return experiment_from_dict(ckpt["config"], source="checkpoint")


def _version_tuple(v) -> tuple[int, ...] | None:
    if not isinstance(v, str) or not re.fullmatch(r"\d+(\.\d+){0,2}([.+-][0-9A-Za-z.+-]*)?", v):
        return None
    return tuple(int(x) for x in re.match(r"\d+(\.\d+){0,2}", v).group(0).split("."))


_RANGES = {torch.arange, torch.range, torch.linspace, torch.logspace}


def _range_numel(func, args, kwargs) -> int | None:
    """Elements a range factory (``arange``/``range``/``linspace``/``logspace``) would allocate, or
    None when its arguments are not plain numbers."""
    nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if len(nums) != len(args):
        return None
    if func in (torch.linspace, torch.logspace):
        steps = nums[2] if len(nums) > 2 else kwargs.get("steps")
        return int(steps) if isinstance(steps, int) else None
    if not 1 <= len(nums) <= 3:
        return None
    start, end, step = (0, nums[0], 1) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) == 3 else 1)
    return max(0, math.ceil((end - start) / step)) + (func is torch.range)


class _AllocationBound(torch.overrides.TorchFunctionMode):
    """Counts the elements tensor factories (``torch.empty``, ``zeros``, ``arange``, … — the
    functions ``torch.device(...)`` redirects) are asked for, and raises ``_TooLarge`` *before*
    the allocation that would take the total past ``limit``. The size of a call is read from its
    arguments (ranges) or from the same call on the ``meta`` device (no memory). Replaces building
    the model on ``meta``: ``normal_``, ``sin``, ``cat`` … on meta tensors are Python
    decompositions that import ``torch._dynamo`` and sympy (≈ 70 MB resident, seconds of import
    on every translation). A torch-function mode is local to its thread."""

    def __init__(self, limit: int):
        super().__init__()
        from torch.utils._device import _device_constructors
        self.limit, self.total, self.factories = limit, 0, _device_constructors()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.factories and str(kwargs.get("device", "cpu")) != "meta":
            n = _range_numel(func, args, kwargs) if func in _RANGES else None
            shape = (n,)
            if n is None:
                probe = func(*args, **{**kwargs, "device": "meta"})
                shape = tuple(probe.shape) if isinstance(probe, torch.Tensor) else (0,)
                n = math.prod(shape)
            if self.total + n > self.limit:
                raise _TooLarge(func.__name__, n, shape)
            self.total += n
        return func(*args, **kwargs)


class _TooLarge(Exception):
    def __init__(self, name: str, numel: int, shape):
        super().__init__(name, numel, shape)
        self.name, self.numel, self.shape = name, numel, tuple(shape)


def check_translation_checkpoint(ckpt: dict, path: str | Path, context=None) -> ExperimentConfig:
    """Validate an NMT checkpoint (as ``load_checkpoint`` returns it) before a model is built from
    it, and return its config. ``context``: the context model config to build with (a
    ``--context-option`` override), default the checkpoint's. ``build_translation_model`` checks
    the same and returns the model it built for the check, its weights loaded.

    Checked, each failure a ValueError naming ``path``: ``version`` (a doctrans version no newer
    in its major number than this one), ``kind`` ("nmt" when present), ``vocab`` (lists of token
    strings), ``text`` (absent, or ``{"src": settings, "tgt": settings}``), ``config`` (this
    doctrans' schema), the model's sizes — the model the config describes is built on the CPU
    with its allocations bounded by ``_AllocationBound`` (twice the elements the weights hold, plus
    64 Mi), and every tensor of ``model`` must have the shape it expects, so a tampered
    ``d_ff=1e8`` is refused before 12 GB are asked for —, and finite weights
    (``checkpoint_write.NonFiniteWeights`` for NaN/inf: a diverged training).
    """
    return _checked_model(ckpt, path, lambda exp: exp.context if context is None else context)[0]


def build_translation_model(ckpt: dict, path: str | Path, context_options=()) -> tuple[ExperimentConfig, object,
                                                                                      torch.nn.Module]:
    """The checks of ``check_translation_checkpoint``, then the model they built (on the CPU, in
    training mode) with the checkpoint's weights loaded: (config, the context config it was built
    with — the checkpoint's with ``context_options`` ["KEY=VALUE", …] (``--context-option``)
    applied —, model). One build where checking and loading used to build twice. Raises
    ValueError as the checks do, ``config.ConfigError`` for a bad context option."""
    from doctrans.config import override_context

    chosen = []

    def context_of(exp: ExperimentConfig):
        chosen.append(override_context(exp.context, list(context_options)))
        return chosen[0]

    exp, model = _checked_model(ckpt, path, context_of)
    model.load_state_dict(ckpt["model"])
    return exp, chosen[0], model


def _checked_model(ckpt: dict, path: str | Path, context_of) -> tuple[ExperimentConfig, torch.nn.Module]:
    """``check_translation_checkpoint``'s checks; the model built with context config
    ``context_of(config)``, weights not loaded."""
    from doctrans.version import __version__
    from doctrans.models.build import build_model
    from doctrans.runtime.checkpoint_write import check_finite

    where = str(path)
    version = ckpt.get("version", "0")
    ours, theirs = _version_tuple(__version__), _version_tuple(version)
    if theirs is None or theirs[0] > ours[0]:
        raise ValueError(f"{where}: unknown checkpoint format version {short_repr(version)} (this doctrans "
                         f"{__version__} reads checkpoints of doctrans {ours[0]}.x and older)")
    if ckpt.get("kind", "nmt") != "nmt":
        raise ValueError(f"{where} is a {short_repr(ckpt.get('kind'))} checkpoint, not a translation model")
    vocab = ckpt.get("vocab")
    if not (isinstance(vocab, dict) and all(isinstance(vocab.get(s), list) and vocab[s]
                                            and all(isinstance(t, str) for t in vocab[s]) for s in ("src", "tgt"))):
        raise ValueError(f"{where}: 'vocab' must hold the src and tgt token lists, got {short_repr(vocab)}")
    text = ckpt.get("text", {})
    if "text" in ckpt and not (isinstance(text, dict) and all(isinstance(text.get(s), dict) for s in ("src", "tgt"))):
        raise ValueError(f"{where}: 'text' must hold the src and tgt text settings, got {short_repr(text)}")
    if not isinstance(ckpt.get("model"), dict) or not all(isinstance(v, torch.Tensor) for v in ckpt["model"].values()):
        raise ValueError(f"{where}: 'model' must be a state dict of tensors")
    try:
        exp = config_of(ckpt)
    except ValueError as e:
        raise ValueError(f"{where}: its config does not fit this doctrans ({e})") from None
    model_cfg = exp.model
    bad = {f.name: getattr(model_cfg, f.name) for f in dataclasses.fields(model_cfg)
           if f.type in ("int", int) and not (isinstance(getattr(model_cfg, f.name), int)
                                              and not isinstance(getattr(model_cfg, f.name), bool))}
    if bad:
        raise ValueError(f"{where}: model sizes must be integers: "
                         f"{', '.join(f'model.{k}={short_repr(v)}' for k, v in bad.items())}")
    got = ckpt["model"]
    held = sum(t.numel() for t in got.values())
    limit = 2 * held + (1 << 26)              # the weights twice (temporaries of initialisation) + 64 Mi for buffers
    context = context_of(exp)
    try:
        with _AllocationBound(limit):
            model = build_model(model_cfg, len(vocab["src"]), len(vocab["tgt"]), context=context)
            expected = {k: v.shape for k, v in model.state_dict().items()}
    except _TooLarge as e:
        raise ValueError(f"{where}: its weights do not match its config: building it asks {e.name} for a tensor "
                         f"of shape {e.shape}, past {limit:,} elements in all (its weights hold {held:,})") from None
    except (ValueError, TypeError, RuntimeError, ZeroDivisionError, OverflowError) as e:
        raise ValueError(f"{where}: its config does not describe a model this doctrans builds ({one_line(e, 300)})") from None
    missing, unexpected = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{where}: its weights do not match its config (missing {short_repr(missing)}, "
                         f"unexpected {short_repr(unexpected)})")
    wrong = [(k, tuple(got[k].shape), tuple(v)) for k, v in expected.items() if got[k].shape != v]
    if wrong:
        k, g, e = wrong[0]
        raise ValueError(f"{where}: its weights do not match its config: {k} has shape {g}, the config says {e}"
                         + (f" ({len(wrong)} tensors differ)" if len(wrong) > 1 else ""))
    try:
        check_finite(got, where)
    except FloatingPointError as e:
        raise ValueError(f"{e}; translate with an earlier checkpoint") from None
    return exp, model
