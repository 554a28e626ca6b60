"""`jitad.scipy.integrate`: `trapezoid` (JAX's and SciPy's) and `odeint` with autograd's
signature, on jitad's Dormand-Prince solver (`jitad.experimental.ode`)."""
from .. import numeric as N
from ..errors import ArgumentError
from ..experimental import ode

__all__ = ["trapezoid", "odeint"]


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of samples `y` along `axis` by the trapezoidal rule, at points `x`
    (a 1-D array along the axis, or one shaped as `y`) or spaced `dx`:
    `trapezoid(np.array([1.0, 2.0, 3.0])) == 4.0`."""
    shape = N._shape(y)
    if not shape:
        raise ArgumentError("trapezoid: y must have at least one axis")
    axis = axis % len(shape)
    y = N.NUMPY_API["moveaxis"](y, axis, -1)
    if x is None:
        widths = dx
    else:
        if len(N._shape(x)) == 1:
            if N._shape(x)[0] != shape[axis]:
                raise ArgumentError(f"trapezoid: x has {N._shape(x)[0]} points, y {shape[axis]} along axis {axis}")
        else:
            x = N.NUMPY_API["moveaxis"](x, axis, -1)
        widths = x[..., 1:] - x[..., :-1]
    return N.sum(widths * (y[..., 1:] + y[..., :-1]), axis=-1) * 0.5


def odeint(func, y0, t, args=(), rtol=1.49012e-8, atol=1.49012e-8, mxstep=None, hmax=None, **_unused):
    """The solution of dy/dt = func(y, t, *args) at the times `t`, with autograd's (and
    SciPy's) signature: `odeint(func, y0, t, args=(k,))`. Solved by JAX's adaptive
    Dormand-Prince method (not SciPy's LSODA): the two agree to the tolerances.
    Differentiable in `y0`, `t` and `args`."""
    if _unused:
        raise ArgumentError(f"odeint: jitad does not take SciPy's LSODA settings {sorted(_unused)}; "
                            "give rtol, atol, mxstep or hmax")
    if not isinstance(args, tuple):
        args = (args,)
    return ode.odeint(func, y0, t, *args, rtol=rtol, atol=atol, mxstep=float("inf") if mxstep is None else mxstep,
                      hmax=float("inf") if hmax is None else hmax)


# -- the helpers autograd's `scipy.integrate` defines or imports -----------------------

from ..builtins import tuple  # noqa: E402,F401,A004  (autograd's names: the builtin)
from ..differential_operators import make_vjp  # noqa: E402,F401
from ..extend import defvjp_argnums, primitive  # noqa: E402,F401
from ..misc.flatten import flatten  # noqa: E402,F401


def grad_odeint(yt, func, y0, t, func_args, **kwargs):
    """The VJP of `odeint(func, y0, t, func_args, **kwargs)`, whose result is `yt`:
    `g -> (None, cotangent of y0, of t, of func_args)` (None: `func` has none), as
    autograd's helper returns; computed by reverse mode through jitad's solver."""
    from .. import api
    func_args = func_args if isinstance(func_args, tuple) else (func_args,)

    def solve(y0, t, args):
        return odeint(func, y0, t, args, **kwargs)
    _, pullback = api.vjp(solve, y0, t, func_args)
    return lambda g: (None, *pullback(g))


def argnums_unpack(all_vjp_builder):
    """A `defvjp_argnums` rule from a maker of every argument's cotangent at once:
    `all_vjp_builder(ans, *args, **kwargs) -> (g -> one cotangent per argument)`, the
    chosen ones kept."""
    def build_selected_vjps(argnums, ans, args, kwargs):
        vjp_all = all_vjp_builder(ans, *args, **kwargs)

        def chosen(g):
            every = vjp_all(g)
            return [every[i] for i in argnums]
        return chosen
    return build_selected_vjps
