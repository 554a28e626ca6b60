"""`particle` and `saddle` in jitad: nested AD with gradient-descent solvers.

Each is written once, parametrized by the two differentiation operators (`grad_r`:
reverse mode, `grad_f`: forward mode, one `jvp` per coordinate), as GradBench defines the
variants `rr`, `rf`, `fr`, `ff` (outer mode first). Points are tuples of staged floats;
the solver is a staged `WHILE` whose body calls the gradient, and in `particle` the
function under the outer gradient itself holds an unbounded `WHILE`.
"""
import jitad
from jitad import IF, WHILE

TOL = 1e-5          # the solver's stopping tolerance (gradient norm and step length)
ETA0 = 1e-5         # the solver's initial step size


# -- differentiation operators: f maps a tuple of floats to a float ------------------
# Each returns `vg` with vg(x) = (f(x), ∇f(x)): the solver needs both at every trial
# point, and one pass gives both (reverse mode computes f on its way; `jvp` returns it).

def grad_r(f):
    """Value and gradient of `f` at a tuple point, by reverse mode."""
    def vg(x):
        fx, gx = jitad.value_and_grad(lambda *xs: f(xs), argnums=tuple(range(len(x))))(*x)
        return fx, tuple(gx)
    return vg


def grad_f(f):
    """Value and gradient of `f` at a tuple point, one forward-mode `jvp` per coordinate."""
    def vg(x):
        n = len(x)
        pairs = [jitad.jvp(lambda *xs: f(xs), x, tuple(1.0 if j == i else 0.0 for j in range(n)))
                 for i in range(n)]
        return pairs[0][0], tuple(t for _, t in pairs)
    return vg


MODES = {"r": grad_r, "f": grad_f}
VARIANTS = ("rr", "rf", "fr", "ff")


# -- the solver ------------------------------------------------------------------------

def _norm(v):
    return jitad.sqrt(sum(a * a for a in v))


def argmin(grad, f, x0, checkpoints=None):
    """Gradient descent with step doubling every 10 accepted steps and halving on a
    rejected one; stops when the gradient or the step gets shorter than TOL. Each trial
    point costs one value-and-gradient pass (GradBench's reference solvers call f, then
    ∇f on acceptance: the same result, up to twice the work)."""
    vg = grad(f)

    def step(s):
        x, fx, gx, eta, i, _ = s

        def try_step():
            x1 = tuple(a - eta * b for a, b in zip(x, gx))

            def evaluate():
                f1, g1 = vg(x1)
                return IF(f1 < fx, lambda: (x1, f1, g1, eta, i + 1, True),
                          lambda: (x, fx, gx, eta / 2, 0, True))
            step_len = _norm(tuple(a - b for a, b in zip(x, x1)))
            return IF(step_len <= TOL, lambda: (x, fx, gx, eta, i, False), evaluate)

        return IF(_norm(gx) <= TOL, lambda: (x, fx, gx, eta, i, False),
                  lambda: IF(i == 10, lambda: (x, fx, gx, 2 * eta, 0, True), try_step))

    x0 = tuple(x0)
    return WHILE(lambda s: s[5], step, (x0, *vg(x0), ETA0, 0, True), checkpoints=checkpoints)[0]


def argmax(grad, f, x0, checkpoints=None):
    return argmin(grad, lambda x: -f(x), x0, checkpoints)


# -- particle --------------------------------------------------------------------------

def _potential(x, w):
    """Potential at x of unit charges at (10, 10 - w) and (10, 0)."""
    def inv_dist(cx, cy):
        dx, dy = x[0] - cx, x[1] - cy
        return 1.0 / jitad.sqrt(dx * dx + dy * dy)
    return inv_dist(10.0, 10.0 - w) + inv_dist(10.0, 0.0)


def naive_euler(grad, w, checkpoints=None):
    """Squared x-coordinate where the particle (Euler steps of 0.1) crosses the x axis."""
    dt = 0.1
    force = grad(lambda x: _potential(x, w))

    def step(s):
        x, v, _ = s
        a = tuple(-f for f in force(x)[1])    # [1]: the gradient (the value goes unused)
        x_new = (x[0] + dt * v[0], x[1] + dt * v[1])
        return IF(x_new[1] > 0.0,
                  lambda: (x_new, (v[0] + dt * a[0], v[1] + dt * a[1]), True),
                  lambda: (x, v, False))

    x, v, _ = WHILE(lambda s: s[2], step, ((0.0, 8.0), (0.75, 0.0), True), checkpoints=checkpoints)
    t_f = -x[1] / v[1]
    x_f = x[0] + t_f * v[0]
    return x_f * x_f


def particle(outer, inner, w0, checkpoints=None):
    return argmin(MODES[outer], lambda w: naive_euler(MODES[inner], w[0], checkpoints), (w0,), checkpoints)[0]


# -- saddle ----------------------------------------------------------------------------

def _saddle_f(p1, p2):
    """(x1² + y1²) − (x2² + y2²) with (x1, y1) = p1, (x2, y2) = p2 (written with products:
    GradBench's `**` would work the same)."""
    return (p1[0] * p1[0] + p1[1] * p1[1]) - (p2[0] * p2[0] + p2[1] * p2[1])


def saddle(outer, inner, start, checkpoints=None):
    """The min over p1 of the max over p2 of f, then the max over p2 at that p1; all
    solvers start at `start`. The final argmax uses the outer mode, as the eval asks."""
    start = tuple(start)
    g0, g1 = MODES[outer], MODES[inner]

    def inner_max(p1):
        return _saddle_f(p1, argmax(g1, lambda p2: _saddle_f(p1, p2), start, checkpoints))

    r1 = argmin(g0, inner_max, start, checkpoints)
    r2 = argmax(g0, lambda p2: _saddle_f(r1, p2), start, checkpoints)
    return r1 + r2


def compiled(eval_name, variant, checkpoints=None):
    """The jitted function for one variant: particle(w) -> w, saddle(s0, s1) -> 4 floats
    (`checkpoints=`: every solver and simulation loop keeps at most that many states in
    reverse mode)."""
    outer, inner = variant
    if eval_name == "particle":
        return jitad.jit(lambda w: particle(outer, inner, w, checkpoints))
    return jitad.jit(lambda a, b: saddle(outer, inner, (a, b), checkpoints))
