"""`jitad.test_util`: autograd's curried gradient check, `check_grads(f, modes=["rev"])(x)`,
on `jitad.testing.check_grads`."""
from . import testing


def check_grads(fun, argnum=0, modes=None, order=2):
    """autograd's form: check `fun`'s derivatives in its argument `argnum` against finite
    differences, to `order`: `check_grads(loss, modes=["rev"])(weights)`."""
    def check(*args):
        def f(x):
            return fun(*args[:argnum], x, *args[argnum + 1:])
        testing.check_grads(f, (args[argnum],), order=order, modes=tuple(modes or ("fwd", "rev")))
    return check
