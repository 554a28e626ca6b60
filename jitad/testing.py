"""The one gradient checker: reverse mode against central differences.

>>> from jitad.testing import check_grads
>>> check_grads(lambda x, y: jitad.sin(x) * y, (0.3, 2.0))
"""
import numpy as np

from .api import grad, jit, jvp
from .errors import ArgumentError
from .pytree import flatten, unflatten


def _zero_tangents(args):
    for a in args:
        leaves, td = flatten(a)
        yield unflatten(td, [np.zeros(np.shape(x)) if np.shape(x) else 0.0 for x in leaves])


def _float_positions(args):
    """Positions of the arguments whose leaves are all floats (the differentiated ones)."""
    positions = []
    for i, a in enumerate(args):
        leaves = flatten(a)[0]
        if leaves and all(isinstance(x, (float, np.floating)) or
                          (isinstance(x, np.ndarray) and x.dtype.kind == "f") for x in leaves):
            positions.append(i)
    return tuple(positions)


def check_grads(f, args, order=1, modes=("rev",), eps=1e-6, rtol=1e-5, atol=1e-7, seed=0, device="cpu"):
    """Check the derivatives of a float-scalar `f` at `args` along a random direction.

    Reverse mode must satisfy <v, grad f(x)> == (f(x + eps v) - f(x - eps v)) / (2 eps)
    for a random direction v over every all-float argument (others are held fixed), and
    forward mode jvp(f, x, v) the same. With `order=2` the gradient along a random
    cotangent u is checked in forward mode: <u, H v> by forward-over-reverse against
    central differences of the gradient (what `hvp` and `hessian` compute).
    `device="cuda"` runs `f` and its reverse-mode gradient on the GPU backend (forward
    mode and second order stay on the CPU). Raises AssertionError naming the mismatch.
    """
    args = tuple(args)
    positions = _float_positions(args)
    if not positions:
        raise ArgumentError("check_grads: no float arguments to differentiate")
    rng = np.random.default_rng(seed)
    flat, tds = [], []
    for i in positions:
        leaves, td = flatten(args[i])
        flat.append([np.asarray(x, dtype=np.float64) for x in leaves])
        tds.append(td)
    direction = [[rng.standard_normal(x.shape) for x in leaves] for leaves in flat]

    def at(t):
        new = list(args)
        for i, leaves, vs, td in zip(positions, flat, direction, tds):
            moved = [x + t * v for x, v in zip(leaves, vs)]
            new[i] = unflatten(td, [m if m.shape else float(m) for m in moved])
        return tuple(new)

    forward = jit(f, device=device)
    numeric = (forward(*at(eps)) - forward(*at(-eps))) / (2 * eps)
    for mode in modes:
        if mode == "rev":
            g = grad(f, argnums=positions, device=device)(*args)
            analytic = sum(float(np.sum(np.asarray(gl, dtype=np.float64) * v))
                           for gi, vs in zip(g, direction) for gl, v in zip(flatten(gi)[0], vs))
        elif mode == "fwd":
            tangents = list(_zero_tangents(args))
            for i, vs, td in zip(positions, direction, tds):
                tangents[i] = unflatten(td, [v if v.shape else float(v) for v in vs])
            analytic = float(jvp(f, args, tuple(tangents))[1])
        else:
            raise ArgumentError(f"check_grads: unknown mode {mode!r}; use 'fwd' and/or 'rev'")
        if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
            raise AssertionError(f"check_grads ({mode}): directional derivative {analytic!r} from "
                                 f"reverse mode, {numeric!r} from central differences at {args!r}")
    if order > 1:   # the gradient along a random cotangent is itself checked, in forward
        u = [[rng.standard_normal(x.shape) for x in leaves] for leaves in flat]   # mode: forward-over-reverse

        def along(*a):
            g = grad(f, argnums=positions)(*a)
            return sum((gl * w).sum() if np.ndim(w) else gl * float(w)
                       for gi, ws in zip(g, u) for gl, w in zip(flatten(gi)[0], ws))
        check_grads(along, args, order - 1, ("fwd",), eps, rtol, atol, seed + 1)
