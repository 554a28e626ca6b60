"""A walk through jitad's pipeline on one small function, in the spirit of JAX's
Autodidax (but much shorter). Run it and read the output next to this file:

    .venv/bin/python examples/walkthrough.py

    Python function --trace--> SSA graph --verify--> reverse mode by CPS
        --passes (jitad/ir/passes.py)--> lower to LLVM IR --O3--> native code
        behind a CPython entry point

Every op on the way is a primitive declared once in jitad/primitives (its type rule,
NumPy meaning, VJP and lowerings together; section 0 shows one, and where each kind of
op is declared, differentiated and lowered).

The function has a data-dependent branch and a data-dependent loop, the two things
a tracer cannot unroll and the reason jitad has the combinators IF and WHILE.
"""
import re
import textwrap
import time

import numpy as np

import jitad
from jitad import IF, WHILE


def note(text):
    print(textwrap.fill(textwrap.dedent(text).strip(), 88), end="\n\n")


def section(title):
    print(f"\n{'=' * 88}\n{title}\n{'=' * 88}\n")


def f(x):
    y = IF(x > 0.0, lambda: jitad.sin(x) * x, lambda: -x)            # a branch on data
    return WHILE(lambda t: t < 10.0, lambda t: t * 2.0 + y, y + 1.0)  # t -> 2t + y until t >= 10


# ------------------------------------------------------------------------------------
section("0. A primitive: one declaration")
note("""
    `jitad.erf` is declared by one `declare` call in jitad/primitives/elementwise.py: type
    rule, NumPy meaning, VJP (from its derivative), the libm function the LLVM lowering
    calls, the CUDA expression, flags, and this wrapper's docstring. The primitive holds
    its name, arity and flags; each rule goes into the rule table of its transformation
    or backend (jitad.ir.ops.TABLES), where they look it up:
""")
from jitad.ir.ops import TABLES, Op  # noqa: E402
print({field: getattr(Op.ERF, field) for field in ("name", "arity", "elementwise", "float_only")})
print({slot: table.declared.get(Op.ERF) for slot, table in TABLES.items() if slot in ("llvm", "cuda")})
print("jitad.erf(0.5) =", jitad.erf(0.5), "  grad:", jitad.grad(jitad.erf)(0.5), end="\n\n")
note("""
    The folders say where an op lives. A math op is declared in jitad/primitives/ (its
    VJP beside it); the IR's own ops (slots, closures, control flow, `custom_vjp`,
    `checkpoint`, `debug_print`) in jitad/ir/ops.py, and they are differentiated by
    rules in jitad/transforms/vjp.py (CPS) and jitad/transforms/jvp.py. A backend looks an op's
    lowering up when it meets it: the declaration's rule (which may call a kernel the
    backend offers: GEMM, sorting, LAPACK), else, for the IR's own ops, one registered
    under the op in jitad/lower/ (ir_ops.py, debug.py, cuda.py). Looked up as they do:
""")
from jitad.transforms import vjp as reverse  # noqa: E402
from jitad.lower import cuda, llvm  # noqa: E402
print(f"{'op':12} {'derivative':24} {'LLVM lowering':20} {'CUDA lowering'}")
for op in (Op.ERF, Op.TRANSPOSE, Op.MATMUL, Op.WHILE, Op.CHECKPOINT, Op.DEBUG_PRINT):
    rule = reverse.CONTROL.get(op) or TABLES["vjp"].find(op)
    derivative = rule.__module__ if rule else "(none: no gradient)"
    try:
        on_gpu = cuda.rule_of(op).__module__
    except jitad.JitadError:
        on_gpu = "(CPU only)"
    print(f"{op.name:12} {derivative:24} {llvm.lowering(op).__module__:20} {on_gpu}")
print()

