"""Training, checkpoints, resume and translation on a hand-made task (CPU, tiny model).

The overfitting test of every backbone is tests/system/test_overfit.py."""
from __future__ import annotations

import torch

from doctrans import stages
from doctrans.config import load_experiment
from doctrans.inference.translate import TranslateConfig, translate_input as translate_run
from doctrans.training import train
from doctrans.training.metrics import read_metrics

from conftest import REPO

TINY = REPO / "pipelines" / "transformer" / "tiny.yaml"


def tiny_cfg(prep, run_dir, *extra):
    return load_experiment(TINY, [f"data.prepared={prep}", f"run_dir={run_dir}", "model.d_model=64",
                                  "model.d_ff=128", "model.heads=4", "train.threads=1", *extra])


def test_resume_after_interrupt_gives_the_same_next_losses(reversal_prepared, tmp_path):
    common = ("train.max_tokens=64", "train.log_every=1", "train.eval_every=0", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min",
              "model.dropout=0.3", "train.metric=xent_nats", "train.metric_mode=min")
    full = stages.train(tiny_cfg(reversal_prepared, tmp_path / "full", "train.max_steps=8", *common))
    part = tiny_cfg(reversal_prepared, tmp_path / "part", "train.max_steps=5", "train.save_every=5", *common)
    stages.train(part)                                               # "killed" after update 5
    resumed = tiny_cfg(reversal_prepared, tmp_path / "part", "train.max_steps=8", *common)
    stages.train(resumed, resume=True)
    losses = lambda d: [(r["step"], r["loss_nats"]) for r in read_metrics(d / "metrics.jsonl") if r["kind"] == "train"]
    a, b = losses(full), losses(tmp_path / "part")
    assert [s for s, _ in b] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert a == b                                                 # identical, not just close


def test_rnnsearch_with_adadelta_resumes_exactly(reversal_prepared, tmp_path):
    """The thesis recipe (pipelines/rnnsearch/base.yaml: Adadelta, constant lr 1.0, readout
    dropout) at tiny size: the Adadelta accumulators and RNG travel in last.pt."""
    rnn = REPO / "pipelines" / "rnnsearch" / "tiny.yaml"
    common = (f"data.prepared={reversal_prepared}", "train.threads=1", "train.max_tokens=64", "train.log_every=1",
              "train.eval_every=0", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min",
              "model.dropout=0.3", "train.optimizer=adadelta", "train.lr=1.0", "train.lr_schedule=epoch_decay",
              "train.warmup=0", "train.tensorboard=false", "train.plot=false")
    full = stages.train(load_experiment(rnn, [f"run_dir={tmp_path / 'full'}", "train.max_steps=6", *common]))
    stages.train(load_experiment(rnn, [f"run_dir={tmp_path / 'part'}", "train.max_steps=3", "train.save_every=3", *common]))
    stages.train(load_experiment(rnn, [f"run_dir={tmp_path / 'part'}", "train.max_steps=6", *common]), resume=True)
    losses = lambda d: [(r["step"], r["loss_nats"]) for r in read_metrics(d / "metrics.jsonl") if r["kind"] == "train"]
    assert [s for s, _ in losses(tmp_path / "part")] == [1, 2, 3, 4, 5, 6]
    assert losses(full) == losses(tmp_path / "part")
    assert "acc_delta" in torch.load(full / "last.pt", weights_only=True)["optimizer"][0]["state"][0]


