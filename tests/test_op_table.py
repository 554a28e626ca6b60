"""The op table as a whole: every primitive has every rule (or is on a commented opt-out
list), the rules agree with each other (vmap is a loop over the lanes, forward mode is
the transposed reverse mode), the registries are read when used (a primitive declared
after `import jitad` works everywhere), and a missing rule is a `MissingRuleError`."""
import llvmlite.ir as ir
import numpy as np
import pytest

import jitad
from jitad.errors import MissingRuleError
from jitad.ir import ops
from jitad.ir.interpret import interpret
from jitad.lower.llvm import LL
from jitad.ir.ops import IMPLS, PRIMITIVES, Op, declare, elementwise, shape_rule
from jitad.numeric import bind
from jitad.primitives.rules import elementwise_vjp, linear

DECLARED = dict(PRIMITIVES)   # jitad's own primitives (before the ones the tests declare)


# -- primitives declared after import ------------------------------------------------

def _cube_llvm(lo, node, ins):
    return [lo.b.fmul(ins[0], lo.b.fmul(ins[0], ins[0]))]


def _flip_llvm(lo, node, ins):   # x[::-1] along the first axis, as a loop nest
    (x,), t = ins, node.inputs[0].type
    out = lo.result_buffer(node.outputs[0])
    last = ir.Constant(ir.IntType(64), t.shape[0] - 1)

    def body(idx):
        src = lo.elem_ptr(x, t, [lo.b.sub(last, idx[0])] + list(idx[1:]))
        lo.b.store(lo.b.load(src, typ=LL[t.dtype]), lo.elem_ptr(out, t, idx))
    lo.loop_nest(t.shape, body)
    return [out]


@pytest.fixture
def late_ops():
    """An elementwise and a non-elementwise primitive declared now, removed afterwards."""
    cube = declare("late_cube", elementwise, lambda x: x * x * x, arity=1, flags="elementwise float_only",
                   vjp=elementwise_vjp(lambda x, out: 3 * x * x), llvm=_cube_llvm, cuda="({0} * {0} * {0})")
    flip = declare("late_flip", shape_rule(lambda types: types[0].shape), lambda x: np.flip(x, 0).copy(),
                   arity=1, flags="pure linear", vjp=linear(lambda g, x, out: bind(Op.LATE_FLIP, g)),
                   batch=lambda node, ins, size, mask: [(jitad.numpy_api.flip(ins[0][0], 1), True)],
                   llvm=_flip_llvm)
    yield cube, flip
    for op in (cube, flip):
        del PRIMITIVES[op.value]
        IMPLS.pop(op, None)
        delattr(Op, op.value.upper())


def test_a_primitive_declared_after_import_works_everywhere(late_ops):
    cube, flip = late_ops
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    f = lambda x: jitad.sum(bind(flip, bind(cube, x)) * np.arange(6.0).reshape(2, 3))
    want = np.sum(np.flip(x ** 3, 0) * np.arange(6.0).reshape(2, 3))
    grad_want = 3 * x ** 2 * np.flip(np.arange(6.0).reshape(2, 3), 0)
    assert np.isclose(jitad.jit(f)(x), want)
    assert np.allclose(jitad.grad(f)(x), grad_want)
    v = np.ones_like(x)
    out, tangent = jitad.jvp(f, (x,), (v,))
    assert np.isclose(out, want) and np.isclose(tangent, np.sum(grad_want * v))
    xs = np.stack([x, 2 * x, -x])
    assert np.allclose(jitad.vmap(f)(xs), [f(np.asarray(row)) for row in xs])
    assert np.allclose(jitad.vmap(jitad.grad(f))(xs), [jitad.grad(f)(row) for row in xs])
    program = jitad.trace(f, x)
    assert np.isclose(interpret(program, [x])[0], want)
    jitad.testing.check_grads(f, (x,), order=2)


def test_a_late_elementwise_primitive_runs_on_the_gpu_backend(late_ops):
    pytest.importorskip("numba.cuda")
    cube, flip = late_ops
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    assert np.allclose(jitad.jit(lambda x: bind(cube, x) + 1.0, device="cuda")(x), x ** 3 + 1.0)
    with pytest.raises(MissingRuleError, match="`late_flip` has no CUDA rule: give its declaration `cuda=`"):
        jitad.jit(lambda x: bind(flip, x), device="cuda")(x)


@pytest.fixture
def bare_op():
    """A non-elementwise primitive with a type rule and nothing else."""
    op = declare("late_bare", shape_rule(lambda types: types[0].shape), arity=1, flags="pure")
    yield op
    del PRIMITIVES[op.value]
    delattr(Op, op.value.upper())


def test_a_missing_rule_names_the_primitive_and_the_slot(bare_op):
    x = np.arange(3.0)
    f = lambda x: jitad.sum(bind(bare_op, x))
    for transform, words in [(jitad.grad, "VJP (reverse-mode) rule: give its declaration `vjp=`"),
                             (jitad.jit, "LLVM lowering rule: give its declaration `llvm=`"),
                             (lambda f: lambda x: jitad.jvp(f, (x,), (x,)), "JVP (forward-mode) rule: give its "
                                                                          "declaration `jvp=`")]:
        with pytest.raises(MissingRuleError, match="primitive `late_bare` has no " + words.replace("(", r"\(")
                           .replace(")", r"\)")):
            transform(f)(x)
    with pytest.raises(MissingRuleError, match="`late_bare` has no NumPy"):
        f(x)   # eagerly
    with pytest.raises(MissingRuleError, match="`late_bare` has no NumPy"):
        interpret(jitad.trace(f, x), [x])
    assert issubclass(MissingRuleError, jitad.JitadError)
