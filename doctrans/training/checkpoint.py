"""A run's checkpoints as training sees them: whether a checkpoint may be resumed under the
current config (``check_resume_compatible``: only the keys of ``RESUME_MAY_CHANGE`` may differ),
the step checkpoints a run keeps (``step_checkpoints``, ``train.keep_last``) and averaging several
into one to translate (``average_checkpoints``, ``doctrans average``). ``Trainer.save``
(``training/trainer.py``) writes checkpoints, atomically.

Reading a checkpoint file — its contents, the safe ``torch.load``, the version and translation
checks — is ``runtime/checkpoint.py``'s job, for every consumer (training, inference, the DP
generators); this module reads through its ``load_checkpoint``.
"""
from __future__ import annotations

from pathlib import Path

from doctrans.config import from_dict, to_dict
from doctrans.runtime.checkpoint import load_checkpoint
from doctrans.runtime.checkpoint_digest import storage_key

# Config fields that may change when resuming (they do not change what an update computes).
RESUME_MAY_CHANGE = {
    "train.max_steps", "train.max_epochs", "train.max_time_min", "train.max_cpu_min", "train.patience",
    "train.eval_every", "train.save_every", "train.log_every", "train.threads",
    "train.eval_bleu", "train.eval_beam", "train.eval_max_sentences", "run_dir",
    "train.eval_every_epochs", "train.save_every_epochs", "train.device", "train.tensorboard",
    "train.plot", "train.keep_last", "train.keep_every", "train.eval_cxmi_sentences", "train.max_nonfinite",
}


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def check_resume_compatible(saved, current) -> None:
    """Raise ValueError listing every changed key outside ``RESUME_MAY_CHANGE``. ``saved`` is
    the checkpoint's config, as a dict (parsed with ``from_dict(type(current), …)``, so keys it
    lacks — added to the dataclasses since — count as their defaults) or already parsed."""
    if isinstance(saved, dict):
        saved = from_dict(type(current), saved, source="checkpoint")
    a, b = _flatten(to_dict(saved)), _flatten(to_dict(current))
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k not in RESUME_MAY_CHANGE)
    if diff:
        detail = ", ".join(f"{k}: {a.get(k)!r} → {b.get(k)!r}" for k in diff)
        raise ValueError(f"cannot resume: config differs from the checkpoint's ({detail})")


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """``run_dir/checkpoint{STEP}.pt`` (``train.keep_last``), oldest first (by STEP)."""
    found = []
    for p in Path(run_dir).glob("checkpoint*.pt"):
        step = p.stem[len("checkpoint"):]
        if step.isdigit():
            found.append((int(step), p))
    return [p for _, p in sorted(found)]


def average_checkpoints(paths: list[str | Path]) -> dict:
    """The element-wise mean of the models of ``paths`` (fairseq's ``average_checkpoints.py``;
    Vaswani et al. 2017 §6.1 average the last 5 checkpoints), as a checkpoint to translate: the
    last path's config, vocabularies, text settings and state, no optimizer. Floating tensors
    are averaged in float64 and cast back; other tensors (integer buffers) come from the last.

    Tensors that are one tensor in the last checkpoint (tied weights: the decoder embedding and
    the output projection) are one tensor in the average, so it saves (and ships) at its size.

    Raises ValueError for no paths, or models whose parameter names or shapes differ (naming the
    first mismatch and the two files); load errors as ``load_checkpoint``.
    """
    if not paths:
        raise ValueError("average_checkpoints: no checkpoints given")
    last = load_checkpoint(paths[-1])                   # one checkpoint in memory at a time
    ref = last["model"]
    first: dict[tuple, str] = {}
    canon = {k: first.setdefault(storage_key(v), k) for k, v in ref.items()}   # tied keys → the first
    total = {k: v.double() for k, v in ref.items() if canon[k] == k and v.is_floating_point()}
    for p in paths[:-1]:
        m = load_checkpoint(p)["model"]
        if set(m) != set(ref):
            diff = sorted(set(m) ^ set(ref))[0]
            raise ValueError(f"cannot average {p} with {paths[-1]}: parameter {diff!r} is in one only")
        for k in total:
            if m[k].shape != ref[k].shape:
                raise ValueError(f"cannot average {p} with {paths[-1]}: {k} has shape "
                                 f"{tuple(m[k].shape)} vs {tuple(ref[k].shape)}")
            total[k] += m[k].double()
    mean = {k: (total[k] / len(paths)).to(ref[k].dtype) if k in total else ref[k] for k in set(canon.values())}
    model = {k: mean[canon[k]] for k in ref}
    out = {k: v for k, v in last.items() if k not in ("optimizer", "rng", "rng_ranks")}
    out["model"] = model
    out["averaged"] = [str(p) for p in paths]
    return out
