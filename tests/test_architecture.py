"""The package's layout: subpackages by pipeline stage, imports that point only downward.

Read from the source with ``ast`` (nothing is imported), so a violation names the file
and line that introduced it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "helion_mlir"

# What each part of the package may import from the others. The root's shared foundations
# (errors, output types, the MLIR context, verification, small utilities) are open to all.
FOUNDATIONS = {"errors", "kinds", "output_type", "mlir_context", "mlir_types", "verify", "lru_cache"}
MAY_IMPORT = {
    "inliner": set(),
    "importer": set(),
    "lowering": {"importer", "inliner"},
    "generate": {"importer", "inliner", "lowering"},
    "batch": {"generate"},
    "runtime": {"generate", "importer", "inliner", "lowering"},
    "cli": {"batch", "generate", "importer", "inliner", "lowering", "runtime"},
}
MAX_LINES = 700
MAX_ROOT_MODULES = 12


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(["helion_mlir", *parts]), path


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    """Absolute names of the helion_mlir modules an ``ImportFrom`` reaches."""
    if node.level == 0:
        base = node.module or ""
    else:
        package = module.split(".") if _is_package(path) else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    if not base.startswith("helion_mlir"):
        return []
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _type_checking_blocks(tree: ast.Module) -> set[ast.AST]:
    return {stmt for stmt in ast.walk(tree) if isinstance(stmt, ast.If)
            and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING"}


def _module_level_imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            for target in _resolve(module, path, stmt):
                yield stmt.lineno, target
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name.startswith("helion_mlir"):
                    yield stmt.lineno, alias.name


ALL_MODULES = dict(_modules())


def _known(target: str) -> str | None:
    """The module ``target`` names, or the module defining the name it imports."""
    while target and target not in ALL_MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in ALL_MODULES.items():
        edges = graph.setdefault(module, set())
        for _line, target in _module_level_imports(module, path):
            known = _known(target)
            if known is not None and known != module:
                edges.add(known)
    return graph


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_module_level_import_cycle() -> None:
    graph = _import_graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(graph.get(module, ())):
            # A package's own __init__ importing its children is not a cycle through the child.
            if module.startswith(dep + "."):
                continue
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _optional_import_blocks(tree: ast.Module) -> set[ast.AST]:
    """Module-level ``try: import x`` / ``except ImportError`` blocks: optional dependencies."""
    def catches_import_error(handler: ast.ExceptHandler) -> bool:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)

    return {stmt for stmt in tree.body if isinstance(stmt, ast.Try) and any(map(catches_import_error, stmt.handlers))}


def test_no_package_import_inside_a_function() -> None:
    found = []
    for module, path in ALL_MODULES.items():
        tree = ast.parse(path.read_text())
        guarded = _type_checking_blocks(tree) | _optional_import_blocks(tree)
        top = set(tree.body) | {s for block in guarded for s in ast.walk(block)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in top:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, "imports inside functions: " + ", ".join(found)


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_layers_import_only_downward(part: str) -> None:
    allowed = MAY_IMPORT[part] | FOUNDATIONS | {part}
    wrong = []
    for module, path in ALL_MODULES.items():
        if _part(module) != part:
            continue
        for line, target in _module_level_imports(module, path):
            known = _known(target)
            if known is not None and _part(known) not in allowed and known != "helion_mlir":
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {known}")
            if known == "helion_mlir":
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports the package root's public API")
    assert not wrong, "\n".join(wrong)


def test_modules_stay_short() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_package_root_holds_only_the_public_layer() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    subpackages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert subpackages == ["cli", "importer", "inliner", "lowering", "runtime"]


def test_checks_see_every_module() -> None:
    """The checks above read the real tree (a broken walk would make them pass vacuously)."""
    assert "helion_mlir.lowering.rules.memory" in ALL_MODULES
    graph = _import_graph()
    assert "helion_mlir.lowering.registry" in graph["helion_mlir.lowering.rules.memory"]
    assert "helion_mlir.importer.node_importer" in graph["helion_mlir.lowering.visitor"]


def test_every_rule_module_is_loaded_by_the_rules_package() -> None:
    """A rule module the package does not import would register nothing, silently."""
    rules = PACKAGE / "lowering" / "rules"
    tree = ast.parse((rules / "__init__.py").read_text())
    imported = {alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1
                for alias in node.names}
    modules = {p.stem for p in rules.glob("*.py") if p.stem != "__init__"}
    assert modules == imported, f"not imported: {sorted(modules - imported)}"
