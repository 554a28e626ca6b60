"""The op table as a whole: every primitive has every rule (or is on a commented opt-out
list), the rules agree with each other (vmap is a loop over the lanes, forward mode is
the transposed reverse mode), the registries are read when used (a primitive declared
after `import jitad` works everywhere), and a missing rule is a `MissingRuleError`."""
import llvmlite.ir as ir
import numpy as np
import pytest

import jitad
from jitad.errors import MissingRuleError
from jitad.ir.interpret import interpret
from jitad.lower.llvm import LL
from jitad.ir.ops import IMPLS, PRIMITIVES, TABLES, Op, declare, elementwise_type, shape_rule
from jitad.numeric import bind
from jitad.primitives import along_axis
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
    cube = declare("late_cube", elementwise_type, lambda x: x * x * x, arity=1, flags="elementwise float_only",
                   vjp=elementwise_vjp(lambda x, out: 3 * x * x), llvm=_cube_llvm, cuda="({0} * {0} * {0})")
    flip = declare("late_flip", shape_rule(lambda types: types[0].shape), lambda x: np.flip(x, 0).copy(),
                   arity=1, flags="pure linear", vjp=linear(lambda g, x, out: bind(Op.LATE_FLIP, g)),
                   batch=lambda node, ins, size, mask: [(jitad.numpy_api.flip(ins[0][0], 1), True)],
                   llvm=_flip_llvm)
    yield cube, flip
    for op in (cube, flip):
        del PRIMITIVES[op.name]
        for table in TABLES.values():
            table.declared.pop(op, None)
        delattr(Op, op.name.upper())


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


def test_a_late_elementwise_primitive_runs_on_the_gpu_backend(late_ops):
    pytest.importorskip("numba.cuda")
    cube, flip = late_ops
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    assert np.allclose(jitad.jit(lambda x: bind(cube, x) + 1.0, device="cuda")(x), x ** 3 + 1.0)
    with pytest.raises(MissingRuleError, match="`late_flip` has no CUDA rule: give its declaration `cuda=`"):
        jitad.jit(lambda x: bind(flip, x), device="cuda")(x)


@pytest.fixture
def late_scan():
    """A running maximum declared now by its combine function, removed afterwards."""
    op = along_axis.declare_scan("late_cummax", along_axis.maximum, -np.inf, flags="pure kernel float_only")
    yield op
    del PRIMITIVES[op.name], IMPLS[op], along_axis.SCANS[op]
    delattr(Op, op.name.upper())


def test_a_scan_declared_after_import_lowers_on_both_backends(late_scan):
    x = np.array([[0.5, -1.0, 2.0, 1.0], [1.5, 3.0, -0.75, 4.0]])
    f = lambda x: bind(late_scan, x, axis=1, reverse=True)
    want = np.flip(np.maximum.accumulate(np.flip(x, 1), 1), 1)
    np.testing.assert_array_equal(jitad.jit(f)(x), want)
    pytest.importorskip("numba.cuda")
    np.testing.assert_array_equal(jitad.jit(f, device="cuda")(x), want)


@pytest.fixture
def bare_op():
    """A non-elementwise primitive with a type rule and nothing else."""
    op = declare("late_bare", shape_rule(lambda types: types[0].shape), arity=1, flags="pure")
    yield op
    del PRIMITIVES[op.name]
    delattr(Op, op.name.upper())


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


# -- every primitive has every rule, or a reason not to ------------------------------

TRANSFORMS = tuple(TABLES)   # one rule table per transformation and backend: impl vjp jvp batch llvm cuda


def _has_rule(op, slot):
    """Whether `op` has a rule in the table `slot`, looked up as the transformation does
    (control flow, whose rules take the whole node, is dispatched before the tables)."""
    from jitad.ir import interpret as interpreter
    from jitad.transforms import jvp as forward, vjp as reverse
    beside = {"impl": op in interpreter._CONTROL or op in interpreter._EFFECTS, "vjp": op in reverse.CONTROL,
              "jvp": op in forward.RULES}
    if slot == "cuda" and op.elementwise and op not in TABLES["cuda"].declared:
        return False   # an elementwise op runs on the GPU only by its element expression
    return beside.get(slot, False) or TABLES[slot].find(op) is not None


