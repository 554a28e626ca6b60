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
