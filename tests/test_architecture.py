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
FOUNDATIONS = {"errors", "kinds", "output_type", "mlir_context", "mlir_types", "verify", "caches", "front_end_lock"}
MAY_IMPORT = {
    "inliner": set(),
    "importer": set(),
    "lowering": {"importer", "inliner"},
    "generate": {"importer", "inliner", "lowering"},
    "batch": {"generate"},
    "runtime": {"generate", "importer", "inliner", "lowering"},
    "cli": {"batch", "generate", "importer", "inliner", "lowering", "runtime"},
}
# Inside runtime/: what each part may import. params (what crosses a compiled function's
# boundary) and function (the base of both kinds of compiled function) are the runtime's
# own foundations; the CPU's JIT and IREE run modules; configs say which configs a CPU
# honours and which were tuned; a compiled kernel runs a function on either; tuning
# compiles and times kernels; the Helion backend and tune sit on top.
RUNTIME_MAY_IMPORT = {
    "params": set(),
    "function": {"params"},
    "reference": set(),
    "cpu": {"params", "function"},
    "iree": {"params", "function", "cpu"},
    "configs": set(),
    "kernel": {"params", "function", "cpu", "iree", "configs"},
    "tuning": {"params", "cpu", "configs", "kernel"},
    "backend": {"configs", "kernel", "tuning"},
}
# Inside runtime/cpu/rewrites/: one package per stage a rewrite runs at, in pipeline order;
# a stage may use the shared IR helpers of the package root and what earlier stages know.
REWRITE_STAGES = ("tensor", "vector", "buffer", "llvm")
MAX_LINES = 600
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


def _every_import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere, TYPE_CHECKING blocks included."""
    return {module: {target for _line, target in _every_import(module, path) if target != module}
            for module, path in ALL_MODULES.items()}


def _package_graph() -> dict[str, set[str]]:
    """Package -> the packages its modules import (a module at a package's root counts as the package)."""
    packages: dict[str, set[str]] = {}
    for module, targets in _every_import_graph().items():
        source = module if _is_package(ALL_MODULES[module]) else module.rpartition(".")[0]
        edges = packages.setdefault(source, set())
        for target in targets:
            package = target if _is_package(ALL_MODULES[target]) else target.rpartition(".")[0]
            # A package reaching into its own subpackages is the tree, not a dependency back.
            if package != source and not package.startswith(source + "."):
                edges.add(package)
    return packages


@pytest.mark.parametrize("graph", [_import_graph, _every_import_graph, _package_graph],
                         ids=["module-level", "type-checking-included", "between-packages"])
def test_no_import_cycle(graph) -> None:
    """No circle of imports between modules (at module level, or counting TYPE_CHECKING
    imports: a type that only a circle can name is a layer drawn wrong) or between packages."""
    cycle = _find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
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
            if cycle:
                return cycle
    return None


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


def _runtime_part(module: str) -> str:
    """The part of runtime/ a module belongs to (its subpackage, or its own name at the root)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else ""


@pytest.mark.parametrize("part", sorted(RUNTIME_MAY_IMPORT))
def test_runtime_layers_import_only_downward(part: str) -> None:
    """TYPE_CHECKING imports count: a layer names only the types of the layers below it."""
    allowed = RUNTIME_MAY_IMPORT[part] | {part}
    wrong = [f"{path.relative_to(PACKAGE)}:{line} imports {target}"
             for module, path in ALL_MODULES.items() if _part(module) == "runtime" and _runtime_part(module) == part
             for line, target in _every_import(module, path)
             if _part(target) == "runtime" and _runtime_part(target) not in allowed | {""}]
    assert not wrong, "\n".join(wrong)


def test_every_part_of_the_runtime_has_a_layer() -> None:
    parts = {_runtime_part(m) for m in ALL_MODULES if _part(m) == "runtime"} - {""}
    assert parts == set(RUNTIME_MAY_IMPORT), sorted(parts ^ set(RUNTIME_MAY_IMPORT))


def _rewrite_stage(module: str) -> str | None:
    """The stage of a module of runtime/cpu/rewrites/ ("" for the shared helpers at its root)."""
    prefix = "helion_mlir.runtime.cpu.rewrites."
    if not module.startswith(prefix):
        return None
    rest = module.removeprefix(prefix).split(".")
    return rest[0] if len(rest) > 1 else ""


def test_rewrites_import_only_their_own_or_earlier_stages() -> None:
    order = {stage: index for index, stage in enumerate(REWRITE_STAGES)}
    stages = {_rewrite_stage(m) for m in ALL_MODULES} - {None, ""}
    assert stages == set(REWRITE_STAGES), stages
    wrong = []
    for module, path in ALL_MODULES.items():
        stage = _rewrite_stage(module)
        for line, target in _every_import(module, path):
            used = _rewrite_stage(target)
            if stage is not None and used and (stage == "" or order[used] > order[stage]):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
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
    assert "helion_mlir.lowering.rules.load_store" in ALL_MODULES
    graph = _import_graph()
    assert "helion_mlir.lowering.registry" in graph["helion_mlir.lowering.rules.load_store"]
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


def test_no_rule_module_imports_another() -> None:
    """Rule modules hold rules; what several of them use lives in lowering/, beside the walker."""
    rules = {module for module, _path in _rule_modules()}
    wrong = sorted({f"{path.relative_to(PACKAGE)}:{line} imports {target}"
                    for module, path in _rule_modules() for line, target in _every_import(module, path)
                    if target in rules and target != module})
    assert not wrong, "\n".join(wrong)


def test_every_long_rule_says_what_it_lowers() -> None:
    """A registered rule of more than 10 lines has a docstring (what Helion construct it
    lowers, and to what)."""
    wrong = [f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"
             for _module, path in _rule_modules() for node in ast.parse(path.read_text()).body
             if isinstance(node, ast.FunctionDef) and any("register" in ast.unparse(d) for d in node.decorator_list)
             and node.end_lineno - node.lineno >= 10 and ast.get_docstring(node) is None]
    assert not wrong, "rules without a docstring: " + ", ".join(wrong)


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
    checked += [PACKAGE / "runtime" / "kernel" / "argument_checks.py", PACKAGE / "errors.py"]
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
