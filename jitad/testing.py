"""The one gradient checker: reverse mode against central differences.

>>> from jitad.testing import check_grads
>>> check_grads(lambda x, y: jitad.sin(x) * y, (0.3, 2.0))
"""
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .api import grad, jit, jvp
from .errors import ArgumentError
from .lower.compile import result_array_class
from .pytree import flatten, flatten_up_to, unflatten


def _zero_tangents(args):
    for a in args:
        leaves, td = flatten(a)
        yield unflatten(td, [np.zeros(np.shape(x)) if np.shape(x) else 0.0 for x in leaves])


def _float_positions(args):
    """Positions of the arguments whose leaves are all floats (the differentiated ones)."""
    positions = []
    for i, a in enumerate(args):
        leaves = flatten(a)[0]
        if leaves and all(isinstance(x, (float, complex, np.floating, np.complexfloating)) or
                          (isinstance(x, np.ndarray) and x.dtype.kind in "fc") for x in leaves):
            positions.append(i)
    return tuple(positions)


def _forward(f, device) -> Callable[..., Any]:
    """`f` as the central differences evaluate it: on the CPU called as it is (as JAX's and
    autograd's checks call it: eagerly, Python deciding on the values), compiled on another
    device."""
    return jit(f, device=device) if device != "cpu" else f


def check_grads(f, args=None, order=None, modes=None, eps=None, rtol=None, atol=None, seed=0, device="cpu"):
    """Check the derivatives of `f` at `args` along a random direction.

    Reverse mode must satisfy <v, grad f(x)> == (f(x + eps v) - f(x - eps v)) / (2 eps)
    for a random direction v over every all-float argument (others are held fixed), and
    forward mode jvp(f, x, v) the same. With `order=2` the gradient along a random
    cotangent u is checked in forward mode: <u, H v> by forward-over-reverse against
    central differences of the gradient (what `hvp` and `hessian` compute). A function
    with array or pytree outputs is checked through <w, f(x)> for a random w.
    `device="cuda"` runs `f` and its reverse-mode gradient on the GPU backend (forward
    mode and second order stay on the CPU). Raises AssertionError naming the mismatch.

    Both libraries' call forms work: JAX's `check_grads(f, args, order, modes=("fwd",
    "rev"), atol=, rtol=, eps=)` (defaults here: order 1, reverse mode), and autograd's
    `check_grads(f, modes=["fwd", "rev"], order=2)(*args)` (given no `args`, a checker
    to call on them; defaults: order 2, both modes).

    >>> check_grads(lambda x: jitad.sin(x) * x, (0.3,), order=2, modes=("fwd", "rev"))
    >>> check_grads(jitad.tanh, modes=["rev"])(np.array([0.1, 0.2]))
    """
    if args is None:   # autograd's form: a checker to call on the arguments
        return lambda *a: check_grads(f, a, 2 if order is None else order, modes or ("fwd", "rev"),
                                      eps, rtol, atol, seed, device)
    order = 1 if order is None else order
    modes = ("rev",) if modes is None else tuple(modes)
    eps, rtol, atol = 1e-6 if eps is None else eps, 1e-5 if rtol is None else rtol, 1e-7 if atol is None else atol
    if not isinstance(args, (tuple, list)):
        raise ArgumentError(f"check_grads: args must be a tuple of arguments, got {type(args).__name__}; "
                            "write check_grads(f, (x,))")
    args = tuple(args)
    positions = _float_positions(args)
    if not positions:
        raise ArgumentError("check_grads: no float arguments to differentiate")
    rng, kept = _generator(seed)
    flat, tds = [], []
    for i in positions:
        leaves, td = flatten(args[i])
        flat.append([np.asarray(x, dtype=np.complex128 if np.iscomplexobj(x) else np.float64) for x in leaves])
        tds.append(td)
    direction = [[_random(rng, x) for x in leaves] for leaves in flat]
    u = [[_random(rng, x) for x in leaves] for leaves in flat] if order > 1 else []   # (drawn next, as before)
    _hand_back(kept)

    array = result_array_class()   # (the moved arrays as jitad's: `x.at[i]` works on them, as on a traced value)

    def at(t):
        new = list(args)
        for i, leaves, vs, td in zip(positions, flat, direction, tds):
            moved = [x + t * v for x, v in zip(leaves, vs)]
            new[i] = unflatten(td, [m.view(array) if m.shape else m.item() for m in moved])
        return tuple(new)

    forward = _forward(f, device)
    plus, minus = forward(*at(eps)), forward(*at(-eps))
    if _real_number(plus):   # (a 0-d array too: `jnp.sum`'s result is differentiated as it is)
        plus, minus = float(plus), float(minus)
    else:   # an array or pytree result: check <w, f(x)>
        f, weigh = _weighted(f, plus, seed)
        plus, minus = weigh(plus), weigh(minus)
    numeric = (plus - minus) / (2 * eps)
    for mode in modes:
        if mode == "rev":
            g = grad(f, argnums=positions, device=device)(*args)
            analytic = sum(float(np.sum(np.real(np.asarray(gl) * v)))   # Re: a complex gradient is df/dx - i df/dy
                           for gi, vs in zip(g, direction) for gl, v in zip(flatten(gi)[0], vs))
        elif mode == "fwd":
            tangents = list(_zero_tangents(args))
            for i, vs, td in zip(positions, direction, tds):
                tangents[i] = unflatten(td, [v if v.shape else v.item() for v in vs])
            analytic = float(jvp(f, args, tuple(tangents))[1])
        else:
            raise ArgumentError(f"check_grads: unknown mode {mode!r}; use 'fwd' and/or 'rev'")
        if not _close(analytic, numeric, rtol, atol):
            raise AssertionError(f"check_grads ({mode}): directional derivative {analytic!r} from "
                                 f"reverse mode, {numeric!r} from central differences at {args!r}")
    if order > 1:   # the gradient along the random cotangent u is itself checked, in forward
        # mode: forward-over-reverse
        def along(*a):
            from .numpy import real
            g = grad(f, argnums=positions)(*a)
            return sum(real((gl * w).sum() if np.ndim(w) else gl * w[()])   # (a complex leaf whole, not its parts)
                       for gi, ws, td in zip(g, u, tds) for gl, w in zip(flatten_up_to(td, gi), ws))
        check_grads(along, args, order - 1, ("fwd",), eps, rtol, atol, seed + 1)


