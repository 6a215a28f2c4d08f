"""Import graph of the packages: cycles, largest modules, and the share of `magi_compiler/`
that is tooling rather than library.

    python scripts/import_graph.py [--root DIR]

Every module-level, function-level and `TYPE_CHECKING` import counts as an edge, and so do a
dotted string constant naming one of the packages' modules and the argument of `import_module` /
`find_spec` (what importlib loads), so a cycle hidden behind either still shows. Only the source is read; nothing is imported.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

PACKAGES = ("magi_compiler", "magi_bench", "reviewbot")
# modules of magi_compiler/ that are tools rather than the library: the demo, a user-facing command kept
# beside it (the benchmarks, reports and the toy model live in magi_bench/)
TOOLING_PREFIXES = ("magi_compiler.demo",)


def module_names(root: Path) -> dict[str, Path]:
    names: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` is or lies in (`pkg.mod.Class` -> `pkg.mod`)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def edges_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # `from pkg import mod` imports the module; `from mod import name` the module
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
            if node.value in known:  # a dotted module name: what importlib loads
                targets.add(node.value)
        elif isinstance(node, ast.Call) and _dotted(node.func).endswith(("import_module", "find_spec")):
            targets.update(
                arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            )
    resolved = {_resolve(target, known) for target in targets}
    return {target for target in resolved if target is not None and target != module}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="repository root")
    args = parser.parse_args(argv)
    known = module_names(args.root)
    if not known:
        print(f"import_graph: no {' or '.join(PACKAGES)} package under {args.root}", file=sys.stderr)
        return 2
    graph = {module: edges_of(module, path, known) for module, path in known.items()}
    lines = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in known.items()}
    found = cycles(graph)
    print(f"modules: {len(known)}, import edges: {sum(len(targets) for targets in graph.values())}")
    print(f"cycles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    print("largest modules (lines):")
    for module in sorted(lines, key=lines.__getitem__, reverse=True)[:5]:
        print(f"  {lines[module]:5d}  {module}")
    magi = {module: count for module, count in lines.items() if module.split(".")[0] == "magi_compiler"}
    tooling = sum(count for module, count in magi.items() if module.startswith(TOOLING_PREFIXES))
    print(f"magi_compiler/ tooling share: {tooling} of {sum(magi.values())} lines ({tooling / sum(magi.values()):.0%})")
    reversed_edges = sorted(
        f"{module} -> {target}" for module in magi for target in graph[module] if target.split(".")[0] == "magi_bench"
    )
    print(f"magi_compiler/ importing magi_bench/: {len(reversed_edges)}")
    for edge in reversed_edges:
        print(f"  {edge}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
