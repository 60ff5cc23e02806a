"""The rows of the whole-corpus table (issue 74; ``doctrans table full``, ``experiments/full_table.py``):
the spec file (``pipelines/full_table.yaml``), each row's status and its training command.

**The spec** (YAML): ``updates`` (every trained row's update count), ``init`` (the checkpoint every
row starts from: a shipped model's name or a path), ``recipe`` (``KEY=VALUE`` training overrides
of every row) and ``rows``, in table order (the first is the control), each a mapping of
``name`` (required; a file-name-safe word, unique), ``title`` (default: the name), and one of

* ``pipeline``: a training YAML — a row trained from ``init`` (or, with ``init: ROW``, from row
  ROW's ``last.pt``: ROW must come earlier) with the recipe and the row's ``set`` overrides;
* ``decode_of: ROW``: row ROW's checkpoint decoded with this row's ``translate`` options;
* ``waits: TEXT``: a row listed, not trained (TEXT says why);

and ``translate`` (``DPOptions`` fields of ``inference.config`` as ``KEY=VALUE``: dp_generator,
dp_input, dp_nbest, dp_combine, rerank …), ``needs`` (``dp``: ``PREP/dp/meta.json``, the
annotate-dp corpus; ``jk``: ``JK/meta.json``, the annotate-dp jackknife; JK default PREP/dp_jk3).
``{jk}`` in ``set``/``translate`` is JK, ``{jk_generator}`` the contents of ``JK/generator.txt``.
``load_spec`` raises ``SpecError`` (a ValueError) naming the file and the row.

**Status** (``row_statuses``): a trained row is *done* when ``RUNS/NAME/last.pt``'s ``state.step``
reaches ``updates``, else it *waits* (needs not met, its ``init`` row not done, or ``waits``) or is
*unfinished* (N of U updates) or *not started*; a ``decode_of`` row is done when its row is. A row
not done that the repository keeps as scored (``read_kept``: ``KEEP/rows.json`` and
``KEEP/NAME.en``, written by an earlier table, perhaps on another machine) is *kept*: the table
carries it (its translation re-scored, its model columns as kept) and ``--train`` does not train
it again, so a lost machine costs only the row in progress (to train a kept row again, take it
out of ``KEEP/rows.json``). A row trained on from a kept row without ``RUNS/ROW/last.pt`` waits.

**Training** (``train_rows``): each row not done whose needs are met, in spec order, as
``train_command``'s child process (``doctrans train``; ``--resume`` when ``last.pt`` exists, so a
row continues exactly where it stopped). A child's non-zero exit is logged and the next row
goes on; SIGTERM / SIGINT to this process is passed to the child once (it saves ``last.pt``),
then ``runtime.signals.Interrupted`` is raised.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import re
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from doctrans.runtime.signals import STOP_SIGNALS, Interrupted

logger = logging.getLogger(__name__)

SPEC_KEYS = ("updates", "init", "recipe", "rows")
ROW_KEYS = ("name", "title", "pipeline", "set", "translate", "needs", "init", "decode_of", "waits")
NEEDS = ("dp", "jk")
# DPOptions fields a row may set (the table sets dp_docs / dp_out itself)
NOT_ROW_OPTIONS = ("dp_docs", "dp_out", "write_lattice")


class SpecError(ValueError):
    """A malformed table spec (the message names the file and the row)."""


@dataclass(frozen=True)
class Row:
    """One row of the spec (module doc)."""

    name: str
    title: str
    pipeline: str = ""
    set: tuple[str, ...] = ()
    translate: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    init: str = ""
    decode_of: str = ""
    waits: str = ""

    @property
    def trained(self) -> bool:
        """Whether the table trains this row (it has a pipeline and does not wait)."""
        return bool(self.pipeline) and not self.waits


@dataclass(frozen=True)
class Spec:
    """The table spec (module doc); ``path`` the file it was read from."""

    path: Path
    updates: int
    init: str
    recipe: tuple[str, ...]
    rows: tuple[Row, ...]

    def row(self, name: str) -> Row:
        return next(r for r in self.rows if r.name == name)


def row_option_fields() -> dict:
    """The ``DPOptions`` fields a row's ``translate`` may set: name → dataclass field."""
    from doctrans.inference.config import DPOptions

    return {f.name: f for f in dataclasses.fields(DPOptions) if f.name not in NOT_ROW_OPTIONS}


