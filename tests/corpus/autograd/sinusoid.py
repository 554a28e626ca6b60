# source: https://github.com/HIPS/autograd/blob/master/examples/sinusoid.py
# licence: MIT, (c) the President and Fellows of Harvard University (HIPS autograd)
# edits: plotting cut (each plt.plot's curves kept as `curves`, `taylor_curves`)
# compare: curves rtol=1e-13 atol=1e-15, taylor_curves rtol=1e-12 atol=1e-12
# steps: 600
# ruff: noqa (the program as its authors wrote it, with the edits above)

import jitad.numpy as np
from jitad import grad


def fun(x):
    return np.sin(x)


d_fun = grad(fun)  # First derivative
dd_fun = grad(d_fun)  # Second derivative

x = np.linspace(-10, 10, 100)
curves = (list(map(fun, x)), list(map(d_fun, x)), list(map(dd_fun, x)))


# Taylor approximation to sin function
def fun(x):
    currterm = x
    ans = currterm
    for i in range(1000):
        print(i, end=" ")
        currterm = -currterm * x**2 / ((2 * i + 3) * (2 * i + 2))
        ans = ans + currterm
        if np.abs(currterm) < 0.2:
            break  # (Very generous tolerance!)

    return ans


d_fun = grad(fun)
dd_fun = grad(d_fun)

x = np.linspace(-10, 10, 100)
taylor_curves = (list(map(fun, x)), list(map(d_fun, x)), list(map(dd_fun, x)))
