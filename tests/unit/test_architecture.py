"""Architecture rules, checked on the source with ``ast`` (nothing of doctrans is imported):

* the import graph of ``doctrans`` (module-level and function-level ``import`` / ``from …
  import``) has no cycle;
* no module imports another module's private name (``from doctrans.x import _name``);
* in ``doctrans.dp`` dependencies point one way: ``generator`` imports neither ``train`` nor
  ``apply``, ``apply`` does not import ``train``;
* ``doctrans.inference.translate`` imports exactly one name from ``doctrans.dp``.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "doctrans"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str | None]]:
    """(imported doctrans module, imported name or None) for every import statement anywhere
    in the module, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(pkg + ([node.module] if node.module else []))
            for a in node.names:
                if f"{base}.{a.name}" in modules:           # from package import module
                    out.append((f"{base}.{a.name}", None))
                elif base in modules:
                    out.append((base, a.name))
    return out


def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, str | None]]]]:
    modules = _modules()
    imports = {m: _imports(m, p, modules) for m, p in modules.items()}
    return {m: {d for d, _ in imps if d != m} for m, imps in imports.items()}, imports


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, …, a], or None (iterative DFS)."""
    state: dict[str, int] = {}                      # 1 = on the stack, 2 = done
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_import_graph_has_no_cycle():
    graph, _ = _graph()
    assert "doctrans.dp.generator" in graph and len(graph) > 30     # the walk found the package
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_find_cycle_reports_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_private_names_imported_across_modules():
    _, imports = _graph()
    bad = [f"{m}: from {src} import {n}" for m, imps in imports.items() for src, n in imps
           if n and n.startswith("_") and not n.startswith("__") and src != m]
    assert not bad, "private imports:\n" + "\n".join(bad)


def test_dp_dependencies_point_one_way():
    graph, imports = _graph()
    assert not graph["doctrans.dp.generator"] & {"doctrans.dp.train", "doctrans.dp.apply"}
    assert "doctrans.dp.train" not in graph["doctrans.dp.apply"]
    from_dp = {(src, n) for src, n in imports["doctrans.inference.translate"] if src.startswith("doctrans.dp")}
    assert {n for _, n in from_dp} == {"DPInputVariants"}, from_dp
    models = {"labeler", "thesis"}
    for m in ("doctrans.dp.generator", "doctrans.dp.train", "doctrans.dp.apply"):  # no model named
        tree = ast.parse(_modules()[m].read_text(encoding="utf-8"))
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not literals & models, m
        assert not {src for src, _ in imports[m]} & {f"doctrans.dp.models.{x}" for x in models}, m