def typed_option(key: str, value: str) -> object:
    """A ``translate`` value as its ``DPOptions`` field's type (int, float or str); raises ValueError
    for an unknown key, a value of the wrong type or one outside the field's choices."""
    fields = row_option_fields()
    if key not in fields:
        raise ValueError(f"{key!r} is not a translate option (one of {', '.join(fields)})")
    meta = fields[key].metadata.get("setting", {})
    kind = meta.get("type") or type(fields[key].default)
    if kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            raise ValueError(f"{key}={value}: not {'an integer' if kind is int else 'a number'}") from None
    if meta.get("choices") and value not in meta["choices"]:
        raise ValueError(f"{key}={value}: expected one of {', '.join(meta['choices'])}")
    return value


def _strings(value, what: str, fail) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        fail(f"{what} must be a list of strings")
    return tuple(value)


def load_spec(path: str | Path) -> Spec:
    """Read and check a table spec (module doc). Raises SpecError naming ``path`` and the row: a
    YAML error, an unknown key, a row without a name, a repeated name, a row with neither or both
    of pipeline / decode_of (and no waits), an ``init`` or ``decode_of`` naming no (trained) row, an
    ``init`` row not earlier in the table, a pipeline file that does not exist, an unknown need, a
    bad ``set`` / ``translate`` pair."""
    import yaml

    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise SpecError(f"{where}: not YAML ({getattr(e, 'problem', None) or e}; a value with {{ or : in a "
                        "[…] list is quoted: \"data.src_dir={jk}\")") from None
    if not isinstance(tree, dict):
        raise SpecError(f"{path}: expected a mapping with {', '.join(SPEC_KEYS)}")

    def fail(msg: str, where: str = "") -> None:
        raise SpecError(f"{path}: {where + ': ' if where else ''}{msg}")

    unknown = sorted(set(tree) - set(SPEC_KEYS))
    if unknown:
        fail(f"unknown key {unknown[0]!r} (known: {', '.join(SPEC_KEYS)})")
    updates = tree.get("updates")
    if not isinstance(updates, int) or isinstance(updates, bool) or updates < 1:
        fail(f"updates must be a positive integer, not {updates!r}")
    init = tree.get("init")
    if not isinstance(init, str) or not init:
        fail("init (the checkpoint every row starts from: a shipped model's name or a path) is missing")
    recipe = _strings(tree.get("recipe", []), "recipe", fail)
    for kv in recipe:
        if "=" not in kv:
            fail(f"recipe entry {kv!r} is not KEY=VALUE")
    if not isinstance(tree.get("rows"), list) or not tree["rows"]:
        fail("rows must be a non-empty list")
    rows: list[Row] = []
    for k, item in enumerate(tree["rows"], 1):
        where = f"row {k}"
        if not isinstance(item, dict):
            fail("expected a mapping (name, title, pipeline …)", where)
        name = item.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            fail("no name" if name is None else f"name {name!r} is not a word of letters, digits, '.', '_', '-'",
                 where)
        where = f"row {name!r}"
        bad = sorted(set(item) - set(ROW_KEYS))
        if bad:
            fail(f"unknown key {bad[0]!r} (known: {', '.join(ROW_KEYS)})", where)
        if any(r.name == name for r in rows):
            fail("a second row of this name", where)
        fields = {key: item[key] for key in ("title", "pipeline", "init", "decode_of", "waits") if key in item}
        for key, v in fields.items():
            if not isinstance(v, str) or not v:
                fail(f"{key} must be a non-empty string", where)
        row = Row(name=name, title=fields.get("title", name), pipeline=fields.get("pipeline", ""),
                  set=_strings(item.get("set", []), "set", lambda m: fail(m, where)),
                  translate=_strings(item.get("translate", []), "translate", lambda m: fail(m, where)),
                  needs=_strings(item.get("needs", []), "needs", lambda m: fail(m, where)),
                  init=fields.get("init", ""), decode_of=fields.get("decode_of", ""), waits=fields.get("waits", ""))
        if not row.waits and bool(row.pipeline) == bool(row.decode_of):
            fail("give one of pipeline (a trained row), decode_of (another row's model decoded) or waits", where)
        if row.pipeline and not Path(row.pipeline).is_file():
            fail(f"pipeline {row.pipeline!r} not found", where)
        if row.decode_of and row.set:
            fail("a decode_of row trains nothing: no set", where)
        for need in row.needs:
            if need not in NEEDS:
                fail(f"unknown need {need!r} (known: {', '.join(NEEDS)})", where)
        for kv in row.set:
            if "=" not in kv:
                fail(f"set entry {kv!r} is not KEY=VALUE", where)
        for kv in row.translate:
            key, sep, value = kv.partition("=")
            if not sep:
                fail(f"translate entry {kv!r} is not KEY=VALUE", where)
            try:
                if key not in row_option_fields() or "{" not in value:   # (a placeholder is checked when filled)
                    typed_option(key, value)
            except ValueError as e:
                fail(f"translate {kv!r}: {e}", where)
        if row.init and not any(r.name == row.init and r.trained for r in rows):
            known = any(r.get("name") == row.init for r in tree["rows"] if isinstance(r, dict))
            fail(f"init {row.init!r} names {'a row that is not a trained row before this one' if known else 'no row'}",
                 where)
        rows.append(row)
    for row in rows:
        if row.decode_of and not any(r.name == row.decode_of and r.trained for r in rows):
            known = any(r.name == row.decode_of for r in rows)
            fail(f"decode_of {row.decode_of!r} names {'a row the table does not train' if known else 'no row'}",
                 f"row {row.name!r}")
    if not rows[0].trained:
        fail("the first row is the control: a trained row (a pipeline, no waits)", f"row {rows[0].name!r}")
    return Spec(path=path, updates=updates, init=init, recipe=recipe, rows=tuple(rows))