def _without(names, *transforms):
    return {(name, t) for name in names.split() for t in transforms}


EFFECT_OPS = ("slot slot_get slot_set slot_add slot_add_at slot_scatter_add slot_set_at slot_add_slice "
              "table table_get table_set table_add table_gather table_scatter closure apply arena_mark "
              "arena_release")
OPT_OUT = (
    # bool or integer results (or no operand a derivative reaches): no tangent flows
    _without("const tree_get tree_root tree_size lt le gt ge eq ne and or not threefry2x32", "vjp", "jvp")
    | _without("argsort arena_mark arena_release", "jvp")
    # a constant is never batched; a forest's trees are read through TREE and tree_get only
    | _without("const tree_root tree_size", "batch")
    # reverse mode's own code (slots, tables, closures, arena marks): made after vmap and
    # reverse mode ran (vmap names them when it meets them: `batching.EFFECTS`); forward
    # mode and the interpreter have rules for them
    | _without(EFFECT_OPS, "vjp", "batch")
    # made by the passes after every transformation (`ir/passes.py`); the interpreter runs
    # the program as traced (a fused loop's body is elementwise ops it knows)
    | _without("fused matmul_add table_gemm_add", "vjp", "batch") | _without("fused matmul_add", "jvp")
    | _without("fused", "impl")
    # made by passes for the LLVM backend only (`LLVM_ONLY` in `ir/passes.py`): the GPU and the
    # interpreter run the products, copies and additions they replaced
    | _without("strided_bmm strided_bmm_add matmul_bias row_loops", "vjp", "jvp", "batch", "impl", "cuda")
    # effects without results: nothing to differentiate (reverse mode runs them once)
    | _without("debug_print check", "vjp", "jvp")
    # debug_print calls back into Python: compiled CPU code only (the interpreter computes values)
    | _without("debug_print", "cuda", "impl")
    # pure_callback's call back into Python: compiled CPU code (and the interpreter) only
    | _without("host_call", "cuda")
    # reverse mode runs the user's rule (`transforms/vjp.py`)
    | _without("custom_vjp", "vjp")
    # converted inside the kernel source (`cuda_kernels._convert`), not by an expression;
    # a bitcast reinterprets bits on the CPU backend only (`jitad.lax.bitcast_convert_type`)
    | _without("convert bitcast", "cuda")
    # LAPACK and MPI run on the CPU only (`linalg.check_cpu`, `distributed`); a collective
    # is batched by vmap's per-lane fallback
    | _without("linalg allreduce bcast", "cuda") | _without("allreduce bcast", "batch")
    # a collective over a named axis exists only until the vmap naming it batches it away
    | _without("named", "cuda")
    # vmap's own node, expanded by vmap before any other transformation or backend sees it
    | _without("deferred_vjp", "impl", "vjp", "jvp", "llvm", "cuda")
)


def test_a_primitive_s_backend_rules_are_in_its_declaration():
    """jitad/lower registers rules by opcode for the IR's own ops only (control flow,
    slots, tables, and what the passes make: `fused`, `matmul_add`, `table_gemm_add`); a
    primitive's LLVM and CUDA rules are its declaration's, which call the kernels the
    lowerer and the runner offer. The exception: `reshape` on the GPU is a view, while its
    `cuda` is its element expression inside fused kernels."""
    from jitad.lower import cuda, llvm
    registered = {(op.name, "llvm") for op in llvm.LOWER if not op.elementwise} | \
        {(op.name, "cuda") for op in cuda.RULES}
    assert {(name, t) for name, t in registered if name not in IR_OPS} == {("reshape", "cuda")}


