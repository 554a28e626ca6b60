"""The scalar microbenchmarks of BENCHMARKS.md: `python -m bench.micro [--quick]`.

Every case builds one callable per comparator; all take the same Python inputs (floats,
tuples of floats, a tree) and return (value, gradient). Each comparator's first call is
its compile time; its result must equal jitad's (rtol 1e-9) before anything is timed,
else `GradientMismatch` is raised and the run fails. Then every comparator of the case is
timed, repeats interleaved round-robin.
"""
import argparse
import functools
import os
import sys
import time

import numpy as np

from . import byhand, harness
from .functions import (INCIDENCE, STATE0, chain, energy, euler_step, particles_vectorized,
                        random_tree, rotate)

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = dict(chain_n=50, unrolled=(10, 100, 1000), for_n=(10, 100, 1000, 10 ** 4, 10 ** 5),
            tree_nodes=1000, steps=1000, repeats=9, target_s=0.15)
QUICK = dict(chain_n=50, unrolled=(10, 100), for_n=(10, 100, 1000), tree_nodes=50, steps=50,
             repeats=1, target_s=0.002)
NA = "n/a"


def _jax_vg(m, fn, argnums=0):
    """`jax.jit(jax.value_and_grad(fn))`, waited for (JAX dispatches asynchronously)."""
    jax = m["jax"]
    compiled = jax.jit(jax.value_and_grad(fn, argnums=argnums))
    return lambda *args: jax.block_until_ready(compiled(*args))


def _torch_leaf(m, x):
    torch = m["torch"]
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def _torch_vg(m, fn):
    """PyTorch eager: fresh leaf tensors from the Python inputs, forward, `autograd.grad`."""
    torch = m["torch"]

    def vg(*args):
        leaves = [_torch_leaf(m, a) for a in args]
        out = fn(*leaves)
        return out, tuple(torch.autograd.grad(out, leaves))
    return vg


def _autograd_vg(m, fn, to_array=False):
    """HIPS autograd on one tuple argument (it differentiates w.r.t. one argument)."""
    vg = m["autograd"].value_and_grad(lambda args: fn(*args))
    if to_array:
        return lambda *args: vg(tuple(np.asarray(a, dtype=np.float64) for a in args))
    return lambda *args: vg(args)


def _one(value_and_grads):
    """(value, (g,)) -> (value, g), for single-argument functions."""
    def vg(*args):
        value, grads = value_and_grads(*args)
        return value, grads[0]
    return vg


# -- the cases: each returns (runners, notes); a runner is (fn, args) or a reason --------

def case_calls(m, size, arity):
    jitad = m["jitad"]
    py = (lambda x, y: x * y) if arity == 2 else (lambda a, b, c, d: a * b + c * d)
    args = (3.0, 4.0) if arity == 2 else (3.0, 4.0, 5.0, 6.0)
    runners = {"jitad": (jitad.jit(py), args),
               "numba": (byhand.mul if arity == 2 else byhand.mul4, args),
               "torch": NA, "autograd": NA, "python": (py, args)}
    if m["jax"]:
        jitted = m["jax"].jit(py)
        runners["jax"] = (lambda *a: m["jax"].block_until_ready(jitted(*a)), args)
    return runners, []


def case_scalar_mult(m, size):
    jitad = m["jitad"]
    f = lambda x, y: x * y
    args = (3.0, 4.0)
    runners = {"jitad": (jitad.value_and_grad(f, argnums=(0, 1)), args),
               "numba": (byhand.scalar_mult, args)}
    if m["jax"]:
        runners["jax"] = (_jax_vg(m, f, (0, 1)), args)
    if m["torch"]:
        runners["torch"] = (_torch_vg(m, f), args)
    if m["autograd"]:
        runners["autograd"] = (_autograd_vg(m, f), args)
    return runners, []


def case_rotate(m, size):
    jitad = m["jitad"]
    args = ((1.0, 2.0, 3.0), (4.0, 5.0, 6.0, 7.0))
    runners = {"jitad": (jitad.value_and_grad(rotate, argnums=(0, 1)), args),
               "numba": (byhand.rotate, args)}
    if m["jax"]:
        runners["jax"] = (_jax_vg(m, rotate, (0, 1)), args)
    if m["torch"]:
        torch = m["torch"]

        def rotate_t(v, q):   # vectorized: PyTorch's fastest form
            w, r = q[0], q[1:]
            c = torch.linalg.cross(r, v) + w * v
            return (v + 2.0 * torch.linalg.cross(r, c)).sum()
        runners["torch"] = (_torch_vg(m, rotate_t), args)
    if m["autograd"]:
        anp = m["autograd"].numpy

        def rotate_a(v, q):
            w, r = q[0], q[1:]
            return anp.sum(v + 2.0 * anp.cross(r, anp.cross(r, v) + w * v))
        runners["autograd"] = (_autograd_vg(m, rotate_a, to_array=True), args)
    return runners, ["rotate_vec_by_quat: jitad, JAX and numba take v, q as tuples of floats; "
                     "PyTorch and autograd get them as vectors (their faster form, built inside "
                     "the timed call)."]


