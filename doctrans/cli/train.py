"""``doctrans train`` (``doctrans/training/train.py``, ``doctrans/dp/train.py``) and ``doctrans average``."""
from __future__ import annotations

import logging

import click

from doctrans.cli.options import POSITIVE

log = logging.getLogger(__name__)


@click.command("train", context_settings={"ignore_unknown_options": False},
             short_help="Train a model (NMT, context model or DP generator) from a YAML config.")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(exists=True, dir_okay=False))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--resume", is_flag=True, help="Continue from RUN_DIR/last.pt with the same subsequent updates.")
@click.option("--overwrite", is_flag=True,
              help="Replace the model in RUN_DIR (best.pt, last.pt, step checkpoints, metrics.jsonl, tensorboard/); "
                   "without it, a RUN_DIR holding a model is refused unless --resume.")
@click.option("--max-time", "max_time", type=click.FloatRange(min=0), default=None,
              help="Wall-clock training budget in minutes (same as train.max_time_min=...; 0 = unlimited).")
def train_cmd(config_path: str, overrides: tuple[str, ...], resume: bool, overwrite: bool,
              max_time: float | None) -> None:
    """Train a model described by CONFIG.yaml (`doctrans configs` lists the shipped ones).

    KEY=VALUE pairs override config fields by dotted path, e.g.
    `train.lr=5e-4 model.layers_enc=2 run_dir=runs/try1`. Unknown keys are errors.
    The run directory receives config.yaml, metrics.jsonl, train.log, tensorboard/,
    learning_curves.png, best.pt, last.pt and, at the end, MODEL_CARD.md (what the model is, data,
    updates, dev scores, config, commit); a RUN_DIR that already holds best.pt or last.pt needs
    --resume (continue) or --overwrite (replace). SIGTERM or Ctrl-C finishes the current update,
    writes last.pt and exits with 128 + the signal number (143, 130), printing the --resume command.
    A `context:` section trains a context model on
    document batches: concatenation, HAN, QCN (capsules), HGC, HRNN, multi-encoder, ISG, cache
    (the YAMLs of pipelines/context/: `doctrans configs`; their keys and defaults:
    `doctrans configs --keys context`);
    `train.init_from=CKPT` starts from another run's weights (stage 2 of the HAN recipe;
    `train.freeze=[backbone.*]`, `train.init_lr_scale=0.1`).
    A YAML with `task: dp_generator` (pipelines/dp/) trains a dropped-pronoun generator on
    `doctrans annotate-dp` output instead (sections data/model/train: doctrans/dp/config.py,
    model.name picks doctrans/dp/models/*.py); its τ and best epoch are tuned on TVsub's
    hand-annotated dev DPs (`data.tune_on=oracle`, default; `data.tune_on=annotated` uses our
    annotation of dev), `model.sparse_embeddings=false` for dense Adam, `model.context_next=N`
    adds following sentences to the labeler's context, `train.lr_decay=0.5 train.lr_decay_start=3`
    halves the learning rate after every epoch from the 3rd on, `model.pseudo_dp=0.5
    model.pseudo_weight=0.25` also trains the labeler's pronoun choice on overt pronouns deleted
    at random.

    Data-parallel on K processes (gloo on CPU, nccl on GPU): `torchrun --nproc_per_node=K -m
    doctrans.cli train CONFIG.yaml …`; an update then takes K × train.accum batches.
    """
    from doctrans.config import load_experiment
    from doctrans.dp import train as dp_train
    from doctrans.dp.config import is_dp_config, load_dp_config
    from doctrans.runtime import distributed
    from doctrans.stages import train

    if max_time is not None:
        overrides = overrides + (f"train.max_time_min={max_time}",)
    try:
        if is_dp_config(config_path):                        # task: dp_generator (pipelines/dp/)
            log.info("%s has task: dp_generator: training a dropped-pronoun generator (doctrans/dp/train.py), "
                     "not a translation model", config_path)
            run_dir = dp_train.train_generator(load_dp_config(config_path, overrides), resume=resume, overwrite=overwrite)
        else:
            run_dir = train(load_experiment(config_path, overrides), resume=resume, overwrite=overwrite)
    finally:
        distributed.shutdown()                               # under torchrun: leave the process group
    if distributed.env_rank() == 0:
        click.echo(f"run directory: {run_dir}")


@click.command("average", short_help="Average the weights of several checkpoints of one run.")
@click.argument("checkpoints", nargs=-1, metavar="[CKPT]...")
@click.option("--last", "last", type=POSITIVE, default=None,
              help="Average the last N checkpoint{STEP}.pt of --run-dir (written with train.keep_last=K ≥ N).")
@click.option("--run-dir", default=None, help="Run directory for --last.")
@click.option("-o", "--output", required=True, help="Checkpoint to write (atomically).")
def average_cmd(checkpoints: tuple[str, ...], last: int | None, run_dir: str | None, output: str) -> None:
    """Average the weights of several checkpoints of one run into one checkpoint to translate
    (fairseq's average_checkpoints.py; Vaswani et al. 2017 average the last 5).

    `doctrans average --run-dir runs/quickstart --last 4 -o runs/quickstart/avg4.pt`, or name
    the checkpoints. The result carries the last one's config, vocabularies and BPE codes and no
    optimizer state (translate with it; it does not resume).
    """
    from doctrans.runtime.checkpoint_write import save_checkpoint
    from doctrans.training.checkpoint import average_checkpoints, step_checkpoints

    paths = list(checkpoints)
    if last:
        if not run_dir:
            raise click.UsageError("--last needs --run-dir")
        found = step_checkpoints(run_dir)
        if len(found) < last:
            raise click.UsageError(f"--last {last}: {run_dir} has {len(found)} checkpoint{{STEP}}.pt "
                                   f"(train with train.keep_last={last} or more)")
        paths += [str(p) for p in found[-last:]]
    if not paths:
        raise click.UsageError("give checkpoints or --run-dir DIR --last N")
    save_checkpoint(average_checkpoints(paths), output)
    click.echo(f"averaged {len(paths)} checkpoints → {output}")
