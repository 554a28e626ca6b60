"""numba-cuda kernels, generated as Python source per op, shape and dtype and compiled
once (cached by their source text).

Every device tensor is a flat 1-D device array; shapes are static and baked into the
source, so a kernel indexes with plain integer arithmetic. A scalar argument is one of
three kinds: "h" a host number passed by value, "s" a one-element device array (a
scalar that a kernel produced), "a" a device array indexed per element.
Kernels loop grid-stride, so any grid covers any size: a real GPU gets many blocks, the
CUDA simulator (`NUMBA_ENABLE_CUDASIM=1`, one Python thread per GPU thread) a few threads.
"""
import math
import re

import numpy as np

from .. import primitives  # noqa: F401  (declares the ops `scalar` reads)
from ..ir.ops import CUDA, Op, clip_index_code, missing_rule
from ..primitives import special
from ..ir.types import FLOATS, NUMPY, RefType

_cache = {}
_env = None


def cuda():
    from numba import cuda as c
    return c


def simulated():
    from numba import config
    return bool(config.ENABLE_CUDASIM)


def environment():
    """The names generated kernels use: numba types and math on a GPU, NumPy scalars
    (IEEE results, no Python exceptions on overflow) under the simulator."""
    global _env
    if _env is not None:
        return _env
    c = cuda()
    import numba
    if simulated():
        env = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "u64": np.uint64, "b1": np.bool_,
               "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
               "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "fmod": np.fmod,
               "power": np.power, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
               "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "hypot": np.hypot,
               "log2": np.log2, "log10": np.log10, "lgamma": special.lgamma_impl,
               "quiet": lambda: np.errstate(all="ignore")}
    else:
        env = {"f64": numba.float64, "f32": numba.float32, "i64": numba.int64, "u64": numba.uint64,
               "b1": numba.boolean, "fmod": math.fmod, "power": math.pow}
    _add_math(env)
    env.update(cuda=c, numba=numba, inf=math.inf, nan=math.nan)
    exec(compile(_HELPERS, "<jitad cuda helpers>", "exec"), env)
    for name in [n for n in env if n.startswith("h_")]:
        env[name] = c.jit(device=True)(env[name])
    env["h_clip"] = c.jit(device=True)(special.backend(clip_index_code, where=env["h_where"]))
    env["h_polygamma"] = c.jit(device=True)(special.backend(special.polygamma_scalar, where=env["h_where"],
                                                            log=env["log"], sin=env["sin"], cos=env["cos"]))
    _env = env
    return env


def _add_math(env):
    """The `math` functions declared expressions call ("log1p({0})"), where `env` has none
    yet: Python's math on a GPU; the simulator computes in the operand's NumPy type."""
    for name in _math_names():
        if name not in env:
            fn = getattr(math, name)
            env[name] = (lambda f: lambda x, *y: type(x)(f(x, *y)))(fn) if simulated() else fn