@dataclass(frozen=True)
class RowStatus:
    """Where a row stands: ``state`` done | kept | unfinished | not started | waits, ``text`` the
    table's cell ("731", "731 (kept)", "unfinished: 350 of 731 updates", "not started", "waits: …"), ``step`` the
    updates of its checkpoint and ``cpu_time_s`` its training CPU seconds (None without one)."""

    state: str
    text: str                   # a row trained on from another (``init: ROW``): "731 after han_encoder's 731"
    step: int | None = None
    cpu_time_s: float | None = None


def jk_dir(args) -> Path:
    """The jackknife directory: ``args.jk``, else PREP/dp_jk3."""
    return Path(args.jk) if args.jk else Path(args.prepared) / "dp_jk3"


def unmet_needs(row: Row, args) -> list[str]:
    """What ``row`` waits for among its needs ("PREP/dp (annotate-dp corpus)", "JK (annotate-dp
    jackknife)")."""
    out = []
    if "dp" in row.needs and not (Path(args.prepared) / "dp" / "meta.json").is_file():
        out.append(f"{Path(args.prepared) / 'dp'} (annotate-dp corpus)")
    if "jk" in row.needs and not (jk_dir(args) / "meta.json").is_file():
        out.append(f"{jk_dir(args)} (annotate-dp jackknife)")
    return out


_STATES: dict[tuple[str, int, int], tuple[int, float]] = {}


def checkpoint_progress(path: Path) -> tuple[int, float] | None:
    """(state.step, state.cpu_time_s) of a checkpoint, None without the file (read once per
    file version)."""
    from doctrans.runtime.checkpoint import load_checkpoint

    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _STATES:
        state = load_checkpoint(path)["state"]
        _STATES[key] = (int(state["step"]), float(state.get("cpu_time_s", 0.0)))
    return _STATES[key]