# ------------------------------------------------------------------------------------
section("1. Trace: run f once on proxies, recording an SSA graph")
note("""
    jitad calls f with a proxy for x. Every operation on a proxy appends a node to the
    current graph and returns a new proxy; nothing is computed. IF and WHILE trace their
    lambdas into sub-graphs held by one node. The graph is first-order: the branches
    read x and the loop body reads y from the enclosing code, and the tracer has turned
    those captures into explicit operands (the `if` takes x, the `while` takes y after
    its state), so every sub-graph only sees its parameters. `jitad.trace` also runs the
    verifier, which checks SSA scoping, types and shapes (with JITAD_VERIFY=1, as in the
    tests, it also runs after every pass of step 3).
""")
print(f"{jitad.trace(f, 0.5)}\n")
note("""
    Python's own `if x > 0:` would have to decide here, at trace time, with no value for
    x, so jitad refuses it and names the combinator to use. Python control flow on
    Python values (a loop over range(3), a flag) simply unrolls into the graph.
""")


def python_if(x):
    if x > 0.0:
        return x
    return -x


try:
    jitad.jit(python_if)(0.5)
except jitad.StagingError as e:
    print(f"StagingError: {e}\n")

# ------------------------------------------------------------------------------------
section("2. Reverse mode by continuation-passing (CPS)")
g, jf, x = jitad.grad(f), jitad.jit(f), 0.5
print(f"f(0.5) = {jf(x)!r}    df/dx(0.5) = {g(x)!r}    "
      f"central difference = {(jf(x + 1e-6) - jf(x - 1e-6)) / 2e-6!r}\n")
note("""
    grad stages a second program. Following the Lantern papers, each forward operation's
    adjoint update is emitted *after* a call to the rest of the program (its
    continuation), so when the call returns, every later use of the value has already
    added its contribution. Reading the program below:
""")
note("""
    `slot` is a mutable cell (`ref<f64>`), starting at zero (-0.0, the exact additive
    identity): one per value whose adjoint is accumulated. `slot_add` accumulates into it, `slot_get` reads it. Slots become
    stack allocations (LLVM `alloca`) in the frame that created them.
""")
note("""
    `closure @k_if ...` reifies the continuation of the IF: everything after it, as a
    function (code pointer + the values it captures, here the slot that receives the
    final value). Both branches call it with `apply` -- once, not duplicated -- passing
    their result and a fresh slot for that result's adjoint; after `apply` returns, the
    slot holds df/dy and the branch runs its own adjoint updates (the sin and mul rules
    in `then`, the neg rule in `else`).
""")
note("""
    The WHILE became `@while_rev`, a recursive function: one frame per iteration. A
    frame runs the body, calls itself for the next iteration, and after that call
    returns it does this iteration's adjoint updates with the values still in its
    frame -- no tape. When the condition fails it applies the loop's continuation,
    `@k_while`, the end of the program: it stores the result (`slot_set`) and seeds
    d(out)/d(out) = 1 (`slot_add ... 1.0`). main returns the adjoint of x.
""")
print(f"{g.ir}\n")
note("""
    (`g.ir` is the program as compiled, so it is also after the passes of step 3,
    which here only moved the `slot`s to the top of each block.)
""")

# ------------------------------------------------------------------------------------
section("2b. Opcodes of their own: custom rules, checkpoints, printing")
note("""
    Three staged-function features are opcodes rather than flags on `call`, so each
    transformation handles them in one visible place. `custom_vjp` (jitad/custom.py)
    calls a function whose gradient is the user's `bwd`; `checkpoint` a function whose
    values are not kept but recomputed in the backward pass; `debug_print`
    (jitad/debug.py) prints run-time values. Traced:
""")


@jitad.custom_vjp
def clip_grad(x):                                                      # identity, gradient clipped
    return x


clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jitad.clip(g, -1.0, 1.0),))


@jitad.checkpoint
def block(x):
    return jitad.sin(x) * x


def k(x):
    jitad.debug.print("x = {}", x)
    return block(clip_grad(3.0 * x))


print(f"{jitad.trace(k, 0.5)}\n")
note("""
    Under `grad` (jitad/transforms/vjp.py): the forward pass calls `@block` and keeps
    nothing of it; the backward pass computes `sin` and `mul` again and differentiates
    them; the `custom_vjp` call's adjoint is the user's `bwd`, the `maximum`/`minimum`
    of `clip`, staged in place. The print runs once, in the forward pass:
""")
print(f"{jitad.trace(jitad.grad(k), 0.5)}\n")
print(f"grad(k)(0.5) = {jitad.grad(k)(0.5)}: d block/dy = cos(1.5) * 1.5 + sin(1.5) = 1.10 at y = 3x = 1.5,\n"
      "clipped to 1 by the custom rule, times 3\n")

