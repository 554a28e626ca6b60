"""Scalar adjoint slots start at -0.0 (the exact additive identity, so LLVM folds the
first accumulation); what the user gets back must not change: gradients of inputs
without a path, and gradients whose every contribution is -0.0, read +0.0 as before."""
import math

import jitad
from jitad import IF, WHILE
from jitad.ir.interpret import interpret


def positive_zero(v):
    return v == 0.0 and math.copysign(1.0, v) == 1.0


def test_gradient_of_an_unused_input_is_positive_zero():
    gx, gy = jitad.grad(lambda x, y: x * 3.0, argnums=(0, 1))(1.0, 2.0)
    assert gx == 3.0 and positive_zero(gy)
    value, (gx, gy) = jitad.value_and_grad(lambda x, y: x, argnums=(0, 1))(1.0, 2.0)
    assert value == 1.0 and gx == 1.0 and positive_zero(gy)
    _, pullback = jitad.vjp(lambda x, y: 2.0 * x, 3.0, 4.0)
    gx, gy = pullback(1.0)
    assert gx == 2.0 and positive_zero(gy)


def test_negative_zero_contributions_still_give_positive_zero():
    assert positive_zero(jitad.grad(lambda x: -0.0 * x)(1.0))
    assert positive_zero(jitad.grad(lambda x: IF(x > 0.0, lambda: 1.0, lambda: x))(2.0))


def test_nested_gradient_in_a_loop_is_unchanged():
    """grad inside WHILE inside grad (the particle pattern): the inner gradient's value
    feeds the loop, so a sign or a fold mistake would change the result."""
    def f(w):
        force = jitad.grad(lambda x: w / jitad.sqrt(x * x + 1.0))

        def step(s):
            x, v, n = s
            return x + 0.1 * v, v - 0.1 * force(x), n + 1
        return WHILE(lambda s: s[2] < 50, step, (0.5, 0.0, 0))[0]
    h = 1e-6
    want = (jitad.jit(f)(0.7 + h) - jitad.jit(f)(0.7 - h)) / (2 * h)
    assert abs(jitad.grad(f)(0.7) - want) < 1e-6 * max(1.0, abs(want))


def test_interpreter_slots_start_like_compiled_code():
    program = jitad.trace(jitad.grad(lambda x, y: x * x, argnums=(0, 1)), 1.5, 2.0)
    got = interpret(program, [1.5, 2.0])
    assert got[0] == 3.0 and positive_zero(got[1])