KEPT = " (kept)"   # the status text of a kept row ends so


def pack_items(row: dict) -> dict:
    """A row for KEEP/rows.json: every per-item list of 1/0 (``*_per_item``, McNemar's input) as a
    string of "1" and "0"."""
    return {k: "".join("1" if x else "0" for x in v) if k.endswith("_per_item") and isinstance(v, list) else v
            for k, v in row.items()}


def read_kept(keep: str | Path) -> dict[str, dict]:
    """The scored rows KEEP/rows.json keeps (those with ``corpus_columns``), by name, per-item
    strings back as lists ({} without the file). Raises ValueError naming the file when it is not
    a table's rows, FileNotFoundError when a scored row's KEEP/NAME.en is missing."""
    path = Path(keep) / "rows.json"
    if not path.is_file():
        return {}
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
        by_name = {r["name"]: r for r in rows}
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not the rows a table wrote ({e})") from None
    out = {}
    for name, r in by_name.items():
        if "corpus_columns" not in r:
            continue
        if not (Path(keep) / f"{name}.en").is_file():
            raise FileNotFoundError(f"{Path(keep) / f'{name}.en'} not found: row {name} was scored ({path}) but its "
                                    "translation is not kept")
        out[name] = {k: [int(c) for c in v] if k.endswith("_per_item") and isinstance(v, str) else v
                     for k, v in r.items()}
    return out


def _kept_status(r: dict) -> RowStatus:
    text = r.get("status") or str(r.get("updates"))
    return RowStatus("kept", text.removesuffix(KEPT) + KEPT, r.get("updates"),
                     r["cpu_h"] * 3600 if r.get("cpu_h") is not None else None)


def row_statuses(spec: Spec, args) -> dict[str, RowStatus]:
    """Every row's status (module doc), by name; ``args``: ``prepared``, ``runs``, ``jk``, ``keep``."""
    out: dict[str, RowStatus] = {}
    kept = read_kept(args.keep)
    for row in spec.rows:
        if row.decode_of:
            continue
        if row.waits:
            out[row.name] = RowStatus("waits", f"waits: {row.waits}")
            continue
        progress = checkpoint_progress(Path(args.runs) / row.name / "last.pt")
        step, cpu = progress if progress else (None, None)
        if step is not None and step >= spec.updates:
            after = f" after {row.init}'s {out[row.init].step}" if row.init else ""   # (HAN joint: after the HAN encoder's)
            out[row.name] = RowStatus("done", f"{step}{after}", step, cpu)
            continue
        if row.name in kept:
            out[row.name] = _kept_status(kept[row.name])
            continue
        so_far = f"unfinished: {step} of {spec.updates} updates" if step is not None else "not started"
        wait = unmet_needs(row, args)
        if row.init and out[row.init].state == "kept":
            wait.append(f"row {row.init}'s {Path(args.runs) / row.init / 'last.pt'} (a kept row: its run is not here)")
        elif row.init and out[row.init].state != "done":
            wait.append(f"row {row.init} ({out[row.init].text})")
        if wait:
            out[row.name] = RowStatus("waits", f"waits: {', '.join(wait)}" + (f" ({so_far})" if progress else ""),
                                      step, cpu)
        else:
            out[row.name] = RowStatus("unfinished" if progress else "not started", so_far, step, cpu)
    for row in spec.rows:
        if row.decode_of:
            src, wait = out[row.decode_of], unmet_needs(row, args)
            if src.state != "done" and row.name in kept:
                out[row.name] = _kept_status(kept[row.name])
            elif src.state == "kept":
                out[row.name] = RowStatus("waits", f"waits: row {row.decode_of}'s checkpoint (a kept row: its run "
                                                   "is not here)")
            elif src.state != "done":
                out[row.name] = RowStatus("waits", f"waits: row {row.decode_of} ({src.text})")
            elif wait:
                out[row.name] = RowStatus("waits", f"waits: {', '.join(wait)}")
            else:
                out[row.name] = RowStatus("done", f"{src.step} ({row.decode_of}'s model)", src.step)
    return {row.name: out[row.name] for row in spec.rows}