# Integer and NaN semantics shared with the CPU backend (jitad.ir.ops): no traps.
_HELPERS = """
def h_imod(a, b):
    if b == 0 or b == -1:
        return a - a
    return a % b


def h_ifloordiv(a, b):
    if b == 0:
        return a - a
    if b == -1:
        return (a - a) - a
    return a // b


def h_ipow(a, b):
    r = a - a + 1
    if b < 0:
        return a - a
    while b:
        if b & 1:
            r = r * a
        a = a * a
        b >>= 1
    return r


def h_fmod(a, b):
    r = fmod(a, b)
    if r != 0 and ((r < 0) != (b < 0)):
        r = r + b
    return r


def h_ffloordiv(a, b):
    return (a - h_fmod(a, b)) / b


def h_max(a, b):
    if a != a or a >= b:
        return a
    return b


def h_min(a, b):
    if a != a or a <= b:
        return a
    return b


def h_to_i64(x):
    if x != x:
        return i64(0)
    if x >= 9.223372036854775807e18:
        return i64(9223372036854775807)
    if x < -9.223372036854775807e18:
        return i64(-9223372036854775807 - 1)
    return i64(x)


def h_where(c, a, b):
    return a if c else b


def h_dot_columns(x, y, p, q, k, n, depth):
    acc = x[0] * 0
    for r in range(depth):
        acc += x[r * k + p] * y[r * n + q]
    return acc


def h_threefry(key, count):   # jitad/primitives/bits.py, in i64 words masked to 32 bits
    m = 0xFFFFFFFF
    k0, k1, x0, x1 = (key >> 32) & m, key & m, (count >> 32) & m, count & m
    k2 = k0 ^ k1 ^ 0x1BD11BDA
    x0, x1 = (x0 + k0) & m, (x1 + k1) & m
    for i in range(5):
        for j in range(4):
            r = (13, 15, 26, 6, 17, 29, 16, 24)[(i % 2) * 4 + j]
            x0 = (x0 + x1) & m
            x1 = (((x1 << r) & m) | (x1 >> (32 - r))) ^ x0
        a = (k0, k1, k2)[(i + 1) % 3]
        c = (k0, k1, k2)[(i + 2) % 3]
        x0, x1 = (x0 + a) & m, (x1 + c + i + 1) & m
    return ((x0 - ((x0 >> 31) << 32)) << 32) | x1
"""

CTOR = {"f64": "f64", "f32": "f32", "i64": "i64", "bool": "b1"}
NUMBA_TYPE = {"f64": "numba.float64", "f32": "numba.float32", "i64": "numba.int64", "bool": "numba.boolean"}


def literal(value, dtype):
    if dtype == "bool":
        return "True" if value else "False"
    if dtype == "i64":
        return f"i64({int(value)})"
    return f"{CTOR[dtype]}({float(value)!r})"


def _template(spec):
    """A declaration's CUDA expression (jitad/primitives) as template(args, dtype) -> str."""
    if isinstance(spec, str):
        return lambda a, t, **attrs: spec.format(*a, t=CTOR[t], **attrs)
    return spec


def scalar(op):
    """template(argument expressions, input dtype) -> the expression of one element of
    elementwise `op`, from its declaration's `cuda` (looked up when used)."""
    spec = CUDA.declared.get(op)
    if spec is None:
        raise missing_rule(op, CUDA.what, CUDA.slot)
    return _template(spec)


def _math_names():
    """Functions of Python's `math` that declared expressions call ("log1p({0})")."""
    names = {n for spec in CUDA.declared.values() if isinstance(spec, str) for n in re.findall(r"(\w+)\(", spec)}
    return sorted(n for n in names if hasattr(math, n))


def _convert(expr, source, target):
    if target == "i64" and source in FLOATS:
        return f"h_to_i64({expr})"
    if target == "bool":
        return f"({expr} != {literal(0, source)})"
    return f"{CTOR[target]}({expr})"


def size_of(shape):
    return int(np.prod(shape, dtype=np.int64))


def broadcast_index(shape, loop, i="i"):
    """The flat index into an array of `shape` broadcast to `loop` at loop index `i`."""
    shape, loop = tuple(shape), tuple(loop)
    if shape == loop:
        return i
    if size_of(shape) == 1:
        return "0"
    lead = len(loop) - len(shape)
    terms, stride = [], 1
    for d in reversed(range(len(shape))):
        if shape[d] != 1:
            terms.append(f"(({i} // {size_of(loop[lead + d + 1:])}) % {loop[lead + d]}) * {stride}")
        stride *= shape[d]
    return " + ".join(terms) or "0"


def element(name, kind, index):
    return {"h": name, "s": f"{name}[0]", "a": f"{name}[{index}]"}[kind]


def compiled(source, name="kernel"):
    """The kernel defined by `source` (compiled once per distinct source)."""
    kernel = _cache.get(source)
    if kernel is None:
        namespace = dict(environment())
        _add_math(namespace)   # (those of primitives declared since)
        exec(compile(source, f"<jitad cuda {name}>", "exec"), namespace)
        kernel = cuda().jit(namespace[name])
        _cache[source] = kernel
    return kernel


