"""TreeLSTM over batches of trees: `python -m bench.forest [--quick]`.

The TreeLSTM of bench/models.py (300-d fixed embeddings, hidden 150, 5 classes, a
cross-entropy at every node), its gradient over a batch of 25 SST-like random parses
(the loss summed over the batch), side by side in one process, repeats interleaved:

- jitad forest: `jitad.vmap` of the one-tree loss (a `TREE`) over a `jitad.Forest` of
  the 25 trees: level by level, a chunk of `width` nodes of equal height per batched step;
- jitad per tree: the one-tree gradient (`TREE`, every node a batch-1 product), called
  for each tree of the batch;
- PyTorch: per-node recursion per tree, the 25 losses summed, one backward;
- JAX: `jit(grad)` of `vmap` over the trees of a padded `lax.scan` over post-order nodes
  (the trees padded to the batch's largest size rounded up to a bucket; one XLA compile
  per bucket, warmed before timing).

Every comparator's gradient must equal jitad's before anything is timed. FLOP rates
count the useful matmul FLOPs of bench/models.py's `tree_flops` (forward and backward),
as a fraction of one core's dgemm; padding (dummy nodes of the forest, JAX's padded
steps) is work done but not counted.
"""
import argparse
import functools
import os
import sys
import time


from . import data, harness
from .models import (TREE, dgemm_rate, jax_scan_loss, jitad_tree_loss, padded_post_order, torch_tree_loss, tree_flops,
                     tree_params)

BATCH = 25


def _jitad_runners(jitad, p, E, batches, widths):
    loss = functools.partial(jitad_tree_loss, jitad)
    total = jitad.jit(jitad.grad(lambda p, E, f: jitad.sum(jitad.vmap(loss, in_axes=(None, None, 0))(p, E, f))))
    one = jitad.jit(jitad.grad(loss))
    trees = [[jitad.Tree(l, r, word=w, label=y) for l, r, w, y in b] for b in batches]
    runners, pack = {}, {}
    for width in widths:
        start = time.perf_counter()
        forests = [jitad.Forest(ts, width=width) for ts in trees]
        pack[width] = (time.perf_counter() - start) / len(forests)
        runners[f"jitad forest (width {width})"] = (lambda fs=forests: [total(p, E, f) for f in fs], ())

    def per_tree():
        out = []
        for ts in trees:
            gs = [one(p, E, t) for t in ts]
            out.append({k: sum(g[k] for g in gs) for k in p})
        return out
    runners["jitad per tree"] = (per_tree, ())
    return runners, pack


def _torch_runner(torch, p0, E, batches):
    Et = torch.from_numpy(E)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in p0.items()}
    trees = [[(l.tolist(), r.tolist(), w.tolist(), y.tolist()) for l, r, w, y in b] for b in batches]

    def run():
        out = []
        for ts in trees:
            for v in p.values():
                v.grad = None
            sum(torch_tree_loss(torch, p, Et, t) for t in ts).backward()
            out.append({k: v.grad.numpy().copy() for k, v in p.items()})
        return out
    return run


def _jax_runner(jax, p0, E, batches, buckets=(16, 32, 64, 2 * data.MAX_WORDS - 1)):
    jnp = jax.numpy
    scan_loss = functools.partial(jax_scan_loss, jax)
    batched = jax.vmap(scan_loss, in_axes=(None, None, 0, 0, 0, 0, 0))
    step = jax.jit(jax.grad(lambda p, E, *a: jnp.sum(batched(p, E, *a))))
    pj, Ej = jax.tree_util.tree_map(jnp.asarray, p0), jnp.asarray(E)
    padded = [[jnp.asarray(a) for a in padded_post_order(b, next(n for n in buckets if n >= max(len(t[0]) for t in b)))]
              for b in batches]

    def run():
        return [jax.block_until_ready(step(pj, Ej, *arrs)) for arrs in padded]
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="two batches, one repeat (a smoke test)")
    opts = parser.parse_args(argv)
    n_batches, repeats, widths = (2, 1, (32,)) if opts.quick else (8, 5, (16, 32, 64))
    widths = tuple(int(w) for w in os.environ.get("FOREST_WIDTHS", "").split(",") if w) or widths
    mods, versions = harness.load_comparators()
    import jitad
    parses = data.sst_parses(n_batches * BATCH)
    batches = [parses[i:i + BATCH] for i in range(0, len(parses), BATCH)]
    E, p = data.embeddings(dim=TREE["D"]), tree_params()
    runners, pack = _jitad_runners(jitad, p, E, batches, widths)
    if mods["torch"] is not None:
        runners["PyTorch eager"] = (_torch_runner(mods["torch"], p, E, batches), ())
    if mods["jax"] is not None:
        mods["jax"].config.update("jax_enable_x64", True)
        runners["JAX jit(grad(vmap(padded scan)))"] = (_jax_runner(mods["jax"], p, E, batches), ())
    want = runners["jitad per tree"][0]()
    for name, (fn, args) in runners.items():
        harness.check_same("TreeLSTM batch gradients", name, fn(*args), want)
    res = harness.measure(runners, repeats, 0.5 if not opts.quick else 0.01)
    rate = dgemm_rate()
    flops = tree_flops(parses)
    trees = len(parses)
    nodes = sum(len(t[0]) for t in parses)
    info = harness.run_info(versions, {"repeats": repeats, "batches": n_batches, "quick": opts.quick})
    base = res["jitad per tree"]["median_us"]
    lines = ["# TreeLSTM over batches of trees (jitad.Forest)", "",
             f"{info['date']} · load {info['load_average'][0]} · median of {repeats} repeats, interleaved · "
             f"{n_batches} batches of {BATCH} trees ({nodes} nodes) · dgemm {rate / 1e9:.1f} GFLOP/s (one core)", "",
             "| comparator | µs per tree | spread | × jitad per tree | FLOP rate / dgemm |", "|---|---|---|---|---|"]
    for name, r in res.items():
        lines.append(f"| {name} | {r['median_us'] / trees:.0f} | {r['min_us'] / trees:.0f}–{r['max_us'] / trees:.0f} | "
                     f"{base / r['median_us']:.2f} | {flops / (r['median_us'] * 1e-6) / rate:.3f} |")
    lines += ["", "Packing a batch into a Forest (host, once per batch): " +
              ", ".join(f"width {w}: {s * 1e3:.2f} ms" for w, s in pack.items()) + "; padding (dummy "
              "nodes / real nodes): " + ", ".join(
                  f"width {w}: {sum(jitad.Forest([jitad.Tree(t[0], t[1]) for t in b], width=w).size for b in batches) / nodes:.2f}"
                  for w in widths)]
    harness.save_markdown("forest" + ("-quick" if opts.quick else ""), "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
