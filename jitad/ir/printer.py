"""A stable text form of programs: `%3:f64 = mul %1 %2`.

Names are assigned here, in order of definition: params first, then node outputs;
staged functions print as `fun @name(...)` blocks before `main`.
"""
import hashlib

import numpy as np

from .graph import FunDef, Program


class _Namer:
    exact = False   # `program_key_text`: every body, full array digests, reprs

    def __init__(self, funs):
        self.names = {}
        self.fun_names = {}
        for fun in funs:
            base, k = fun.name, 1
            while f"@{base}" in self.fun_names.values():
                k += 1
                base = f"{fun.name}{k}"
            self.fun_names[fun] = f"@{base}"

    def define(self, var):
        self.names[var] = f"%{len(self.names)}"
        return f"{self.names[var]}:{var.type}"

    def use(self, var):
        return self.names.get(var, "%?")


def _attr_text(value, namer):
    if isinstance(value, FunDef):
        return namer.fun_names.get(value, f"@{value.name}")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, np.ndarray):   # one line: small arrays in full, large ones by digest
        if namer.exact:
            data = np.ascontiguousarray(value)
            return f"<{data.dtype}{list(data.shape)} sha256:{hashlib.sha256(data.tobytes()).hexdigest()}>"
        if value.size <= 16:
            return repr(value.tolist())
        digest = hashlib.sha256(value.tobytes()).hexdigest()[:12]
        return f"<{value.dtype}{list(value.shape)} sha256:{digest}>"
    return repr(value) if namer.exact else str(value)


def _format_body(graph, namer, indent, header):
    params = " ".join(namer.define(v) for v in graph.params)
    lines = [f"{indent}{header}({params}) {{"]
    lines += _format_nodes(graph, namer, indent + "  ")
    lines.append(f"{indent}  return" + "".join(" " + namer.use(v) for v in graph.outputs))
    lines.append(f"{indent}}}")
    return lines


def _format_nodes(graph, namer, indent):
    lines = []
    for node in graph.nodes:
        outs = " ".join(namer.define(v) for v in node.outputs)
        attrs = {k: v for k, v in node.attrs.items() if k not in ("fun", "value") and (k != "type" or namer.exact)}
        text = node.op.name
        if "value" in node.attrs:
            text += " " + _attr_text(node.attrs["value"], namer)
        if "fun" in node.attrs:
            text += " " + _attr_text(node.attrs["fun"], namer)
        if attrs:
            text += "[" + ", ".join(f"{k}={_attr_text(v, namer)}" for k, v in sorted(attrs.items())) + "]"
        ins = " ".join(namer.use(v) for v in node.inputs)
        lines.append(f"{indent}{outs + ' = ' if outs else ''}{text}" + (f" {ins}" if ins else ""))
        labels = _BODY_LABELS.get(node.op.name, ("body",) * namer.exact * len(node.bodies))
        for label, body in zip(labels, node.bodies):
            lines += _format_body(body, namer, indent + "  ", label)
    return lines


_BODY_LABELS = {"if": ("then", "else"), "while": ("cond", "body"), "for": ("body",),
                "tree": ("combine",)}


def format_graph(graph, namer=None, header="main", exact=False):
    """`graph` as text; `exact`: every body (a fused loop's too), attributes by their reprs."""
    if namer is None:
        namer = _Namer([])
        namer.exact = exact
    return "\n".join(_format_body(graph, namer, "", header))


def format_program(program, exact=False):
    namer = _Namer(program.funs)
    namer.exact = exact
    parts = []
    for fun in program.funs:
        outs = ", ".join(map(str, fun.out_types or ()))
        header = f"fun {namer.fun_names[fun]}"
        text = _format_body(fun.body, namer, "", header)
        text[0] = text[0][:-1] + f"-> ({outs}) {{"
        parts.append("\n".join(text))
    parts.append(format_graph(program.main, namer))
    return "\n".join(parts)


Program.__str__ = format_program   # the graph module cannot import its printer back


def program_key_text(program):
    """The program as text that determines its compiled code (the disk cache's key):
    like `str(program)`, plus the bodies of fused loops and full digests of arrays."""
    return format_program(program, exact=True)
