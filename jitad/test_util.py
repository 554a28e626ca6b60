"""`jitad.test_util.check_grads` in both forms it has elsewhere: JAX's
`check_grads(f, args, order, modes=("fwd", "rev"))` and autograd's curried
`check_grads(f, argnum=0, modes=None, order=2)(*args)`; both check through
`jitad.testing.check_grads`."""
from . import testing


def check_grads(fun, args=None, order=2, modes=None, atol=None, rtol=None, eps=None, *, argnum=0):
    """JAX's form when `args` is a tuple or list: `check_grads(loss, (W, b), order=2)`;
    otherwise autograd's: `check_grads(loss, modes=["rev"])(weights)` (`args` is then
    autograd's `argnum`, the argument checked)."""
    modes = tuple(modes or ("fwd", "rev"))
    tolerances = {k: v for k, v in (("atol", atol), ("rtol", rtol), ("eps", eps)) if v is not None}
    if isinstance(args, (tuple, list)):
        testing.check_grads(fun, tuple(args), order=order, modes=modes, **tolerances)
        return None
    argnum = argnum if args is None else args

    def check(*call_args):
        def f(x):
            return fun(*call_args[:argnum], x, *call_args[argnum + 1:])
        testing.check_grads(f, (call_args[argnum],), order=order, modes=modes, **tolerances)
    return check