def case_chain(m, size):
    jitad = m["jitad"]
    n = size["chain_n"]
    f = lambda x: chain(x, n)
    runners = {"jitad": (jitad.value_and_grad(f), (1.5,)), "numba": (byhand.chain, (1.5, n))}
    if m["jax"]:
        runners["jax"] = (_jax_vg(m, f), (1.5,))
    if m["torch"]:
        runners["torch"] = (_one(_torch_vg(m, f)), (1.5,))
    if m["autograd"]:
        runners["autograd"] = (m["autograd"].value_and_grad(f), (1.5,))
    return runners, []


def case_while(m, size):
    jitad = m["jitad"]

    def halve(x):
        t = x
        while t > 1.0:
            t = t * 0.5
        return t
    runners = {"jitad": (jitad.value_and_grad(
                   lambda x: jitad.WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x)), (1e6,)),
               "numba": (byhand.halving, (1e6,))}
    notes = []
    if m["jax"]:
        jax = m["jax"]
        try:
            jax.jit(jax.value_and_grad(
                lambda x: jax.lax.while_loop(lambda t: t > 1.0, lambda t: t * 0.5, x)))(1e6)
            runners["jax"] = "accepted?!"   # would mean JAX changed: look at it
        except ValueError as e:
            runners["jax"] = "refuses (ValueError)"
            notes.append(f"while_halving: JAX reverse mode through `lax.while_loop` raises "
                         f"ValueError: “{str(e).splitlines()[0]}”")
    if m["torch"]:
        runners["torch"] = (_one(_torch_vg(m, halve)), (1e6,))
    if m["autograd"]:
        runners["autograd"] = (m["autograd"].value_and_grad(halve), (1e6,))
    return runners, notes


def tree_case_inputs(size, seed=0):
    n = size["tree_nodes"]
    left, right = random_tree(n, seed)
    value = 1.0 + 0.01 * np.random.default_rng(seed + 1).standard_normal(n)
    return left, right, value, 1.001   # x**(n+1) * prod(value) stays near e


def _tree_rec(x, left, right, value):
    """Python recursion over the tree (JAX traces it into a tree-specific graph)."""
    def rec(k):
        lv = rec(left[k]) if left[k] >= 0 else x
        rv = rec(right[k]) if right[k] >= 0 else x
        return lv * rv * value[k]
    return rec(0)


def case_tree(m, size):
    jitad = m["jitad"]
    left, right, value, x = tree_case_inputs(size)
    tree = jitad.Tree(left, right, value=value)
    lst = (left.tolist(), right.tolist(), value.tolist())   # Python numbers for the tracers
    f = lambda x: _tree_rec(x, *lst)
    runners = {"jitad": (jitad.value_and_grad(
                   lambda x, t: jitad.TREE(t, x, lambda node, l, r: l * r * node.value)), (x, tree)),
               "numba": (byhand.tree_product, (x, tree.left, tree.right, tree.fields["value"]))}
    if m["jax"]:
        runners["jax"] = (_jax_vg(m, f), (x,))
    if m["torch"]:
        runners["torch"] = (_one(_torch_vg(m, f)), (x,))
    if m["autograd"]:
        runners["autograd"] = (m["autograd"].value_and_grad(f), (x,))
    return runners, [f"tree_product: one random binary tree of {size['tree_nodes']} nodes (seed 0), "
                     "values 1 + 0.01·N(0,1), x = 1.001; jitad compiles once for any tree, "
                     "JAX/PyTorch/autograd recurse in Python (JAX at trace time: its graph is "
                     "specialized to this tree)."]


