"""The package's layers import downward only (docs/layout.md): the module import graph
of jitad (function-level imports included) has no cycle, each layer of
ir/ <- primitives/ <- staging <- numeric <- transforms/ <- lower/ <- api imports none above it, and
ir/, primitives/ and lower/ import no front-end module (the user-facing modules: linalg,
random, distributed, numpy_api, ...)."""
import ast
import pathlib

import jitad

ROOT = pathlib.Path(jitad.__file__).parent


def _module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph():
    """{module: set of jitad modules it imports anywhere in its source}."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def find_cycle(graph):
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = "done"
        stack.pop()
        return None
    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_import_graph_is_acyclic():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


LAYERS = ["jitad.ir", "jitad.primitives", "jitad.staging", "jitad.numeric", "jitad.transforms", "jitad.lower",
          "jitad.api"]
# what every layer may use: errors, timing, pytrees and the tree layout (no staging in them)
SUPPORT = {"jitad.errors", "jitad.timing", "jitad.pytree", "jitad.forest", "jitad.hostrng", "jitad.config"}


def layer(module):
    """The index of `module`'s layer in LAYERS, None for support and front-end modules."""
    for i, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            return i
    return None


def is_front_end(module):
    return layer(module) is None and module not in SUPPORT and module != "jitad"


def upward_imports(graph):
    return sorted(f"{m} -> {e}" for m, edges in graph.items() for e in edges
                  if layer(m) is not None and layer(e) is not None and layer(e) > layer(m))


def front_end_imports(graph, bottom=("jitad.ir", "jitad.primitives", "jitad.lower")):
    return sorted(f"{m} -> {e}" for m, edges in graph.items() for e in edges
                  if m.startswith(bottom) and is_front_end(e))


def test_layers_import_downward_only():
    assert upward_imports(import_graph()) == []


def test_ir_primitives_and_lowering_import_no_front_end():
    graph = import_graph()
    assert front_end_imports(graph) == []
    # the support modules stay below staging: they import no layer above the primitives
    assert [f"{m} -> {e}" for m in SUPPORT for e in graph[m] if layer(e) is not None and layer(e) > 1] == []


def test_the_checks_see_what_they_must():   # the checkers themselves, on made-up graphs
    assert upward_imports({"jitad.lower.tensor": {"jitad.random"}, "jitad.ir.ops": {"jitad.staging"}}) == \
        ["jitad.ir.ops -> jitad.staging"]
    assert front_end_imports({"jitad.lower.tensor": {"jitad.random", "jitad.errors", "jitad.ir.ops"},
                              "jitad.primitives.rules": {"jitad.numeric"}}) == ["jitad.lower.tensor -> jitad.random"]
    # a function-level import counts as well as a module-level one
    graph = import_graph()
    assert "jitad.primitives.linalg" in graph["jitad.lower.cuda"]


def test_finds_a_cycle():   # the checker itself
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