def _real_number(y):
    """A real float: a Python or NumPy float, or a 0-d float array."""
    return isinstance(y, (float, np.floating)) or isinstance(y, np.ndarray) and y.shape == () and y.dtype.kind == "f"


def _close(a, b, rtol, atol):
    """NumPy's `isclose` of two Python floats (infinities close to themselves, NaN to nothing),
    without its array machinery."""
    return a == b or math.isfinite(b) and abs(a - b) <= atol + rtol * abs(b)


_SEEDED = {}   # seed -> (a generator not in use, its seeded state)


def _generator(seed):
    """`(np.random.default_rng(seed), kept)`: a generator of that seed in its seeded state,
    taken from those kept (setting a state back costs a fifth of seeding a new one); `kept`
    hands it back once its draws are made (`_hand_back`). One in use is not kept meanwhile:
    a nested check or another thread seeds its own."""
    found = _SEEDED.pop(seed, None) if type(seed) is int else None
    if found is None:
        rng = np.random.default_rng(seed)
        return rng, (seed, rng, rng.bit_generator.state)
    found[0].bit_generator.state = found[1]
    return found[0], (seed, *found)


def _hand_back(kept):
    seed, rng, state = kept
    if type(seed) is int and len(_SEEDED) < 64:
        _SEEDED[seed] = (rng, state)


def _random(rng, x):
    """A random direction shaped as `x`, complex where `x` is."""
    v = rng.standard_normal(x.shape)
    return v + 1j * rng.standard_normal(x.shape) if np.iscomplexobj(x) else v


def _weighted(f, out, seed):
    """`(x -> <w, f(x)>, y -> <w, y>)` over the float leaves of f's result `out`, for a random
    w (the identities checked on it then check the whole Jacobian of f): the function
    differentiated, and the same product of a result of f already computed."""
    rng, kept = _generator(seed + 1000)
    leaves, td = flatten(out)
    weights = [_random(rng, np.asarray(y)) if np.asarray(y).dtype.kind in "fc" else None for y in leaves]
    _hand_back(kept)
    if all(w is None for w in weights):
        raise ArgumentError("check_grads: the function returns no float values to differentiate")

    def along(*a):
        from .numpy import real, sum as total
        ys = flatten_up_to(td, f(*a))   # (a complex staged leaf whole, not its two parts)
        terms: list[Any] = [real(total(y * w)) for y, w in zip(ys, weights) if w is not None]
        return sum(terms)
    along.__name__ = getattr(f, "__name__", "f")

    def weigh(result):
        ys = flatten_up_to(td, result)
        return float(sum(np.real(np.sum(np.asarray(y) * w)) for y, w in zip(ys, weights) if w is not None))
    return along, weigh
