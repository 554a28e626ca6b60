"""`jitad.numpy.linalg`: `jitad.linalg` under NumPy's module path (`jnp.linalg.solve`),
with autograd's helpers of `autograd.numpy.linalg`: `T`, `add2d` and the VJP makers
`grad_*` (`grad_inv(ans, x)(g)` is the cotangent of `x`), here from jitad's own
derivatives of the same functions."""
import numpy as _np

from ..linalg import *  # noqa: F401,F403
from ..linalg import __all__ as _linalg_all
from .. import linalg as _la
from . import _common

__all__ = list(_linalg_all) + ["T", "add2d", "grad_inv", "grad_pinv", "grad_solve", "grad_cholesky", "grad_eigh",
                               "grad_eig", "grad_svd", "norm_vjp", "norm_jvp", "wrap_namespace", "defvjp", "defjvp"]


def T(x):
    """The last two axes swapped (autograd's helper): `T(a)` is `a.swapaxes(-1, -2)`."""
    jnp = _common.jnp()
    return jnp.swapaxes(x, -1, -2)


def _dot(a, b):
    """The product of the last two axes, batched over the leading ones (autograd's private
    helper, which its own tests call): `_dot(a, b)` is `a @ b` for stacks of matrices."""
    jnp = _common.jnp()
    return jnp.einsum("...ij,...jk->...ik", a, b)


def add2d(x):
    """`x` with two trailing axes of length one (autograd's helper): `add2d(x)` is `x[..., None, None]`."""
    jnp = _common.jnp()
    return jnp.expand_dims(jnp.asarray(x), (-1, -2))


def _vjp_maker(fn, n_args=1):
    """autograd's form of a VJP: `maker(ans, *args)` returns `g -> cotangent of args[argnum]`."""
    def maker(ans, *args, **kwargs):
        from ..api import vjp
        return lambda g: vjp(lambda *xs: fn(*xs, **kwargs), *args[:n_args])[1](g)[0]
    return maker


def _doc(fn, name):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"autograd's VJP maker of `{name[5:]}`: `{name}(ans, x)(g)` is the cotangent of `x` "
                  f"given the cotangent `g` of `ans = {name[5:]}(x)`.")
    return fn


grad_inv = _doc(_vjp_maker(_la.inv), "grad_inv")
grad_pinv = _doc(_vjp_maker(_la.pinv), "grad_pinv")
grad_cholesky = _doc(_vjp_maker(_la.cholesky), "grad_cholesky")

def grad_eig(ans, x):
    """autograd's VJP maker of `eig`, declined: `eig`'s results are complex, which jitad does
    not differentiate; for a symmetric matrix use `grad_eigh` (and `eigh`)."""
    from ..errors import ArgumentError
    raise ArgumentError("`grad_eig`: jitad does not differentiate `eig` (complex eigenvalues and vectors); "
                        "for a symmetric matrix use `jnp.linalg.eigh` and `grad_eigh`")


def grad_eigh(ans, x, UPLO="L"):
    """autograd's VJP maker of `eigh`: `grad_eigh((w, v), x)((gw, gv))` is the cotangent of
    `x` in autograd's convention (the triangle `UPLO` names only, each entry off the
    diagonal counted for its symmetric pair; jitad's own gradient is the symmetric matrix)."""
    from ..api import vjp
    jnp = _common.jnp()
    tri = jnp.tril if UPLO == "L" else jnp.triu

    def vjp_fn(g):
        sym = vjp(lambda a: _la.eigh(a, UPLO), x)[1](tuple(g))[0]
        return tri(sym) + tri(sym, -1 if UPLO == "L" else 1)
    return vjp_fn


def grad_svd(usv_, a, full_matrices=True, compute_uv=True):
    """autograd's VJP maker of `svd`: `grad_svd(ans, a)(g)` is the cotangent of `a`
    (`g` a tuple `(gu, gs, gvh)`, or `gs` with `compute_uv=False`)."""
    from ..api import vjp
    fn = lambda m: _la.svd(m, full_matrices=full_matrices, compute_uv=compute_uv)  # noqa: E731
    return lambda g: vjp(fn, a)[1](tuple(g) if compute_uv else g)[0]


