"""Forward + backward time of the two training kernels doctrans chooses itself, at the
quickstart's shapes: the attention core (SDPA's default kernel, SDPA's math backend, and the
explicit form of ``doctrans/layers/attention.py``) in bf16 and fp32, and the label-smoothed
cross-entropy over the output vocabulary (the log_softmax → gather / mean autograd graph
against ``training.loss``'s chunked fused form).

Usage: python benchmarks/train_kernels.py [--threads 2] [--repeats 10] [--vocab 9129] [--tokens 3900]

Milliseconds per forward + backward, each variant timed on the same tensors after one
untimed call; ratios in one run.
"""
from __future__ import annotations

import argparse

import torch
from _common import per_call_ms, set_threads
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from doctrans.layers.attention import attention
from doctrans.training.loss import label_smoothed_xent


def attention_rows(repeats: int) -> None:
    print("attention core, forward + backward, ms (B rows × 4 heads × L tokens, d_k 64; mask = 1/3 rows padded)")
    print(f"{'dtype':9s} {'B':>4s} {'L':>3s} {'causal':>6s} {'SDPA':>8s} {'SDPA math':>10s} {'explicit':>9s}")
    for dtype in (torch.bfloat16, torch.float32):
        for b, n, causal in ((850, 4, False), (400, 10, False), (400, 10, True), (270, 14, True)):
            q, k, v = (torch.randn(b, 4, n, 64, dtype=dtype, requires_grad=True) for _ in range(3))
            keep = None
            if not causal:
                keep = torch.ones(b, 1, 1, n, dtype=torch.bool)
                keep[::3, ..., -2:] = False

            def run(kind):
                def f():
                    if kind == "explicit":
                        o = attention(q, k, v, keep, causal=causal, explicit=True)
                    else:
                        backend = SDPBackend.MATH if kind == "math" else SDPBackend.FLASH_ATTENTION
                        with sdpa_kernel(backend):
                            o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=causal)
                    o.sum().backward()
                return per_call_ms(f, repeats)
            ms = [run(kind) for kind in ("sdpa", "math", "explicit")]
            print(f"{str(dtype)[6:]:9s} {b:4d} {n:3d} {str(causal):>6s} {ms[0]:8.2f} {ms[1]:10.2f} {ms[2]:9.2f}")


def loss_rows(repeats: int, tokens: int, vocab: int) -> None:
    target = torch.randint(0, vocab, (tokens,))
    print(f"label-smoothed cross-entropy (ε 0.1), forward + backward, ms ({tokens} tokens × {vocab} types)")
    for dtype in (torch.bfloat16, torch.float32):
        base = (torch.randn(tokens, vocab) * 2).to(dtype)

        def unfused():
            x = base.clone().requires_grad_(True)
            lp = F.log_softmax(x.float(), dim=-1)
            nll = -lp.gather(1, target[:, None]).squeeze(1)
            ((0.9 * nll - 0.1 * lp.mean(dim=-1)).sum()).backward()

        def fused():
            x = base.clone().requires_grad_(True)
            label_smoothed_xent(x, target, 0.1).total.backward()
        a, b = per_call_ms(unfused, repeats), per_call_ms(fused, repeats)
        print(f"  {str(dtype)[6:]:9s} log_softmax graph {a:7.1f}   fused, chunked {b:7.1f}   ({a / b:.2f}×)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=3900, help="target tokens of a batch (quickstart: ≈ 3,900)")
    ap.add_argument("--vocab", type=int, default=9129, help="output types (quickstart: 9,129)")
    args = ap.parse_args()
    set_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    attention_rows(args.repeats)
    loss_rows(args.repeats, args.tokens, args.vocab)


if __name__ == "__main__":
    main()