def test_resume_refuses_a_changed_config(reversal_prepared, tmp_path):
    import pytest

    stages.train(tiny_cfg(reversal_prepared, tmp_path / "r", "train.max_steps=2", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min"))
    with pytest.raises(ValueError, match="train.lr"):
        stages.train(tiny_cfg(reversal_prepared, tmp_path / "r", "train.max_steps=4", "train.lr=0.5"), resume=True)


def test_checkpoint_loads_with_weights_only(reversal_prepared, tmp_path):
    run_dir = stages.train(tiny_cfg(reversal_prepared, tmp_path / "r", "train.max_steps=2", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min"))
    ckpt = torch.load(run_dir / "last.pt", weights_only=True)
    assert ckpt["state"]["step"] == 2
    assert ckpt["config"]["model"]["d_model"] == 64
    assert (run_dir / "config.yaml").is_file() and (run_dir / "best.pt").is_file()


def test_translate_keeps_line_count_and_empty_lines(reversal_prepared, tmp_path):
    run_dir = stages.train(tiny_cfg(reversal_prepared, tmp_path / "r", "train.max_steps=3", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min"))
    lines = ["w1 w2 w3", "", "w4", "   ", "w5 w6", ""]
    inp = tmp_path / "in.txt"
    inp.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    out = tmp_path / "out.txt"
    translate_run(TranslateConfig(checkpoint=str(run_dir / "last.pt"), input=str(inp), output=str(out),
                                  input_format="bpe", tokenized=True, beam=3))
    got = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(got) == len(lines)
    assert [g == "" for g in got] == [x.strip() == "" for x in lines]

    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.zh").write_text("w1 w2\n\nw3\n", encoding="utf-8")
    (docs / "sub" / "b.zh").write_text("w4\n", encoding="utf-8")
    translate_run(TranslateConfig(checkpoint=str(run_dir / "last.pt"), input=str(docs),
                                  output=str(tmp_path / "docs_out"), input_format="bpe", tokenized=True, beam=2))
    assert len((tmp_path / "docs_out" / "a.en").read_text().split("\n")) == 4
    assert (tmp_path / "docs_out" / "a.en").read_text().split("\n")[1] == ""
    assert len((tmp_path / "docs_out" / "sub" / "b.en").read_text().splitlines()) == 1


def test_doc_task_trains_on_document_batches_with_context_rows(reversal_prepared, tmp_path):
    """DocNMTTask: document batches through the shared loop; the loss counts target rows only."""
    from doctrans.data.documents import DocBatch
    from doctrans.models.build import build_model
    from doctrans.training.trainer import Trainer

    (reversal_prepared / "train.target").write_text("".join("0\n" if i % 5 == 2 else "1\n" for i in range(20)))
    cfg = tiny_cfg(reversal_prepared, tmp_path / "r", "train.max_steps=4", "train.max_tokens=60", "train.eval_every=2",
                   "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min", "train.log_every=1")
    src_vocab, tgt_vocab = train._vocabs(cfg)
    data, dev, refs = train.load_doc_splits(cfg, src_vocab, tgt_vocab)
    assert (len(data), int(data.is_target.sum())) == (20, 16)
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab), src_vocab.pad_id)
    task = train.DocNMTTask(cfg, model, data, dev, refs, src_vocab, tgt_vocab, torch.device("cpu"), context_sents=2)
    specs = task.epoch_batches(0)
    assert [s.rows.tolist() for s in specs] == [s.rows.tolist() for s in task.epoch_batches(0)]
    batch = task.collate(specs[1], 0, 1)
    assert isinstance(batch, DocBatch) and batch.ctx.shape[1] == 2 and not batch.is_target[0]  # context row first
    assert task.loss(batch).n_targets == batch.n_targets
    Trainer(task, cfg.train, tmp_path / "r", torch.device("cpu")).fit()
    recs = read_metrics(tmp_path / "r" / "metrics.jsonl")
    assert [r["step"] for r in recs if r["kind"] == "train"] == [1, 2, 3, 4]
    assert any(r["kind"] == "dev" and r["xent_nats"] > 0 for r in recs)


def test_doc_task_reads_data_doc_batching(reversal_prepared, tmp_path):
    """data.doc_batching picks the document batching mode of DocNMTTask; a bad one is an error."""
    import pytest

    from doctrans.data.documents import make_doc_batches
    from doctrans.models.build import build_model
    from doctrans.training.trainer import Trainer

    common = ("train.max_steps=2", "train.max_tokens=60", "train.eval_every=0", "train.eval_bleu=false",
              "train.metric=xent_nats", "train.metric_mode=min", "train.log_every=1")
    cfg = tiny_cfg(reversal_prepared, tmp_path / "s", *common, "data.doc_batching=sorted")
    src_vocab, tgt_vocab = train._vocabs(cfg)
    data, dev, refs = train.load_doc_splits(cfg, src_vocab, tgt_vocab)
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab), src_vocab.pad_id)
    task = train.DocNMTTask(cfg, model, data, dev, refs, src_vocab, tgt_vocab, torch.device("cpu"), context_sents=2)
    want = make_doc_batches(data, 60, 2, cfg.train.seed, 1, mode="sorted")
    assert [s.rows.tolist() for s in task.epoch_batches(1)] == [s.rows.tolist() for s in want]
    assert [s.rows.tolist() for s in want] != [s.rows.tolist() for s in make_doc_batches(data, 60, 2, cfg.train.seed, 1)]
    Trainer(task, cfg.train, tmp_path / "s", torch.device("cpu")).fit()
    assert [r["step"] for r in read_metrics(tmp_path / "s" / "metrics.jsonl") if r["kind"] == "train"] == [1, 2]
    bad = tiny_cfg(reversal_prepared, tmp_path / "b", *common, "data.doc_batching=shuffled")
    with pytest.raises(ValueError, match="data.doc_batching must be one of"):
        train.DocNMTTask(bad, model, data, dev, refs, src_vocab, tgt_vocab, torch.device("cpu"), context_sents=2)