def _grid_loop(n, lines, sim_quiet=True):
    """A grid-stride loop over range(n) around `lines` (one element each)."""
    body = ["    for i in range(cuda.grid(1), %s, cuda.gridsize(1)):" % n] + ["        " + s for s in lines]
    if simulated() and sim_quiet:   # NumPy scalars warn on overflow; IEEE results are wanted
        body = ["    with quiet():"] + ["    " + s for s in body]
    return body


def fused_source(body, shape, kinds, in_types):
    """A kernel for a fused body over `shape`: params in order, then one array per
    loop-shaped output, then one one-element array per total (`sum` in the body)."""
    names = {}
    pre, lines = [], []
    n_in = len(body.params)
    args = [f"a{k}" for k in range(n_in)]
    for k, (p, kind, t) in enumerate(zip(body.params, kinds, in_types)):
        if isinstance(t, RefType):
            names[p] = ("slot", f"a{k}", t.shape)
        elif kind == "a":
            names[p] = f"x{k}"
            lines.append(f"x{k} = a{k}[{broadcast_index(t.shape, shape)}]")
        else:
            names[p] = f"x{k}"
            pre.append(f"    x{k} = {element(f'a{k}', kind, 0)}")
    totals = []
    fresh = lambda: f"v{len(lines)}"   # a name per line: unique
    for node in body.nodes:
        ins = [names[v] for v in node.inputs]
        dtype = node.inputs[0].type.dtype if node.inputs else None
        if node.op == Op.SLOT:
            var = fresh()
            names[node.outputs[0]] = ("local", var)
            lines.append(f"{var} = {literal(0, node.attrs['type'].dtype)}")
            continue
        if node.op == Op.SLOT_GET:
            ref = ins[0]
            expr = ref[1] if ref[0] == "local" else f"{ref[1]}[{broadcast_index(ref[2], shape)}]"
        elif node.op == Op.SLOT_ADD:
            ref, value = ins
            target = ref[1] if ref[0] == "local" else f"{ref[1]}[{broadcast_index(ref[2], shape)}]"
            lines.append(f"{target} = {value}" if node.attrs.get("store") else f"{target} = {target} + {value}")
            continue
        elif node.op == Op.SUM:
            acc = f"t{len(totals)}"
            totals.append((acc, node.outputs[0]))
            pre.append(f"    {acc} = {literal(0, node.outputs[0].type.dtype)}")
            lines.append(f"{acc} = {acc} + {ins[0]}")
            names[node.outputs[0]] = acc
            continue
        elif node.op == Op.CONST:
            expr = literal(node.attrs["value"], node.attrs["type"].dtype)
        elif node.op == Op.CONVERT:
            expr = _convert(ins[0], dtype, node.attrs["dtype"])
        else:
            expr = scalar(node.op)(ins, node.inputs[-1].type.dtype if node.op == Op.SELECT else dtype, **node.attrs)
        var = fresh()
        lines.append(f"{var} = {expr}")
        names[node.outputs[0]] = var
    total_of = {v: acc for acc, v in totals}
    outs = [f"o{j}" for j, v in enumerate(body.outputs) if v not in total_of]
    lines += [f"o{j}[i] = {names[v]}" for j, v in enumerate(body.outputs) if v not in total_of]
    tails = [f"r{j}" for j, v in enumerate(body.outputs) if v in total_of]
    post = [f"    cuda.atomic.add(r{j}, 0, {total_of[v]})" for j, v in enumerate(body.outputs) if v in total_of]
    header = f"def kernel(n, {', '.join(args + outs + tails)}):"
    return "\n".join([header] + pre + _grid_loop("n", lines) + post) + "\n"