# ------------------------------------------------------------------------------------
section("3. Fuse: elementwise chains on tensors become single loops")
note("""
    On scalars there is nothing to fuse. On tensors, every elementwise op of the
    reverse program would be a loop over memory of its own. Here is the gradient of
    sum(tanh(v) * v) for v of shape (4,), first straight out of reverse mode (`trace` of
    the staged `grad`): each adjoint step is bracketed by `arena_mark`/`arena_release`,
    the stack discipline of tensor memory (what a continuation allocates is released
    when it returns).
""")
h = lambda v: jitad.sum(jitad.tanh(v) * v)                             # noqa: E731
v = np.linspace(-1.0, 1.0, 4)
print(f"{jitad.trace(jitad.grad(h), v)}\n")
gh = jitad.grad(h)
gh(v)
note("""
    After the passes (`jitad.ir.passes.PIPELINE`: dead code, unread tables, fusion, peepholes):
    the forward pass (tanh, mul and the sum, kept in a register) is one
    `fused` loop, and the whole backward pass another, which accumulates straight into
    the gradient's slot. (A tensor `slot_get` names the slot's buffer, which is why it
    may be printed before the loop that fills it.)
""")
print(f"{gh.ir}\n")

# ------------------------------------------------------------------------------------
section("4. Lower to LLVM IR and optimize (O3)")
note("""
    One table maps each opcode to its LLVM lowering (elementwise rules come from the
    declarations, tensor rules from jitad/lower/tensor.py). Functions stay functions: the
    loop's recursion is a real recursive call, a continuation is a `{code, env}` pair of
    pointers, an adjoint slot an `alloca`. Every function entry compares the frame
    address with the calling thread's stack limit (measured once per thread), so a loop
    too deep for the stack returns an error code instead of crashing (the call is then
    retried on a thread with a 512 MiB stack, or raises jitad.ResourceError). One function of `g.llvm_ir` (symbol hashes removed):
""")
lines = [re.sub(r"jitad_[0-9a-f]{32}_", "", line) for line in g.llvm_ir.splitlines()]
start = next(k for k, line in enumerate(lines) if re.match(r"define .*while_rev\(", line))
end = lines.index("}", start)
print("\n".join(line[:120] for line in lines[start:end + 1]))
print(f"\n({len(lines)} lines in all; print(g.llvm_ir) shows them)\n")
note("""
    Above is `@while_rev` after O3. Look for the stack check (`llvm.frameaddress`
    compared with the budget; past it the function stores an error code and returns),
    the iteration's adjoint slot (`alloca double`, set to -0.0 in `then`), the forward body
    (`fmul` by 2, `fadd` of y), the recursive call, then this iteration's adjoint
    updates after it (`load`, `fadd`, `store` through the slot pointers). When the
    condition fails, the block named after `code0` (the closure's code, inlined by O3)
    is the continuation `@k_while`: it stores the result and adds the seed 1.0. The
    pointer loaded at entry and stored back before returning is the top of the tensor
    arena: a frame releases what it allocated.
""")

# ------------------------------------------------------------------------------------
section("5. The native entry point")
note("""
    Last, jitad writes a CPython entry point in LLVM IR (the `entry` function at the
    end of `g.llvm_ir`): it checks that the argument is exactly a float,
    unboxes it, runs main and boxes the result. Anything else (an int, an array, a
    keyword argument) is forwarded to the Python dispatcher, which converts or compiles
    a new signature. The entry is installed as the function's `__call__`, so a call
    with a known signature never runs Python code of jitad's. Object code is cached on
    disk, so the next process loads it instead of compiling.
""")
n = 100_000
start = time.perf_counter()
for _ in range(n):
    g(x)
per_call = (time.perf_counter() - start) / n
print(f"traced and compiled (or loaded from the cache) in {g.compile_seconds * 1e3:.0f} ms; "
      f"one call of the gradient takes {per_call * 1e9:.0f} ns")
