"""A first tour of jitad: compiled functions and gradients through staged control flow.

Run it with `make demo`.
"""
import math

import jitad
from jitad import FOR, FUN, IF, TREE, WHILE


def show(label, value, expected=None):
    check = "" if expected is None else ("  ok" if math.isclose(value, expected, rel_tol=1e-9) else "  MISMATCH")
    print(f"  {label:<44} {value!r}{check}")


print("jit: compiled once per signature, then native calls")
f = jitad.jit(lambda x, y: x * y + jitad.sin(x))
show("f(3.0, 4.0) = 3*4 + sin 3", f(3.0, 4.0), 12 + math.sin(3))

print("IF: both branches staged, chosen at run time")
absval = jitad.jit(lambda x: IF(x > 0, lambda: x, lambda: -x))
show("absval(-2.5)", absval(-2.5), 2.5)

print("WHILE: a data-dependent loop")
halve = jitad.jit(lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x))
show("halve(1e6)", halve(1e6), 1e6 * 0.5 ** 20)

print("FOR: staged bounds")
triangle = jitad.jit(lambda n: FOR(0, n, lambda i, s: s + i, 0))
show("triangle(100)", triangle(100), 4950)


@FUN(out=0)
def fib(n):
    return IF(n < 2, lambda: n, lambda: fib(n - 1) + fib(n - 2))


print("FUN: a staged function may recurse (give its output type with out=)")
show("fib(20)", jitad.jit(fib)(20), 6765)

print("TREE: recursion over a binary tree given as arrays")
tree = jitad.Tree.from_nested((5.0, (3.0, None, None), (4.0, None, None)))
product = jitad.jit(lambda t, x: TREE(t, x, lambda node, l, r: l * r * node.value))
show("product(tree 5/(3,4), x=2) = 60 x^4", product(tree, 2.0), 60 * 2.0 ** 4)

print("grad: reverse mode by continuations, through all of the above")
show("d/dx x^3 at 2", jitad.grad(lambda x: x ** 3)(2.0), 12.0)
show("d/dx halve(x) at 1e6 (JAX refuses this one)",
     jitad.grad(lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x))(1e6), 0.5 ** 20)
show("d/dx product(tree, x) at 2 = 240 x^3",
     jitad.grad(lambda x, t: TREE(t, x, lambda node, l, r: l * r * node.value))(2.0, tree), 240 * 8.0)


@jitad.jit_grad
def loss(w, x, y):
    return (w["a"] * x + w["b"] - y) ** 2


print("jit_grad: a training step returning (loss, grads)")
params = {"a": 0.0, "b": 0.0}
for step in range(200):
    value, grads = loss(params, 2.0, 5.0)
    params = {k: params[k] - 0.05 * grads[k] for k in params}
show("loss after 200 SGD steps", value)
show("a * 2 + b (target 5)", params["a"] * 2 + params["b"], 5.0)

print("the staged IR of a small function:")
print(jitad.trace(lambda x: IF(x > 0, lambda: x * x, lambda: -x), 1.0))