def map_source(kind_x, out_index, in_index, n, extra=(), op="=", value=None):
    """out[out_index] (op) x[in_index] for each i in range(n): copies, gathers, scatters.
    `extra` names further arguments (index arrays) the index expressions read."""
    src = value if value is not None else element("x", kind_x, in_index)
    target = f"out[{out_index}]"
    if op == "atomic":
        line = f"cuda.atomic.add(out, {out_index}, {src})"
    elif op == "+=":
        line = f"{target} = {target} + {src}"
    else:
        line = f"{target} = {src}"
    header = f"def kernel({', '.join(['x', 'out'] + list(extra))}):"
    return "\n".join([header] + _grid_loop(str(n), [line])) + "\n"


def conv2d_source(x_shape, w_shape, out_shape):
    """out[b, o, y, x] = sum over c, p, q of w[o, c, p, q] * x[b, c, y + p, x + q], one
    thread per output element."""
    _, c, h, w = x_shape
    _, _, kh, kw = w_shape
    _, o, oh, ow = out_shape
    lines = [f"b = i // {o * oh * ow}", f"oc = (i // {oh * ow}) % {o}", f"y = (i // {ow}) % {oh}",
             f"xo = i % {ow}", "acc = w[0] * 0",
             f"for c in range({c}):", f"    for p in range({kh}):", f"        for q in range({kw}):",
             f"            acc += w[((oc * {c} + c) * {kh} + p) * {kw} + q] * "
             f"x[((b * {c} + c) * {h} + y + p) * {w} + xo + q]",
             "out[i] = acc"]
    return "\n".join(["def kernel(x, w, out):"] + _grid_loop(str(size_of(out_shape)), lines)) + "\n"


def coordinate(i, shape, d):
    return f"(({i} // {size_of(shape[d + 1:])}) % {shape[d]})"


class _Source:
    """The scalar language of along-axis combines (jitad/primitives/along_axis.py) as kernel
    source: each primitive by its element expression, one line per value."""

    def __init__(self):
        self.lines = []

    @staticmethod
    def constant(value, dtype):
        return literal(value, dtype)

    def apply(self, op, values, dtypes, out_dtype):
        name = f"c{len(self.lines)}"
        self.lines.append(f"{name} = {scalar(op)(values, dtypes[-1] if op == Op.SELECT else dtypes[0])}")
        return name


def combine_lines(desc, dtype, acc, x):
    """Lines setting `acc` to an along-axis op's combine(acc, x) (`desc`: its description)."""
    source = _Source()
    result = desc.run(source, dtype, acc, x)
    return source.lines + [f"{acc} = {result}"]


def reduce_source(shape, axes, desc, dtype):
    """out[o] = the reduction `desc` of x over `axes` from its identity, one thread per
    output element."""
    kept = [d for d in range(len(shape)) if d not in axes]
    red = [d for d in axes]
    kept_shape = [shape[d] for d in kept]
    red_shape = [shape[d] for d in red]
    strides = [size_of(shape[d + 1:]) for d in range(len(shape))]
    base = " + ".join(f"{coordinate('i', kept_shape, k)} * {strides[d]}" for k, d in enumerate(kept)) or "0"
    offset = " + ".join(f"{coordinate('r', red_shape, k)} * {strides[d]}" for k, d in enumerate(red)) or "0"
    lines = [f"base = {base}", f"acc = {literal(desc.identity(dtype), dtype)}", f"for r in range({size_of(red_shape)}):",
             f"    v = x[base + {offset}]"] + ["    " + s for s in combine_lines(desc, dtype, "acc", "v")] + ["out[i] = acc"]
    return "\n".join(["def kernel(x, out):"] + _grid_loop(str(size_of(kept_shape)), lines)) + "\n"