def case_particles(m, size):
    jitad = m["jitad"]
    steps = size["steps"]

    def loss_jitad(state):
        final = jitad.FOR(0, steps, lambda i, s: euler_step(s, jitad.sqrt), state)
        return energy(final, jitad.sqrt)
    runners = {"jitad": (jitad.value_and_grad(loss_jitad), (STATE0,)),
               "numba": (byhand.particles, (STATE0, steps))}
    if m["jax"]:   # vectorized, loop unrolled by 10: the fastest form of those tried
        jax, jnp = m["jax"], m["jax"].numpy
        loss_jax = particles_vectorized(jnp, steps, functools.partial(jax.lax.fori_loop, unroll=10))
        runners["jax"] = (_jax_vg(m, lambda s: loss_jax(jnp.stack(s))), (STATE0,))
    if m["torch"]:
        torch = m["torch"]
        loss_torch = particles_vectorized(torch, steps, incidence=torch.tensor(INCIDENCE))
        runners["torch"] = (_one(_torch_vg(m, loss_torch)), (STATE0,))
    if m["autograd"]:
        vg = m["autograd"].value_and_grad(particles_vectorized(m["autograd"].numpy, steps))
        runners["autograd"] = (lambda s: vg(np.array(s)), (STATE0,))
    return runners, [f"particles: 4 particles in 2-D joined by 6 springs (k = 1, rest length 1), "
                     f"{steps} explicit-Euler steps (dt = 0.01) in a loop (`FOR`, `lax.fori_loop`), "
                     "loss = final kinetic + spring energy, gradient w.r.t. the 16 initial "
                     "coordinates (a tuple of floats). JAX, PyTorch and autograd run a form "
                     "vectorized over the springs (faster for them than the scalar code: a "
                     "handful of ops per step); JAX's `fori_loop` is unrolled by 10 (faster "
                     "than 1 or 50 here)."]


CASES = {"calls_2arg": lambda m, s: case_calls(m, s, 2),
         "calls_4arg": lambda m, s: case_calls(m, s, 4),
         "scalar_mult": case_scalar_mult, "rotate_vec_by_quat": case_rotate,
         "chain_share": case_chain, "while_halving": case_while, "tree_product": case_tree,
         "particles": case_particles}


# -- running ------------------------------------------------------------------------

def run_case(name, runners, size, bar):
    """Compile (first call), check against jitad, time; one table row."""
    timed, results, compile_s = {}, {}, {}
    for comp, r in runners.items():
        if isinstance(r, str):
            results[comp] = r
            continue
        compile_s[comp], out = harness.first_call_seconds(*r)
        if comp == "jitad":
            want = out
            jitad_fn = r[0]
        else:
            harness.check_same(name, comp, out, want)
        timed[comp] = r
    compile_s["jitad"] = jitad_fn.compile_seconds     # trace + compile, without the call
    results.update(harness.measure(timed, size["repeats"], size["target_s"]))
    for comp in harness.COMPARATORS:
        results.setdefault(comp, harness.NOT_INSTALLED)
    bar.update(1)
    return {"case": name, "results": results,
            "compile_s": {k: v for k, v in compile_s.items() if k in ("jitad", "jax")},
            "first_call_s": compile_s}


def chain_sweep(m, size, bar):
    """chain_share against n: unrolled (one compile per n) and `FOR` (one compile for every
    n). All points of a sweep are timed together, repeats interleaved, like a case."""
    jitad = m["jitad"]
    loop = jitad.value_and_grad(lambda x, n: jitad.FOR(0, n, lambda i, s: 0.5 * s + 0.5 * s, x))
    sweeps = []
    for title, ns, make in (("chain_share sweep, unrolled", size["unrolled"],
                             lambda n: jitad.value_and_grad(lambda x: chain(x, n))),
                            ("chain_share sweep, FOR", size["for_n"], lambda n: loop)):
        runners, compile_s = {}, {}
        for n in ns:
            fn = make(n)
            args = (1.5,) if fn is not loop else (1.5, n)
            _, want = harness.first_call_seconds(fn, args)
            harness.check_same(f"{title}, n={n}", "numba", byhand.chain(1.5, n), want)
            runners[("jitad", n)], runners[("numba", n)] = (fn, args), (byhand.chain, (1.5, n))
            compile_s[n] = fn.compile_seconds if fn is not loop or n == ns[0] else None
        res = harness.measure(runners, size["repeats"], size["target_s"])
        points = [{"n": n, "jitad": res[("jitad", n)], "numba": res[("numba", n)],
                   "compile_s": compile_s[n]} for n in ns]
        bar.update(1)
        slopes = []
        for comp in ("jitad", "numba"):
            us = [p[comp]["median_us"] for p in points]
            slopes.append({"comparator": comp, "range": f"n = {ns[0]}…{ns[-1]}",
                           "slope": harness.loglog_slope(ns, us)})
            if len(ns) > 3:
                slopes.append({"comparator": comp, "range": f"n = {ns[-3]}…{ns[-1]}",
                               "slope": harness.loglog_slope(ns[-3:], us[-3:])})
        sweeps.append({"title": title, "comparators": ["jitad", "numba"], "points": points,
                       "slopes": slopes, "description": (
                           "µs per value_and_grad call against n (numba by hand: the same "
                           "recurrence with n a runtime argument); all points timed together, "
                           "repeats interleaved. "
                           + ("Each n is its own compiled function (its compile time is shown)."
                              if "unrolled" in title else
                              "One compiled function for every n (n is a runtime int)."))})
    return sweeps


