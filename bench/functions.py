"""The benchmarked functions, written once on scalars and tuples so that jitad, JAX and
the hand-written numba gradients compute exactly the same thing."""
import numpy as np


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def rotate(v, q):
    """sum(v + 2 r×(r×v + w v)) on tuples of scalars (jitad, JAX)."""
    w, r = q[0], q[1:]
    c = cross(r, v)
    d = cross(r, tuple(c[k] + w * v[k] for k in range(3)))
    return sum(v[k] + 2.0 * d[k] for k in range(3))


def chain(x, n):
    for _ in range(n):
        x = 0.5 * x + 0.5 * x
    return x


DT, K, REST = 0.01, 1.0, 1.0     # particles: Euler step, spring constant, rest length
PAIRS = tuple((i, j) for i in range(4) for j in range(i + 1, 4))   # a tuple: numba freezes it
STATE0 = (0.0, 0.0, 1.1, 0.0, 0.1, 0.9, 1.05, 1.2,          # x0 y0 … x3 y3
          0.1, -0.2, 0.0, 0.3, -0.1, 0.05, 0.2, -0.1)       # vx0 vy0 … vx3 vy3


def spring_forces(xs, sqrt):
    """Forces of springs (rest length REST) between every pair of 4
    particles, on a flat tuple of 8 coordinates; `sqrt` is the library's."""
    f = [0.0] * 8
    for i, j in PAIRS:
        dx, dy = xs[2 * i] - xs[2 * j], xs[2 * i + 1] - xs[2 * j + 1]
        s = -K * (1.0 - REST / sqrt(dx * dx + dy * dy))
        f[2 * i], f[2 * i + 1] = f[2 * i] + s * dx, f[2 * i + 1] + s * dy
        f[2 * j], f[2 * j + 1] = f[2 * j] - s * dx, f[2 * j + 1] - s * dy
    return f


def euler_step(state, sqrt):
    xs, vs = state[:8], state[8:]
    f = spring_forces(xs, sqrt)
    return tuple(xs[k] + DT * vs[k] for k in range(8)) + tuple(vs[k] + DT * f[k] for k in range(8))


def energy(state, sqrt):
    xs, vs = state[:8], state[8:]
    e = 0.5 * sum(v * v for v in vs)
    for i, j in PAIRS:
        dx, dy = xs[2 * i] - xs[2 * j], xs[2 * i + 1] - xs[2 * j + 1]
        stretch = sqrt(dx * dx + dy * dy) - REST
        e = e + 0.5 * K * stretch * stretch
    return e


def random_tree(n, seed):
    """A random binary tree of `n` nodes numbered in pre-order: node k's left subtree is
    k+1 … k+nl and its right subtree follows; nl is uniform in [0, size - 1]."""
    rng = np.random.default_rng(seed)
    left, right = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    stack = [(0, n)]                  # (first index of a subtree, its size)
    while stack:
        k, size = stack.pop()
        nl = int(rng.integers(0, size))
        nr = size - 1 - nl
        if nl:
            left[k] = k + 1
            stack.append((k + 1, nl))
        if nr:
            right[k] = k + 1 + nl
            stack.append((k + 1 + nl, nr))
    return left, right


INCIDENCE = np.zeros((len(PAIRS), 4))   # spring p pulls particle i (+1) against j (-1)
for _p, (_i, _j) in enumerate(PAIRS):
    INCIDENCE[_p, _i], INCIDENCE[_p, _j] = 1.0, -1.0


def python_fori_loop(lower, upper, body, state):
    for i in range(lower, upper):
        state = body(i, state)
    return state


def particles_vectorized(xp, steps, fori_loop=python_fori_loop, incidence=INCIDENCE):
    """The particles loss vectorized over springs, for array libraries (`xp` is torch,
    jax.numpy or autograd.numpy): a handful of ops per step instead of ~100 scalar ones."""
    def step(i, pos_vel):
        pos, vel = pos_vel
        delta = incidence @ pos
        dist = xp.sqrt(xp.sum(delta * delta, 1))
        force = incidence.T @ ((-K * (1.0 - REST / dist))[:, None] * delta)
        return pos + DT * vel, vel + DT * force

    def loss(state):
        pos, vel = fori_loop(0, steps, step, (xp.reshape(state[:8], (4, 2)),
                                              xp.reshape(state[8:], (4, 2))))
        delta = incidence @ pos
        stretch = xp.sqrt(xp.sum(delta * delta, 1)) - REST
        return 0.5 * xp.sum(vel * vel) + xp.sum(0.5 * K * stretch * stretch)
    return loss
