"""``runtime.distributed.all_reduce_grads`` on two gloo processes (torchrun) against one process
over both batches: dense gradients summed, sparse embedding gradients (lazy Adam) over exactly
the rows some rank touched, None kept where no rank has a gradient; and the no-op without torchrun."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from doctrans.runtime import distributed as dist

from conftest import REPO

needs_dist = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="this torch build has no torch.distributed (gloo)")

SCRIPT = textwrap.dedent('''
    import sys
    import torch
    from doctrans.runtime import distributed as dist

    def model():
        torch.manual_seed(0)
        return torch.nn.ModuleDict({"emb": torch.nn.Embedding(10, 3, sparse=True), "lin": torch.nn.Linear(3, 1),
                                    "only0": torch.nn.Linear(3, 1), "unused": torch.nn.Linear(3, 1)})

    BATCHES = [torch.tensor([1, 2, 2, 5]), torch.tensor([5, 7, 1])]

    def loss(m, ids, rank):
        h = m["emb"](ids)
        out = m["lin"](h).sum()
        if rank == 0:
            out = out + m["only0"](h).pow(2).sum()
        return out

    def grads(m):
        return {k: (None if p.grad is None else p.grad.coalesce().to_dense() if p.grad.is_sparse else p.grad)
                for k, p in m.named_parameters()}

    out = sys.argv[1]
    if sys.argv[2] == "single":
        m = model()
        for r, ids in enumerate(BATCHES):
            (loss(m, ids, r) / 7).backward()
        rows = sorted(set(torch.cat(BATCHES).tolist()))
        torch.save({"grads": grads(m), "rows": rows, "extra": [7.0]}, out)
    else:
        dist.setup(torch.device("cpu"))
        m = model()
        r = dist.rank()
        ids = BATCHES[r]
        n = dist.all_reduce_sum([len(ids)], torch.device("cpu"))[0]
        (loss(m, ids, r) / n).backward()
        sparse = [m["emb"].weight]
        dense = [p for p in m.parameters() if p is not m["emb"].weight]
        extra = dist.all_reduce_grads(dense, sparse, [float(len(ids))])
        g = m["emb"].weight.grad
        if r == 0:
            torch.save({"grads": grads(m), "rows": g.coalesce().indices()[0].tolist(), "extra": extra}, out)
        dist.shutdown()
''')


@needs_dist
def test_all_reduce_grads_equals_one_process_over_both_batches(tmp_path):
    script = tmp_path / "reduce.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    for name, cmd in (("single", [sys.executable, str(script)]),
                      ("ddp", [sys.executable, "-m", "torch.distributed.run", "--standalone",
                               "--nproc_per_node=2", str(script)])):
        r = subprocess.run([*cmd, str(tmp_path / f"{name}.pt"), name], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
    one = torch.load(tmp_path / "single.pt", weights_only=True)
    two = torch.load(tmp_path / "ddp.pt", weights_only=True)
    assert two["rows"] == one["rows"] == [1, 2, 5, 7]         # sparse again, over the touched rows
    assert two["extra"] == one["extra"]
    assert two["grads"]["unused.weight"] is None and one["grads"]["unused.weight"] is None
    for k, g in one["grads"].items():
        if g is not None:
            assert torch.allclose(two["grads"][k], g, atol=1e-6), k


def test_helpers_are_no_ops_without_torchrun(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert dist.setup(torch.device("cpu")) == torch.device("cpu")
    assert (dist.world(), dist.rank(), dist.is_main()) == (1, 0, True)
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.full((2,), 3.0)
    assert dist.all_reduce_grads([p], [], [1.5, 2.0]) == [1.5, 2.0]
    assert torch.equal(p.grad, torch.full((2,), 3.0))
    assert dist.broadcast("x") == "x" and dist.all_gather(4) == [4]
    dist.barrier()