def fill(value: str, row: Row, args) -> str:
    """``value`` with ``{jk}`` → the jackknife directory and ``{jk_generator}`` → the contents of
    JK/generator.txt. Raises FileNotFoundError naming the row and the file when it is missing."""
    if "{jk_generator}" in value:
        gen = jk_dir(args) / "generator.txt"
        if not gen.is_file():
            raise FileNotFoundError(f"row {row.name}: {{jk_generator}}: {gen} not found (doctrans annotate-dp "
                                    "jackknife writes it)")
        value = value.replace("{jk_generator}", gen.read_text(encoding="utf-8").strip())
    return value.replace("{jk}", str(jk_dir(args)))


def translate_options(row: Row, args) -> dict:
    """The row's ``translate`` options, placeholders filled, as ``TranslateConfig`` keyword
    arguments."""
    out = {}
    for kv in row.translate:
        key, _, value = kv.partition("=")
        out[key] = typed_option(key, fill(value, row, args))
    return out


def init_of(spec: Spec, row: Row, args) -> str:
    """The checkpoint a row starts from: ``RUNS/ROW/last.pt`` for ``init: ROW``, else the spec's."""
    return str(Path(args.runs) / row.init / "last.pt") if row.init else spec.init


def train_command(spec: Spec, row: Row, args) -> list[str]:
    """The argv that trains (or resumes) ``row``: ``doctrans train PIPELINE data.prepared=PREP
    run_dir=RUNS/NAME train.init_from=INIT RECIPE… SET… train.max_steps=UPDATES
    train.threads=THREADS [--resume]`` (``--resume`` when RUNS/NAME/last.pt exists)."""
    run = Path(args.runs) / row.name
    return ([sys.executable, "-m", "doctrans.cli", "train", row.pipeline, "data.prepared=" + args.prepared,
             "run_dir=" + str(run), "train.init_from=" + init_of(spec, row, args), *spec.recipe,
             *(fill(kv, row, args) for kv in row.set), "train.max_steps=" + str(spec.updates),
             "train.threads=" + str(args.threads)]
            + (["--resume"] if (run / "last.pt").is_file() else []))


def run_child(argv: list[str], name: str) -> int:
    """Run ``argv`` to its end → its exit status. The child runs in its own session (a terminal's
    Ctrl-C reaches this process only); SIGTERM / SIGINT here are passed on to it (the first makes a
    training save ``last.pt`` and stop, a second stops it at once), and after it has ended
    ``Interrupted`` is raised with the first signal's number."""
    proc = subprocess.Popen(argv, start_new_session=True)
    received: list[int] = []

    def forward(signum: int, frame) -> None:
        received.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    try:
        code = proc.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if received:
        raise Interrupted(received[0], f"row {name}: its training stopped by {signal.Signals(received[0]).name} "
                                       f"(exit {code}; last.pt kept: run the command again to resume)")
    return code


def train_rows(spec: Spec, args) -> list[tuple[str, int]]:
    """Train, in spec order, every row not done whose needs are met (``train_command``, logged);
    → the (row, exit status) of the trainings that failed (logged; the next rows go on)."""
    failed: list[tuple[str, int]] = []
    for row in spec.rows:
        if not row.trained:
            continue
        status = row_statuses(spec, args)[row.name]
        if status.state not in ("unfinished", "not started"):
            logger.info("%s: %s", row.name, "done" if status.state == "done" else status.text)
            continue
        argv = train_command(spec, row, args)
        logger.info("%s (%s): %s", row.name, status.text, shlex.join(argv))
        code = run_child(argv, row.name)
        if code != 0:
            logger.error("%s: the training exited with status %d (the row stays unfinished)", row.name, code)
            failed.append((row.name, code))
    return failed
