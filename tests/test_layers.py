"""The package's layers import downward only: the module import graph of jitad
(function-level imports included) has no cycle, and the IR layer imports nothing of
the front end."""
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


def test_ir_imports_no_front_end():
    graph = import_graph()
    front = {"jitad.staging", "jitad.numeric", "jitad.random", "jitad.tree", "jitad.api", "jitad.primitives"}
    for m, edges in graph.items():
        if m.startswith("jitad.ir"):
            assert not {e for e in edges if e in front or e.startswith("jitad.primitives") or
                        e.startswith(("jitad.ad", "jitad.lower"))}, m


def test_finds_a_cycle():   # the checker itself
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