def sort_source(rows, n, argsort):
    """One thread per row of `n`: a stable insertion sort (NaNs last, as NumPy) of row i of x
    into out, as values (`sort`) or as indices (`argsort`)."""
    key = (lambda k: f"x[base + out[base + {k}]]") if argsort else (lambda k: f"out[base + {k}]")
    less = "(v < w or (w != w and v == v))"
    lines = ["base = i * %d" % n, f"for j in range({n}):",
             "    v = x[base + j]", "    k = j",
             "    while k > 0:", f"        w = {key('k - 1')}", f"        if not {less}:", "            break",
             "        out[base + k] = out[base + k - 1]", "        k -= 1",
             f"    out[base + k] = {'j' if argsort else 'v'}"]
    return "\n".join(["def kernel(x, out):"] + _grid_loop(str(rows), lines)) + "\n"


def matmul_source(m, n, k, ta, tb, dtype, tile, accumulate=False):
    """out (m, n) = op(a) @ op(b) (+= with `accumulate`), tiled through shared memory."""
    a_at = "a[kk * %d + row]" % m if ta else "a[row * %d + kk]" % k
    b_at = "b[col * %d + kk]" % k if tb else "b[kk * %d + col]" % n
    zero = literal(0, dtype)
    lines = [
        "def kernel(a, b, out):",
        # one dynamic shared array (launch with `matmul_shared_bytes`) holds both tiles:
        # the simulator hands out static shared arrays through an unlocked dict, so
        # threads of one block can race to different copies; the dynamic one is unique
        f"    tiles = cuda.shared.array(0, {NUMBA_TYPE[dtype]})",
        f"    sa = tiles[:{tile * tile}]",
        f"    sb = tiles[{tile * tile}:]",
        "    tx = cuda.threadIdx.x",
        "    ty = cuda.threadIdx.y",
        f"    row = cuda.blockIdx.y * {tile} + ty",
        f"    col = cuda.blockIdx.x * {tile} + tx",
        f"    acc = {zero}",
        f"    for t in range({(k + tile - 1) // tile}):",
        f"        kk = t * {tile} + tx",
        f"        sa[ty * {tile} + tx] = {a_at} if row < {m} and kk < {k} else {zero}",
        f"        kk = t * {tile} + ty",
        f"        sb[ty * {tile} + tx] = {b_at} if kk < {k} and col < {n} else {zero}",
        "        cuda.syncthreads()",
        f"        for j in range({tile}):",
        f"            acc += sa[ty * {tile} + j] * sb[j * {tile} + tx]",
        "        cuda.syncthreads()",
        f"    if row < {m} and col < {n}:",
        f"        out[row * {n} + col] = {'out[row * %d + col] + ' % n if accumulate else ''}acc",
    ]
    return "\n".join(lines) + "\n"


def matmul_shared_bytes(dtype, tile):
    """Dynamic shared memory a `matmul_source` kernel launch needs: two tiles."""
    return 2 * tile * tile * np.dtype(NUMPY[dtype]).itemsize


def scan_source(outer, n, inner, reverse, desc, dtype):
    """The scan `desc` along the middle axis of x (outer, n, inner) from its identity:
    one thread per line."""
    lines = [f"base = (i // {inner}) * {n * inner} + i % {inner}", f"acc = {literal(desc.identity(dtype), dtype)}",
             f"for j in range({n}):", f"    p = base + {f'({n - 1} - j)' if reverse else 'j'} * {inner}",
             "    v = x[p]"] + ["    " + s for s in combine_lines(desc, dtype, "acc", "v")] + ["    out[p] = acc"]
    return "\n".join(["def kernel(x, out):"] + _grid_loop(str(outer * inner), lines)) + "\n"


def scatter_source(kind_index, kind_value, count, rows, rest, add):
    """out[clip(index[k])] (+)= x[k] for k in range(count), in order: one thread per
    element of a row, so a later write to a row wins as on the CPU."""
    target = f"out[h_clip({element('e0', kind_index, 'k')}, {rows}) * {rest} + i]"
    value = element("x", kind_value, f"k * {rest} + i")
    lines = [f"for k in range({count}):", f"    {target} = {target + ' + ' if add else ''}{value}"]
    return "\n".join(["def kernel(x, out, e0):"] + _grid_loop(str(rest), lines)) + "\n"