def test_every_primitive_has_every_rule_or_a_reason():
    missing = {(name, t) for name, op in DECLARED.items() for t in TRANSFORMS if not _has_rule(op, t)}
    assert missing - OPT_OUT == set(), "rules missing (give them, or add a commented opt-out)"
    assert OPT_OUT - missing == set(), "opt-outs of rules that exist now (remove them)"


# -- the rules agree: vmap is a loop over the lanes, jvp is the transposed vjp --------

RNG = np.random.default_rng(0)
LANES = 3


def _floats(*shape):
    return RNG.uniform(0.2, 0.9, shape)


def _ints(n, *shape):
    return RNG.integers(-n, n, shape)


def _elementwise_case(op):
    shape = (2, 3)
    if op.name in ("and", "or", "not"):
        return [RNG.random(shape) < 0.5 for _ in range(op.arity)], {}
    if op.name == "threefry2x32":
        return [RNG.integers(-2 ** 62, 2 ** 62, shape) for _ in range(2)], {}
    if op.name in ("xor", "shift_left", "shift_right_logical", "shift_right_arithmetic", "population_count", "clz"):
        return [RNG.integers(-2 ** 62, 2 ** 62, shape)] + [RNG.integers(-2, 66, shape)] * (op.arity - 1), {}
    if op.name == "bitcast":
        return [_floats(*shape)], {"dtype": "i64", "width": 64, "unsigned": False}
    if op.name == "select":
        return [RNG.random(shape) < 0.5, _floats(*shape), _floats(*shape)], {}
    attrs = {"polygamma": {"n": 1}, "convert": {"dtype": "f32"}}.get(op.name, {})
    return [_floats(*shape) for _ in range(op.arity)], attrs


SLICED = {"starts": (0, 1), "stops": (4, 5), "steps": (2, 2)}
CASES = {   # primitive -> (operands, attrs) of one lane
    "broadcast": ([_floats(3)], {"shape": (2, 3)}),
    "sum": ([_floats(2, 3)], {"axes": (1,), "keepdims": False}),
    "max": ([_floats(2, 3)], {"axes": (0,), "keepdims": True}),
    "reshape": ([_floats(2, 3)], {"shape": (3, 2)}),
    "transpose": ([_floats(2, 3, 4)], {"perm": (2, 0, 1)}),
    "matmul": ([_floats(3, 2), _floats(3, 4)], {"ta": True, "tb": False}),
    "bmm": ([_floats(2, 2, 3), _floats(2, 4, 3)], {"ta": False, "tb": True}),
    "cumsum": ([_floats(2, 3)], {"axis": 1, "reverse": True}),
    "cumprod": ([_floats(2, 3)], {"axis": 0, "reverse": False}),
    "logcumsumexp": ([_floats(2, 3)], {"axis": 1, "reverse": True}),
    "conv2d": ([_floats(1, 2, 4, 4), _floats(3, 2, 2, 2)], {}),
    "index": ([_floats(4, 3), np.int64(-1)], {}),
    "gather": ([_floats(4, 3), _ints(4, 5)], {}),
    "slice": ([_floats(4, 5)], SLICED),
    "unslice": ([_floats(2, 2)], {"shape": (4, 5), **SLICED}),
    "concat": ([_floats(2, 3), _floats(2, 2)], {"axis": 1}),
    "scatter": ([_floats(4, 3), np.array([2, -1]), _floats(2, 3)], {"add": False}),
    "sort": ([_floats(2, 5)], {}),
    "argsort": ([_floats(2, 5)], {}),
}
UNCASED = {   # primitives checked elsewhere
    "linalg": "its many functions: tests/numpy/test_linalg.py (vmap and gradients of each)",
    "allreduce": "MPI collectives: tests/interop/test_distributed.py", "bcast": "MPI collectives: tests/interop/test_distributed.py",
    "named": "collectives over vmap's named axes: tests/lax/test_lax_named_axes.py",
    "host_call": "a call back into Python (pure_callback), no derivative: tests/compat/test_pure_callback.py",
}


