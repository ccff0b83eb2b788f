"""The package's layout: subpackages by pipeline stage, imports that point only downward;
inside the lowering, rules that reach the walk only through their context, targets and
kinds matched as objects, and one definition of each shared helper and table.

Read from the source with ``ast`` (nothing is imported), so a violation names the file
and line that introduced it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "helion_mlir"

# What each part of the package may import from the others. The root's shared foundations
# (errors, output types, the MLIR context, verification, small utilities) are open to all.
FOUNDATIONS = {"errors", "kinds", "output_type", "mlir_context", "mlir_types", "verify", "lru_cache", "front_end_lock"}
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


@functools.cache
def _tree(path: Path) -> ast.Module:
    """``path`` parsed once per process: the checks below each walk every module (read only)."""
    return ast.parse(path.read_text())


def _type_checking_blocks(tree: ast.Module) -> set[ast.AST]:
    return {stmt for stmt in ast.walk(tree) if isinstance(stmt, ast.If)
            and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING"}


def _module_level_imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    tree = _tree(path)
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
        tree = _tree(path)
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
    tree = _tree(rules / "__init__.py")
    imported = {alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1
                for alias in node.names}
    modules = {p.stem for p in rules.glob("*.py") if p.stem != "__init__"}
    assert modules == imported, f"not imported: {sorted(modules - imported)}"


# ------------------------------------------------------------------ inside lowering/
RULES = PACKAGE / "lowering" / "rules"
# The walker and the kernel state it shares with rules through their context.
WALKER_MODULES = {"helion_mlir.lowering.visitor", "helion_mlir.lowering.kernel_state"}


def _every_import(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """Every package module an import anywhere in the file reaches (TYPE_CHECKING blocks too)."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            for target in _resolve(module, path, node):
                known = _known(target)
                if known is not None:
                    yield node.lineno, known


def _rule_modules() -> list[tuple[str, Path]]:
    return [(m, p) for m, p in ALL_MODULES.items() if m.startswith("helion_mlir.lowering.rules.")]


def test_no_rule_module_imports_the_walker_or_the_kernel_state() -> None:
    """A rule works through its RuleContext; it cannot reach the walker's or the state's internals."""
    wrong = [f"{path.relative_to(PACKAGE)}:{line} imports {target}"
             for module, path in _rule_modules() for line, target in _every_import(module, path)
             if target in WALKER_MODULES]
    assert not wrong, "\n".join(wrong)


def test_rules_use_only_the_public_side_of_their_context() -> None:
    wrong = []
    for _module, path in _rule_modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and isinstance(node.value, ast.Name) and node.value.id == "ctx":
                wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno} reads ctx.{node.attr}")
    assert not wrong, "\n".join(wrong)


def _name_comparisons(path: Path) -> Iterator[int]:
    """Lines that compare a class or function name (``type(x).__name__ == "..."``): a target or
    a kind matched by its name rather than as the object it is."""
    tree = _tree(path)
    named = set()  # variables assigned a ``__name__``
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "__name__":
            named.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr == "__name__" for o in operands) or \
                    any(isinstance(o, ast.Name) and o.id in named for o in operands):
                yield node.lineno


def test_targets_and_kinds_are_matched_as_objects_not_by_name() -> None:
    checked = [p for m, p in ALL_MODULES.items() if _part(m) == "lowering"]
    checked += [PACKAGE / "runtime" / "argument_checks.py", PACKAGE / "errors.py"]
    wrong = [f"{path.relative_to(PACKAGE)}:{line}" for path in checked for line in _name_comparisons(path)]
    assert not wrong, "names compared as strings: " + ", ".join(wrong)


def test_kinds_are_enums_not_strings() -> None:
    """No ``x.kind == "..."``: a kind is an enum member (ArgKind, AccessKind, Atomic...)."""
    wrong = []
    for module, path in ALL_MODULES.items():
        if _part(module) != "lowering":
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "kind" \
                    and any(isinstance(c, ast.Constant) and isinstance(c.value, str) for c in node.comparators):
                wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not wrong, "kinds compared with strings: " + ", ".join(wrong)


def _definitions(name: str) -> list[str]:
    return [str(path.relative_to(PACKAGE)) for path in ALL_MODULES.values()
            for node in ast.walk(_tree(path))
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name]


@pytest.mark.parametrize("name", ["is_helion_target", "graph_outputs", "format_diagnostic", "file_location"])
def test_one_definition_of_each_shared_helper(name: str) -> None:
    assert len(_definitions(name)) == 1, _definitions(name)


def _dict_displays(path: Path) -> Iterator[ast.Dict]:
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Dict) and len(node.keys) >= 3:
            yield node


def _is_dtype(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
        and node.attr.startswith(("float", "bfloat", "int", "uint", "bool"))


def _is_mlir_type_name(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and bool(re.fullmatch(r"(s|u)?i(1|8|16|32|64)|b?f(16|32|64)|f8E\w+|f4E\w+", node.value))


def test_dtype_and_width_tables_live_in_mlir_types() -> None:
    """One table spells torch dtypes as MLIR types, one gives MLIR types' widths: mlir_types.py's."""
    wrong = []
    for path in ALL_MODULES.values():
        if path.name == "mlir_types.py":
            continue
        for table in _dict_displays(path):
            dtype_to_type = all(map(_is_dtype, table.keys)) and all(map(_is_mlir_type_name, table.values))
            type_to_width = all(map(_is_mlir_type_name, table.keys)) and all(
                isinstance(v, ast.Constant) and type(v.value) is int for v in table.values)
            if dtype_to_type or type_to_width:
                wrong.append(f"{path.relative_to(PACKAGE)}:{table.lineno}")
    assert not wrong, "tables of MLIR types outside mlir_types.py: " + ", ".join(wrong)


def test_one_static_fake_tensor_mode() -> None:
    module_level = [f"{path.relative_to(PACKAGE)}:{stmt.lineno}" for path in ALL_MODULES.values()
                    for stmt in _tree(path).body
                    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
                    and getattr(stmt.value.func, "id", None) == "FakeTensorMode"]
    assert len(module_level) == 1, module_level


def test_the_source_checks_find_what_they_look_for(tmp_path: Path) -> None:
    """The checks above would pass vacuously if their detectors found nothing."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(x):\n"
        "    kind = type(x).__name__\n"
        "    if kind == 'LocalSource':\n"
        "        return 1\n"
        "    return type(x).__name__ in {'A', 'B'}\n"
        "WIDTHS = {'f16': 16, 'f32': 32, 'i64': 64}\n"
        "import torch\n"
        "TYPES = {torch.float32: 'f32', torch.int64: 'si64', torch.bool: 'i1'}\n"
    )
    assert list(_name_comparisons(sample)) == [3, 5]
    tables = list(_dict_displays(sample))
    assert all(map(_is_mlir_type_name, tables[0].keys)) and all(map(_is_dtype, tables[1].keys))
    assert all(map(_is_mlir_type_name, tables[1].values))


def test_host_references_are_resolved_in_one_place() -> None:
    """Only the rule context turns a HostRef into the host tensor's current value."""
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in ALL_MODULES.values()
             for node in ast.walk(_tree(path))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"
             and "HostRef" in ast.unparse(node.args[1])]
    assert found and all(place.startswith("lowering/context.py:") for place in found), found
