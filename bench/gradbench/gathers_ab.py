"""Gathered reads A/B: `python -m bench.gradbench.gathers_ab [--eval ba:1,2,3 ...] [--repeats 7]`.

Each eval's functions compiled twice in one process: "before" (a gather of a vector is a
copy, and no fused loop's loads are marked as not aliasing its stores) and "after" (the
vector read through the index inside the loop, `gathered_reads`, its loads marked,
`apart_reads` and `tensor._unaliased_gathers`). Outputs are compared (bit for bit, else
to rtol 1e-13), then each (input, function) is timed in alternating order, CPU ms a call
over at least 0.15 s of calls; medians of the repeats and of the after/before ratios
(min–max).
"""
import argparse
import resource

import bench  # noqa: F401  (single-thread settings before numpy/jax)

import numpy as np

import jitad
import jitad.dispatch as dispatch
from jitad.ir import gathered_reads, passes
from jitad.lower import runtime, tensor

from . import arrays, inputs, jacobians

FULL = list(passes.PIPELINE)


def use(variant):
    """Compile from now on as `variant` does ("before" or "after"), forgetting compiled code."""
    after = variant == "after"
    gathered_reads.VECTORS = tensor.UNALIASED_GATHERS = after
    passes.PIPELINE = [p for p in FULL if after or p[0] != "apart_reads"]
    runtime._modules.clear()   # (the variants' programs differ in text: no code is shared by name)
    dispatch._forget("jitad_tiering", None)


def cases(spec):
    """(label, jitted function maker, args) for `eval:size,size` (sizes as SIZES' indices or ba's files)."""
    name, _, sizes = spec.partition(":")
    make = jacobians.compiled if name in jacobians.EVALS else arrays.compiled
    for s in sizes.split(",") if sizes else range(len(inputs.SIZES[name])):
        size = {"file": int(s)} if name == "ba" else inputs.SIZES[name][int(s)]
        args = inputs.prepare(name, inputs.generate(name, size))
        for fn in inputs.FUNCTIONS[name]:
            yield f"{name} {inputs.describe(size)} {fn}", lambda fn=fn: make(name)[fn], args


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _ms(f, args):
    f(*args)
    runs, start = 0, _cpu()
    while runs < 3 or _cpu() - start < 0.15:
        f(*args)   # (its result let go before the next call, as the harness lets it go)
        runs += 1
    return (_cpu() - start) / runs * 1e3


def _same(a, b):
    a, b = jitad.tree_util.tree_leaves(a), jitad.tree_util.tree_leaves(b)
    exact = all(np.array_equal(x, y) for x, y in zip(a, b))
    return "equal" if exact else "close" if all(np.allclose(x, y, rtol=1e-13, atol=0) for x, y in zip(a, b)) \
        else "DIFFERENT"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", action="append", help="eval:sizes (ba: files), e.g. ba:1,2,3 or kmeans:2")
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args(argv)
    todo = [c for spec in a.eval or ["ba:1,2,3"] for c in cases(spec)]
    fns = {}
    for variant in ("before", "after"):
        use(variant)
        for label, make, args in todo:
            fns[label, variant] = make()
            fns[label, variant, "out"] = fns[label, variant](*args)
    times = {}
    for r in range(a.repeats):
        for label, _, args in todo:
            for variant in ("before", "after")[::1 if r % 2 == 0 else -1]:
                times.setdefault((label, variant), []).append(_ms(fns[label, variant], args))
    print("| input, function | before ms | after ms | after / before | outputs |\n|---|---|---|---|---|")
    for label, _, _ in todo:
        b, f = np.array(times[label, "before"]), np.array(times[label, "after"])
        ratio = f / b
        print(f"| {label} | {np.median(b):.3f} | {np.median(f):.3f} | {np.median(ratio):.2f} "
              f"({ratio.min():.2f}–{ratio.max():.2f}) | {_same(fns[label, 'before', 'out'], fns[label, 'after', 'out'])} |")


if __name__ == "__main__":
    main()