# the IR's own ops (control flow, calls, effects, trees, what the passes make): the
# transformations' own rules for them are tested with the programs that hold them
IR_OPS = set(("const tree_get tree_root tree_size debug_print check fused matmul_add table_gemm_add strided_bmm strided_bmm_add matmul_bias "
              "row_loops "
              "if while "
              "for call checkpoint custom_vjp tree forest deferred_vjp " + EFFECT_OPS).split())


def _math_primitives():
    for name, op in DECLARED.items():
        if op.elementwise or name in CASES or name in UNCASED:
            yield name
        else:
            assert name in IR_OPS, f"`{name}`: give it a case in CASES"


def _case(name):
    op = DECLARED[name]
    return _elementwise_case(op) if op.elementwise else CASES[name]


def _run(fn, *args):
    """`fn(*args)` traced and run by the reference interpreter (no compiling: fast)."""
    return interpret(jitad.trace(fn, *args), list(args))


def _lanes(x):
    """LANES different values like `x`."""
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return RNG.random((LANES,) + x.shape) < 0.5
    if x.dtype.kind == "i":
        return np.stack([np.roll(x, k) if x.shape else x - k for k in range(LANES)])
    return RNG.uniform(0.2, 0.9, (LANES,) + x.shape)


@pytest.mark.parametrize("name", [n for n in _math_primitives() if n not in UNCASED])
def test_vmap_is_a_loop_over_the_lanes(name):
    op, (args, attrs) = DECLARED[name], _case(name)
    f = lambda *a: bind(op, *a, **attrs)
    stacked = [_lanes(a) for a in args]
    for axes in [(0,) * len(args), (0,) + (None,) * (len(args) - 1), (None,) * (len(args) - 1) + (0,)]:
        if len(set(axes)) == 1 and axes[0] is None:
            continue
        ins = [s if ax == 0 else a for s, a, ax in zip(stacked, args, axes)]
        (got,) = _run(lambda *a: jitad.vmap(f, in_axes=axes)(*a), *ins)
        want = np.stack([IMPLS[op](*[x[k] if ax == 0 else x for x, ax in zip(ins, axes)], **attrs)
                         for k in range(LANES)])
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"in_axes={axes}")


def _differentiable(name):
    op, (args, attrs) = DECLARED[name], _case(name)
    return any(np.asarray(a).dtype.kind == "f" for a in args) and (name, "jvp") not in OPT_OUT \
        and np.asarray(IMPLS[op](*args, **attrs)).dtype.kind == "f"


@pytest.mark.parametrize("name", [n for n in _math_primitives() if n not in UNCASED and _differentiable(n)])
def test_jvp_is_the_transposed_vjp(name):
    """<u, J v> from forward mode equals <J^T u, v> from reverse mode, on random u and v."""
    op, (args, attrs) = DECLARED[name], _case(name)
    wrt = [k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f"]

    def f(*xs):
        full = list(args)
        for k, x in zip(wrt, xs):
            full[k] = x
        return bind(op, *full, **attrs)
    xs = [args[k] for k in wrt]
    vs = [RNG.standard_normal(np.shape(x)) for x in xs]
    out = np.asarray(IMPLS[op](*args, **attrs))
    u = RNG.standard_normal(out.shape).astype(out.dtype)
    (tangent,) = _run(lambda *a: jitad.jvp(f, tuple(a[:len(xs)]), tuple(a[len(xs):]))[1], *xs, *vs)
    cotangents = _run(lambda *a: jitad.vjp(f, *a[:len(xs)])[1](a[-1]), *xs, u)
    forward = np.sum(u * tangent)
    reverse = sum(np.sum(c * v) for c, v in zip(cotangents, vs))
    tol = 1e-5 if out.dtype == np.float32 else 1e-10
    assert np.isclose(forward, reverse, rtol=tol, atol=tol), (forward, reverse)