def goals(rows, sweeps):
    """BENCHMARKS.md's goals, each with the measured figure and ✓ or ✗."""
    out = []
    mark = lambda ok: "✓" if ok else "✗"
    for row in rows:
        r = row["results"]
        j, nb, jx = (r.get(k) for k in ("jitad", "numba", "jax"))
        if not isinstance(j, dict):
            continue
        if row["case"].startswith("calls"):
            if isinstance(nb, dict):
                x = j["median_us"] / nb["median_us"]
                out.append(f"{mark(x <= 2.0)} {row['case']}: jitad's call takes {x:.2f}× numba's "
                           "dispatch (goal ≤ 2×)")
            continue
        if isinstance(nb, dict):
            x = j["median_us"] / nb["median_us"]
            out.append(f"{mark(x <= 1.5)} {row['case']}: {x:.2f}× numba by hand (goal ≤ 1.5×)")
        if isinstance(jx, dict):
            x = jx["median_us"] / j["median_us"]
            out.append(f"{mark(x >= 10)} {row['case']}: {x:.1f}× faster than JAX jit (goal ≥ 10×)")
    for sw in sweeps:
        for s in sw["slopes"]:
            if s["comparator"] == "jitad":
                out.append(f"{mark(abs(s['slope'] - 1) <= 0.1)} {sw['title']}: log–log slope "
                           f"{s['slope']:.3f} over {s['range']} (goal 1 ± 0.1)")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.micro", description=__doc__.splitlines()[0])
    harness.add_common_options(ap, "the harness", "latest", "quick", "< 30 s")
    ap.add_argument("--cases", help="comma-separated subset of: " + ", ".join(CASES) + ", sweep")
    args = ap.parse_args(argv)
    size = harness.sizes_from(args, FULL, QUICK)
    wanted = args.cases.split(",") if args.cases else [*CASES, "sweep"]
    unknown = set(wanted) - {*CASES, "sweep"}
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)}")
    out = args.out or os.path.join(HERE, "results", "quick" if args.quick else "latest")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * size["tree_nodes"]))

    try:
        from tqdm import tqdm
    except ImportError:   # the progress bar is a nicety: run without it
        tqdm = harness.NoBar
    start = time.perf_counter()
    mods, versions = harness.load_comparators()
    settings = {"quick": args.quick, "repeats": size["repeats"], "target_s": size["target_s"],
                "sizes": {k: v for k, v in size.items() if k not in ("repeats", "target_s")}}
    info = harness.run_info(versions, settings)
    n_tasks = len([c for c in wanted if c in CASES])
    if "sweep" in wanted:
        n_tasks += 2
    rows, sweeps, notes = [], [], []
    with tqdm(total=n_tasks, desc="bench.micro", unit="case", file=sys.stderr) as bar:
        for name in wanted:
            if name == "sweep":
                continue
            bar.set_postfix_str(name)
            runners, case_notes = CASES[name](mods, size)
            python = runners.pop("python", None)
            rows.append(run_case(name, runners, size, bar))
            if python:   # a plain Python function of the same arity, for scale
                py = harness.measure({"python": python}, size["repeats"], size["target_s"])["python"]
                rows[-1]["python_us"] = py["median_us"]
                case_notes.append(f"{name}: a plain Python function of the same arity takes "
                                  f"{harness.fmt_us(py['median_us'])} µs per call")
            notes += case_notes
        if "sweep" in wanted:
            bar.set_postfix_str("chain_share sweep")
            sweeps = chain_sweep(mods, size, bar)
    info["wall_s"] = round(time.perf_counter() - start, 1)
    for r in rows:
        if r["case"].startswith("calls"):
            r["note"] = "dispatch only (no gradient): PyTorch and autograd have no compiled call"
    if sweeps and not args.quick and harness.plot_sweeps(out + "_sweep.png", sweeps):
        notes.append(f"The sweeps are plotted in {os.path.basename(out)}_sweep.png.")
    met = goals(rows, sweeps)
    harness.write_results(out, info, rows, sweeps, notes, met)
    print(harness.markdown(info, rows, sweeps, notes, met))
    print(f"wrote {out}.md and {out}.json in {info['wall_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