def grad_solve(argnum, ans, a, b):
    """autograd's VJP maker of `solve` for argument `argnum` (0: `a`, 1: `b`):
    `grad_solve(1, ans, a, b)(g)` is the cotangent of `b`."""
    from ..api import vjp
    return lambda g: vjp(_la.solve, a, b)[1](g)[argnum]


def norm_vjp(ans, x, ord=None, axis=None, keepdims=False):
    """autograd's VJP maker of `norm`: `norm_vjp(ans, x)(g)` is the cotangent of `x`."""
    from ..api import vjp
    return lambda g: vjp(lambda v: _la.norm(v, ord, axis, keepdims), x)[1](g)[0]


def norm_jvp(g, ans, x, ord=None, axis=None, keepdims=False):
    """autograd's JVP of `norm`: the derivative of `norm(x)` in the direction `g`."""
    from ..api import jvp
    return jvp(lambda v: _la.norm(v, ord, axis, keepdims), (x,), (g,))[1]


from .numpy_names import wrap_namespace  # noqa: E402,F401  (autograd's helper, also here)

test = _np.linalg.test   # NumPy's test runner of the module, as autograd's namespace carries it


def _rule_target(fun, who, kind):
    if not hasattr(fun, kind):
        from ..errors import ArgumentError
        raise ArgumentError(f"`{who}` needs a function made with `jitad.{kind[3:]}` (autograd's `@primitive`): "
                            f"decorate it with `@jitad.custom_{kind[3:]}` first, then call `{who}(fun, ...)`")
    return fun


def defvjp(fun, *vjpmakers, argnums=None):
    """autograd's `defvjp` on a `jitad.custom_vjp` function: `vjpmakers[k](ans, *args)(g)`
    is the cotangent of argument `argnums[k]` (all arguments in order by default; a missing
    maker gives zeros): `defvjp(f, lambda ans, x: lambda g: g * 2 * x)`."""
    _rule_target(fun, "defvjp", "defvjp")
    jnp = _common.jnp()

    def fwd(*args):
        ans = fun.fn(*args)
        return ans, (ans, args)

    def bwd(res, g):
        ans, args = res
        nums = list(range(len(args))) if argnums is None else list(argnums)
        out = [jnp.zeros_like(a) for a in args]
        for k, maker in zip(nums, vjpmakers):
            if maker is not None:
                out[k] = maker(ans, *args)(g)
        return tuple(out)
    return fun.defvjp(fwd, bwd)


def defjvp(fun, *jvpfuns, argnums=None):
    """autograd's `defjvp` on a `jitad.custom_jvp` function: `jvpfuns[k](g, ans, *args)` is
    the output's tangent from argument `argnums[k]`'s tangent `g` (summed over the
    arguments): `defjvp(f, lambda g, ans, x: g * 2 * x)`."""
    _rule_target(fun, "defjvp", "defjvp")

    def jvp(primals, tangents):
        ans = fun.fn(*primals)
        nums = list(range(len(primals))) if argnums is None else list(argnums)
        total = 0.0
        for k, rule in zip(nums, jvpfuns):
            if rule is not None:
                total = total + rule(tangents[k], ans, *primals)
        return ans, total
    return fun.defjvp(jvp)


def _square_plain(a):
    return _common.plain_f64(a) and a.ndim == 2 and a.shape[0] == a.shape[1]


# the functions whose meaning on a plain float64 matrix is NumPy's (NumPy raising where jitad
# gives NaN: a singular or indefinite matrix), with the arguments they take so
_NUMPY_SAME = {
    "solve": lambda a, b: _square_plain(a) and _common.plain_f64(b) and b.ndim in (1, 2) and b.shape[0] == a.shape[0],
    "inv": _square_plain,
    "cholesky": _square_plain,
}


def _wrap_all():
    import types
    from ._common import returns_arrays
    for name in __all__:
        fn = globals().get(name)
        if isinstance(fn, types.FunctionType) and name not in ("wrap_namespace", "defvjp", "defjvp"):
            globals()[name] = returns_arrays(fn)
            if name in _NUMPY_SAME:
                globals()[name] = _common.reference_first(getattr(_np.linalg, name), globals()[name],
                                                          _NUMPY_SAME[name])


_wrap_all()


from . import _complex_linalg  # noqa: E402  (complex matrices: their dispatchers)
_complex_linalg.install(globals())
