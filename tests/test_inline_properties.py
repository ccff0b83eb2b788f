"""Properties of inlining over generated MLIR functions.

A hypothesis strategy writes well-formed modules the way MLIR's printer (and torch-mlir)
does: arith/math/tensor ops on scalars and tensors, ``linalg.generic`` with ``#map``
aliases, ``scf.for``/``scf.if``/``scf.execute_region`` with block arguments, iter_args and
several blocks, multi-result ops (``%r:2`` used as ``%r#1``), generic-form ops, string
attributes full of sigils, ``loc(...)`` on every op (with location aliases defined in terms
of each other), type aliases, ``dense_resource`` constants and several results.

Each module is inlined under random operand names, and the output must:

* parse and verify;
* be alpha-equivalent to the original: wrapped in a function with the original signature,
  MLIR's generic printout (which names values canonically) matches the original's, and
  every op keeps its location (or gets the requested one);
* define no SSA name twice, and mention no name the builder did not hand out or reserve;
* mention none of the source module's aliases;
* be the same text every time.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from helion_mlir.inliner.builder import MLIRBuilder
from helion_mlir.inliner.lexer import Token, TokenKind, tokenize
from helion_mlir.inliner.rewrite import inline_torch_mlir_output
from helion_mlir.mlir_context import mlir_session
from helion_mlir.verify import parse_module

TENSOR = "tensor<4xf32>"
SCALAR_TENSOR = "tensor<f32>"
SCALARS = ("f32", "i32", "index")
VALUE_TYPES = (*SCALARS, TENSOR)

# Names the generator gives values: printer-style and legal-but-odd ones. Sibling regions
# reuse them, as the printer's own output does.
VALUE_NAMES = (
    "%0", "%1", "%2", "%3", "%4", "%5", "%6", "%7", "%10", "%cst", "%cst_0", "%c0_i32", "%in", "%in_0",
    "%out", "%arg1", "%arg2", "%arg3", "%x.y", "%a-b", "%$v", "%float1.000000e00", "%values", "%007",
)  # fmt: skip
LABELS = ("^bb0", "^bb1", "^bb2", "^exit", "^b.x", "^0")
RESOURCE_KEYS = ("blob", "torch_tensor_4_torch.float32", "w")
TRICKY_STRINGS = (
    "%x #map ^bb0 {}",
    '%arg0 \\"quoted\\" }{',
    "loc(#loc1) // not a comment",
    "{-# dialect_resources #-}",
    "\\\\ -> > < ) (",
    "@sym !t #loc",
)
# Operand names for the wrapper: any valid SSA id, including ones the builder itself likes.
SSA_NAMES = st.one_of(
    st.from_regex(r"%[A-Za-z_$.\-][A-Za-z0-9_$.\-]{0,5}", fullmatch=True),
    st.from_regex(r"%[0-9]{1,3}", fullmatch=True),
    st.sampled_from(["%arg0", "%arg1", "%0", "%in", "%v0", "%v1", "%cst0", "%x"]),
)
LOCATIONS = st.sampled_from(['"kernel.py":12:8', "unknown", 'callsite("k.py":1:2 at "k.py":3:4)', '"name"("k.py":5:6)'])


_INTEGERS: dict[tuple[int, int], st.SearchStrategy[int]] = {}


@dataclass
class Generated:
    """A generated module and what a test needs to wrap an inlined copy of its function."""

    text: str
    func_name: str
    needs_func_name: bool
    arg_types: list[str]
    result_types: list[str]
    aliases: set[str]

    @property
    def selector(self) -> str | None:
        return self.func_name if self.needs_func_name else None


@dataclass
class _Region:
    taken: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)


class _Writer:
    """Writes one module; ``draw`` makes every choice, so hypothesis can shrink it."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw
        self.lines: list[str] = []
        self.indent = 2
        self.regions: list[_Region] = []
        self.blocks: list[list[tuple[str, str]]] = []  # values usable in each open block
        self.budget = 0
        self.resources: dict[str, str] = {}
        self.type_aliases: dict[str, list[str]] = {"f32": ["f32"], TENSOR: [TENSOR], SCALAR_TENSOR: [SCALAR_TENSOR]}
        self.identity_maps = ["affine_map<(d0) -> (d0)>"]
        self.reduction_maps = ["affine_map<(d0) -> ()>"]
        self.loc_aliases: list[str] = []
        self.loc_aliases_first = False

    # -------------------------------------------------------------- choices
    def number(self, low: int, high: int) -> int:
        """An integer in [low, high]; strategies are cached, as building one per draw is slow."""
        strategy = _INTEGERS.get((low, high))
        if strategy is None:
            strategy = _INTEGERS[(low, high)] = st.integers(low, high)
        return self.draw(strategy)

    def choose(self, options: Sequence[Any]) -> Any:
        return options[self.number(0, len(options) - 1)]

    def flip(self) -> bool:
        return bool(self.number(0, 1))

    def spell(self, type_: str) -> str:
        return self.choose(self.type_aliases.get(type_, [type_]))

    def loc(self) -> str:
        line, col = self.number(1, 40), self.number(0, 9)
        options = [f"loc({a})" for a in self.loc_aliases] + [
            "loc(unknown)",
            f'loc("model.py":{line}:{col})',
            f'loc("op"("model.py":{line}:{col}))',
            f'loc(callsite("a.py":{line}:1 at "b.py":2:{col}))',
            f'loc(fused["a.py":{line}:1, "b.py":2:{col}])',
            f'loc(fused<"meta">["a.py":{line}:1])',
        ]
        return self.choose(options)

    def attrs(self) -> str:
        """An optional discardable attribute dictionary with tricky contents."""
        options = ["", "", f'{{note = "{self.choose(TRICKY_STRINGS)}"}}', f"{{m = {self.choose(self.identity_maps)}}}"]
        if self.loc_aliases_first and self.loc_aliases:
            options.append(f"{{where = {self.choose(self.loc_aliases)}, n = 1 : i32}}")
        chosen = self.choose(options)
        return f" {chosen}" if chosen else ""

    # ---------------------------------------------------------------- scopes
    def emit(self, line: str) -> None:
        self.lines.append(" " * self.indent + line)

    def taken(self) -> set[str]:
        return set().union(*(r.taken for r in self.regions))

    def new_name(self) -> str:
        free = [n for n in VALUE_NAMES if n not in self.taken()]
        name = self.choose(free) if free else f"%v{len(self.taken())}"
        self.regions[-1].taken.add(name)
        return name

    def new_label(self) -> str:
        label = self.choose([b for b in LABELS if b not in self.regions[-1].labels])
        self.regions[-1].labels.add(label)
        return label

    def add(self, value: str, type_: str) -> None:
        self.blocks[-1].append((value, type_))

    def values(self, type_: str) -> list[str]:
        return [v for block in self.blocks for v, t in block if t == type_]

    def pick(self, type_: str) -> str:
        """A visible value of ``type_``, made with a constant if there is none."""
        found = self.values(type_)
        grouped = [v for v in found if "#" in v]  # results of multi-result ops: used often
        roll = self.number(0, 5)
        if grouped and roll < 2:
            return self.choose(grouped)
        if found and roll:
            return self.choose(found)
        return self.constant(type_)

    def open_region(self) -> None:
        self.regions.append(_Region())
        self.blocks.append([])
        self.indent += 2

    def close_region(self) -> None:
        self.regions.pop()
        self.blocks.pop()
        self.indent -= 2

    def results(self, types: Sequence[str]) -> tuple[str, list[str]]:
        """The ``%r =`` / ``%r:2 =`` / ``%a, %b =`` prefix and the uses of the results."""
        if not types:
            return "", []
        if len(types) == 1 or self.flip():
            base = self.new_name()
            if len(types) == 1:
                return f"{base} = ", [base]
            # The printer attaches ':N' and '#N' to the name; MLIR also accepts them apart.
            apart = self.number(0, 3) == 0
            prefix = f"{base} : {len(types)} = " if apart else f"{base}:{len(types)} = "
            return prefix, [f"{base} #{i}" if apart else f"{base}#{i}" for i in range(len(types))]
        names = [self.new_name() for _ in types]
        return f"{', '.join(names)} = ", names

    # ------------------------------------------------------------------- ops
    def constant(self, type_: str) -> str:
        name = self.new_name()
        spelled = self.spell(type_)
        if type_ == "f32":
            value = self.choose(["1.500000e+00", "-2.000000e+00", "0x7FC00000", "0.000000e+00"])
            text = self.choose([f"arith.constant {value} : {spelled}", f'"arith.constant"() <{{value = {value} : f32}}> : () -> {spelled}'])
        elif type_ == "i32":
            text = f"arith.constant {self.number(-9, 9)} : i32"
        elif type_ == "index":
            text = f"arith.constant {self.number(1, 8)} : index"
        elif type_ == "i1":
            text = f"arith.constant {self.choose(['true', 'false'])}"
        elif type_ == SCALAR_TENSOR:
            text = self.choose([f"tensor.empty() : {spelled}", f"arith.constant dense<2.500000e-01> : {spelled}"])
        else:
            key = self.choose(RESOURCE_KEYS)
            text = self.choose(
                [
                    f"tensor.empty() : {spelled}",
                    f"arith.constant dense<[1.000000e+00, -2.000000e+00, 3.000000e+00, 0x7F800000]> : {spelled}",
                    f"arith.constant dense<5.000000e-01> : {spelled}",
                    f"arith.constant dense_resource<{key}> : {spelled}",
                ]
            )
            if "dense_resource" in text and key not in self.resources:
                data = self.draw(st.binary(min_size=16, max_size=16))
                self.resources[key] = "0x04000000" + data.hex().upper()
        self.emit(f"{name} = {text} {self.loc()}")
        self.add(name, type_)
        return name

    def op_binary(self) -> None:
        type_ = self.choose(VALUE_TYPES)
        a, b = self.pick(type_), self.pick(type_)
        name = self.new_name()
        spelled = self.spell(type_)
        if type_ in ("f32", TENSOR):
            op = self.choose(["arith.addf", "arith.subf", "arith.mulf", "arith.maximumf"])
            fastmath = self.choose(["", " fastmath<fast>"])
            if self.flip():
                text = f'"{op}"({a}, {b}) <{{fastmath = #arith.fastmath<none>}}>{self.attrs()} : ({spelled}, {spelled}) -> {spelled}'
            else:
                text = f"{op} {a}, {b}{fastmath}{self.attrs()} : {spelled}"
        else:
            op = self.choose(["arith.addi", "arith.muli", "arith.xori", "arith.andi"])
            if self.flip():
                text = f'"arith.xori"({a}, {b}){self.attrs()} : ({spelled}, {spelled}) -> {spelled}'
            else:
                text = f"{op} {a}, {b}{self.attrs()} : {spelled}"
        self.emit(f"{name} = {text} {self.loc()}")
        self.add(name, type_)

    def op_unary(self) -> None:
        type_ = self.choose(["f32", TENSOR])
        a = self.pick(type_)
        name = self.new_name()
        op = self.choose(["math.exp", "math.absf", "math.sqrt", "arith.negf"])
        self.emit(f"{name} = {op} {a}{self.attrs()} : {self.spell(type_)} {self.loc()}")
        self.add(name, type_)

    def op_compare(self) -> None:
        type_ = self.choose(SCALARS)
        a, b = self.pick(type_), self.pick(type_)
        name = self.new_name()
        op = "arith.cmpf olt" if type_ == "f32" else "arith.cmpi slt"
        self.emit(f"{name} = {op}, {a}, {b} : {self.spell(type_)} {self.loc()}")
        self.add(name, "i1")

    def op_select(self) -> None:
        type_ = self.choose(VALUE_TYPES)
        cond, a, b = self.pick("i1"), self.pick(type_), self.pick(type_)
        name = self.new_name()
        self.emit(f"{name} = arith.select {cond}, {a}, {b} : {self.spell(type_)} {self.loc()}")
        self.add(name, type_)

    def op_cast(self) -> None:
        source, op, target = self.choose(
            [("i32", "arith.index_cast", "index"), ("i32", "arith.sitofp", "f32"), ("f32", "arith.fptosi", "i32")]
        )
        a = self.pick(source)
        name = self.new_name()
        self.emit(f"{name} = {op} {a} : {self.spell(source)} to {self.spell(target)} {self.loc()}")
        self.add(name, target)

    def op_tensor(self) -> None:
        kind = self.choose(["splat", "extract", "insert"])
        if kind == "splat":
            a = self.pick("f32")
            name = self.new_name()
            self.emit(f"{name} = tensor.splat {a} : {self.spell(TENSOR)} {self.loc()}")
            self.add(name, TENSOR)
        elif kind == "extract":
            t, i = self.pick(TENSOR), self.pick("index")
            name = self.new_name()
            self.emit(f"{name} = tensor.extract {t}[{i}] : {self.spell(TENSOR)} {self.loc()}")
            self.add(name, "f32")
        else:
            f, t, i = self.pick("f32"), self.pick(TENSOR), self.pick("index")
            name = self.new_name()
            self.emit(f"{name} = tensor.insert {f} into {t}[{i}] : {self.spell(TENSOR)} {self.loc()}")
            self.add(name, TENSOR)

    def block_label(self, arg_types: Sequence[str]) -> list[str]:
        """Emit ``^label(%a: t loc(...), ...):`` in the current region; return the arguments."""
        label = self.new_label()
        args = [self.new_name() for _ in arg_types]
        decls = ", ".join(f"{a}: {self.spell(t)}{self.choose(['', ' ' + self.loc()])}" for a, t in zip(args, arg_types))
        self.lines.append(" " * (self.indent - 2) + (f"{label}({decls}):" if args else f"{label}:"))
        for arg, type_ in zip(args, arg_types):
            self.add(arg, type_)
        return args

    def op_elementwise_generic(self) -> None:
        inputs = [self.pick(TENSOR) for _ in range(self.number(1, 2))]
        init = self.pick(TENSOR)
        name = self.new_name()
        maps = ", ".join(self.choose(self.identity_maps) for _ in range(len(inputs) + 1))
        spelled = [self.spell(TENSOR) for _ in inputs]
        extra = self.choose(["", f' attrs = {{note = "{self.choose(TRICKY_STRINGS)}"}}'])
        self.emit(
            f'{name} = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}} '
            f"ins({', '.join(inputs)} : {', '.join(spelled)}) outs({init} : {self.spell(TENSOR)}){extra} {{"
        )
        self.open_region()
        self.block_label(["f32"] * (len(inputs) + 1))
        self.ops(scalar_only=True)
        self.emit(f"linalg.yield {self.pick('f32')} : f32 {self.loc()}")
        self.close_region()
        self.emit(f"}} -> {self.spell(TENSOR)} {self.loc()}")
        self.add(name, TENSOR)

    def op_reduction_generic(self) -> None:
        source, first, second = self.pick(TENSOR), self.pick(SCALAR_TENSOR), self.pick(SCALAR_TENSOR)
        prefix, uses = self.results([SCALAR_TENSOR, SCALAR_TENSOR])
        identity, reduction = self.choose(self.identity_maps), self.choose(self.reduction_maps)
        self.emit(
            f"{prefix}linalg.generic {{indexing_maps = [{identity}, {reduction}, {reduction}], "
            f'iterator_types = ["reduction"]}} ins({source} : {self.spell(TENSOR)}) '
            f"outs({first}, {second} : {self.spell(SCALAR_TENSOR)}, {SCALAR_TENSOR}) {{"
        )
        self.open_region()
        element, acc_max, acc_sum = self.block_label(["f32", "f32", "f32"])
        self.ops(scalar_only=True)
        biggest, total = self.new_name(), self.new_name()
        self.emit(f"{biggest} = arith.maximumf {element}, {acc_max} : f32 {self.loc()}")
        self.emit(f"{total} = arith.addf {self.pick('f32')}, {acc_sum} : f32 {self.loc()}")
        self.emit(f"linalg.yield {biggest}, {total} : f32, f32 {self.loc()}")
        self.close_region()
        self.emit(f"}} -> ({SCALAR_TENSOR}, {self.spell(SCALAR_TENSOR)}) {self.loc()}")
        for use in uses:
            self.add(use, SCALAR_TENSOR)

    def carried_types(self, scalar_only: bool) -> list[str]:
        return [self.choose(SCALARS if scalar_only else VALUE_TYPES) for _ in range(self.number(0, 2))]

    def op_for(self, scalar_only: bool) -> None:
        lower, upper, step = self.pick("index"), self.pick("index"), self.constant("index")
        types = self.carried_types(scalar_only)
        inits = [self.pick(t) for t in types]
        prefix, uses = self.results(types)
        self.open_region()
        induction = self.new_name()
        carried = [self.new_name() for _ in types]
        header = f"{prefix}scf.for {induction} = {lower} to {upper} step {step}"
        if types:
            pairs = ", ".join(f"{c} = {i}" for c, i in zip(carried, inits))
            header += f" iter_args({pairs}) -> ({', '.join(self.spell(t) for t in types)})"
        self.lines.append(" " * (self.indent - 2) + header + " {")
        self.add(induction, "index")
        for value, type_ in zip(carried, types):
            self.add(value, type_)
        self.ops(scalar_only=scalar_only)
        self.emit(self.yield_op([self.pick(t) for t in types], types))
        self.close_region()
        self.emit(f"}} {self.loc()}")
        for use, type_ in zip(uses, types):
            self.add(use, type_)

    def branch(self, types: Sequence[str], scalar_only: bool, generic: bool) -> None:
        self.open_region()
        self.ops(scalar_only=scalar_only)
        yielded = [self.pick(t) for t in types]
        spelled = [self.spell(t) for t in types]
        if generic:
            self.emit(f'"scf.yield"({", ".join(yielded)}) : ({", ".join(spelled)}) -> () {self.loc()}')
        else:
            self.emit(self.yield_op(yielded, types))
        self.close_region()

    def yield_op(self, values: Sequence[str], types: Sequence[str]) -> str:
        """An explicit ``scf.yield`` (an implicit one would get a location from its text position)."""
        if not values:
            return f"scf.yield {self.loc()}"
        return f"scf.yield {', '.join(values)} : {', '.join(self.spell(t) for t in types)} {self.loc()}"

    def op_if(self, scalar_only: bool) -> None:
        cond = self.pick("i1")
        types = self.carried_types(scalar_only)
        prefix, uses = self.results(types)
        if self.flip():  # generic form: regions inside parentheses
            self.emit(f'{prefix}"scf.if"({cond}) ({{')
            self.branch(types, scalar_only, generic=True)
            self.emit("}, {")
            self.branch(types, scalar_only, generic=True)
            spelled = ", ".join(self.spell(t) for t in types)
            self.emit(f"}}) : (i1) -> ({spelled}) {self.loc()}")
        else:
            arrow = f" -> ({', '.join(self.spell(t) for t in types)})" if types else ""
            self.emit(f"{prefix}scf.if {cond}{arrow} {{")
            self.branch(types, scalar_only, generic=False)
            self.emit("} else {")
            self.branch(types, scalar_only, generic=False)
            self.emit(f"}} {self.loc()}")
        for use, type_ in zip(uses, types):
            self.add(use, type_)

    def op_blocks(self, scalar_only: bool) -> None:
        """scf.execute_region with three blocks, a conditional branch and forward references."""
        type_ = self.choose(SCALARS if scalar_only else VALUE_TYPES)
        cond = self.pick("i1")
        name = self.new_name()
        self.emit(f"{name} = scf.execute_region -> {self.spell(type_)} {{")
        self.open_region()
        join, other = self.new_label(), self.new_label()
        self.ops(scalar_only=scalar_only)
        first = self.pick(type_)
        if self.flip():
            self.emit(f"cf.cond_br {cond}, {join}({first} : {self.spell(type_)}), {other} {self.loc()}")
        else:
            self.emit(self.choose([f"cf.br {other} {self.loc()}", f'"cf.br"()[{other}] : () -> () {self.loc()}']))
        blocks = [(other, []), (join, [type_])]
        if self.flip():
            blocks.reverse()
        for label, arg_types in blocks:
            self.blocks.append([])
            self.lines.append(" " * (self.indent - 2) + label + ("(" if arg_types else ":"))
            if arg_types:
                arg = self.new_name()
                self.lines[-1] += f"{arg}: {self.spell(type_)}{self.choose(['', ' ' + self.loc()])}):"
                self.add(arg, type_)
                self.ops(scalar_only=scalar_only)
                self.emit(f"scf.yield {self.pick(type_)} : {self.spell(type_)} {self.loc()}")
            else:
                self.ops(scalar_only=scalar_only)
                self.emit(f"cf.br {join}({self.pick(type_)} : {self.spell(type_)}) {self.loc()}")
            self.blocks.pop()
        self.close_region()
        self.emit(f"}} {self.loc()}")
        self.add(name, type_)

    def ops(self, *, scalar_only: bool = False) -> None:
        """Emit a few ops in the current block; region ops are favoured while nesting is shallow."""
        if scalar_only:
            simple = [self.op_compare, self.op_cast, self.op_scalar_binary, lambda: self.constant(self.choose(SCALARS))]
        else:
            simple = [self.op_binary, self.op_unary, self.op_compare, self.op_select, self.op_cast, self.op_tensor]
        nested: list[Callable[[], None]] = [
            lambda: self.op_for(scalar_only),
            lambda: self.op_if(scalar_only),
            lambda: self.op_blocks(scalar_only),
        ]
        if not scalar_only:
            nested += [self.op_elementwise_generic, self.op_reduction_generic]
        choices = simple + (nested * 2 if len(self.regions) < 3 else [])
        for _ in range(self.number(0, 3)):
            if self.budget <= 0:
                return
            self.budget -= 1
            self.choose(choices)()

    def op_scalar_binary(self) -> None:
        a, b = self.pick("f32"), self.pick("f32")
        name = self.new_name()
        self.emit(f"{name} = arith.addf {a}, {b}{self.attrs()} : {self.spell('f32')} {self.loc()}")
        self.add(name, "f32")

    # -------------------------------------------------------------- module
    def aliases(self) -> tuple[list[str], list[str], set[str]]:
        """Alias definitions to put before and after the module, and all alias names."""
        before: list[str] = []
        names: set[str] = set()
        if self.flip():
            before.append("!t = tensor<4xf32>")
            self.type_aliases[TENSOR].append("!t")
            if self.flip():
                before.append("!tt = !t")
                self.type_aliases[TENSOR].append("!tt")
        if self.flip():
            before.append("!e = f32")
            self.type_aliases["f32"].append("!e")
            self.type_aliases[TENSOR].append("tensor<4x!e>")
            if self.flip():
                before.append("!te = tensor<4x!e>")
                self.type_aliases[TENSOR].append("!te")
        if self.flip():
            before.append("#map = affine_map<(d0) -> (d0)>")
            self.identity_maps.append("#map")
            if self.flip():
                before.append("#id = #map")
                self.identity_maps.append("#id")
        if self.flip():
            before.append("#map1 = affine_map<(d0) -> ()>")
            self.reduction_maps.append("#map1")
        locs = ["#loc = loc(unknown)"]
        if self.flip():
            locs.append('#loc1 = loc("model.py":3:7)')
            composite = self.choose(["callsite(#loc1 at #loc)", "fused[#loc1, #loc]", '"n"(#loc1)'])
            locs.append(f"#loc2 = loc({composite})")
            if self.flip():
                locs.append("#loc3 = loc(callsite(#loc2 at #loc1))")
        self.loc_aliases = [d.split(" =", 1)[0] for d in locs]
        self.loc_aliases_first = self.flip()
        for definition in before + locs:
            names.add(definition.split(" =", 1)[0])
        if self.loc_aliases_first:
            return before + locs, [], names
        return before, locs, names

    def function(self, name: str) -> tuple[list[str], list[str], list[str]]:
        arg_types = [self.choose([*VALUE_TYPES, "i1", SCALAR_TENSOR]) for _ in range(self.number(0, 3))]
        self.regions.append(_Region())
        self.blocks.append([])
        if self.flip():
            arg_names = [f"%arg{i}" for i in range(len(arg_types))]
            self.regions[-1].taken.update(arg_names)
        else:
            arg_names = [self.new_name() for _ in arg_types]
        for arg, type_ in zip(arg_names, arg_types):
            self.add(arg, type_)
        self.budget = self.number(1, 12)
        self.indent = 4
        body_start = len(self.lines)
        self.ops()
        result_types = [self.choose([*VALUE_TYPES, SCALAR_TENSOR]) for _ in range(self.number(0, 3))]
        returned = [self.pick(t) for t in result_types]
        spelled = [self.spell(t) for t in result_types]
        if self.flip():
            ret = f'"func.return"({", ".join(returned)}) : ({", ".join(spelled)}) -> ()'
        else:
            ret = f"return {', '.join(returned)} : {', '.join(spelled)}" if returned else "return"
        self.emit(f"{ret} {self.loc()}")
        body = self.lines[body_start:]
        del self.lines[body_start:]
        params = ", ".join(
            f"{a}: {self.spell(t)}{self.choose(['', ' loc(unknown)', ' loc(#loc)'])}" for a, t in zip(arg_names, arg_types)
        )
        results = "" if not spelled else f" -> {spelled[0]}" if len(spelled) == 1 and self.flip() else f" -> ({', '.join(spelled)})"
        attributes = self.choose(["", f' attributes {{note = "{self.choose(TRICKY_STRINGS)}"}}'])
        text = [f"  func.func @{name}({params}){results}{attributes} {{", *body, f"  }} {self.loc()}"]
        self.regions.pop()
        self.blocks.pop()
        return text, arg_types, result_types

    def module(self) -> Generated:
        before, after, alias_names = self.aliases()
        name = self.choose(["aten_op", "main", '"quoted fn"'])
        function_text, arg_types, result_types = self.function(name)
        decoys = []
        if self.flip():
            decoys.append("  func.func private @decl(f32) -> f32")
        with_body = self.flip()
        if with_body:
            decoys += ["  func.func @other(%arg0: f32) -> f32 {", "    %0 = arith.addf %arg0, %arg0 : f32", "    return %0 : f32", "  }"]
        functions = function_text + decoys if self.flip() else decoys + function_text
        header = self.choose(["module {", 'module attributes {torch.debug_module_name = "M"} {'])
        lines = [*before, header, *functions, "} loc(#loc)", *after]
        if self.resources:
            entries = ",\n".join(f'      {key}: "{blob}"' for key, blob in self.resources.items())
            lines += ["", "{-#", "  dialect_resources: {", "    builtin: {", entries, "    }", "  }", "#-}"]
        return Generated(
            text="\n".join(lines) + "\n",
            func_name=name.strip('"'),
            needs_func_name=with_body,
            arg_types=arg_types,
            result_types=result_types,
            aliases=alias_names,
        )


@st.composite
def mlir_modules(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Generated:
    return _Writer(draw).module()


# ------------------------------------------------------------------------- helpers
def inline_as_function(
    builder: MLIRBuilder,
    module: Generated,
    symbol: str,
    operands: Sequence[str],
    location: str | None = None,
    result_names: Sequence[str] | None = None,
) -> list[str]:
    """Emit ``func.func @symbol`` (original signature, ``operands`` as arguments) around one copy."""
    params = ", ".join(f"{n}: {t} loc(unknown)" for n, t in zip(operands, module.arg_types))
    with builder.block(f"func.func @{symbol}({params}) -> ({', '.join(module.result_types)}) {{", "} loc(unknown)"):
        results = inline_torch_mlir_output(
            module.text, operands, builder, func_name=module.selector, location=location, result_names=result_names
        )
        types = ", ".join(module.result_types)
        builder.emit(f"return {', '.join(results)} : {types}" if results else "return")
    return results


_RESOURCE_ENTRY = re.compile(r'^\s*("[^"]*"|[^\s:]+): "(0x[0-9A-Fa-f]*)",?$', re.MULTILINE)
_RESOURCE_USE = re.compile(r'dense_resource<("[^"]*"|[^>]+)>')


def resource_blobs(module: Any) -> dict[str, str]:
    """Resource key -> blob, as MLIR prints them (the context may have renamed keys on parse)."""
    return {key.strip('"'): blob for key, blob in _RESOURCE_ENTRY.findall(module.operation.get_asm())}


def canonical_function(module: Any, symbol: str, blobs: dict[str, str]) -> tuple[str, list[str]]:
    """The function's generic printout (its name and resource keys factored out) and op locations."""
    function = next(op for op in module.body.operations if op.attributes["sym_name"].value == symbol)
    if "note" in function.attributes:  # the wrapper does not copy the function's own attributes
        del function.attributes["note"]
    text = function.get_asm(print_generic_op_form=True, use_local_scope=True)
    text = text.replace(f'sym_name = "{symbol}"', 'sym_name = "_"')
    text = _RESOURCE_USE.sub(lambda m: f"dense_resource<{blobs[m.group(1).strip(chr(34))]}>", text)
    locations: list[str] = []

    def walk(operations: Any) -> None:
        for op in operations:
            locations.append(str(op.location))
            for region in op.regions:
                for block in region.blocks:
                    walk(block.operations)

    walk(list(function.regions[0].blocks[0].operations)[:-1])  # the return is the caller's
    return text, locations


def definitions(all_tokens: Sequence[Token]) -> tuple[Counter[str], int]:
    """How often each SSA name is defined in printer-style text, and how many values that makes.

    Definitions: ``%a, %b:2 =`` at the start of a line, ``%x: type`` (arguments) and
    ``%x = ...`` after an op name or in ``iter_args(...)``. Counted independently of the
    inliner; :func:`mlir_value_count` cross-checks the total.
    """
    tokens = [t for t in all_tokens if t.kind not in (TokenKind.WHITESPACE, TokenKind.COMMENT)]
    names: Counter[str] = Counter()
    values = 0
    in_result_list: set[int] = set()
    for index, token in enumerate(tokens):
        if token.kind is not TokenKind.VALUE_ID or index in in_result_list:
            continue
        following = tokens[index + 1]
        if index == 0 or tokens[index - 1].kind is TokenKind.NEWLINE:
            cursor = index
            while tokens[cursor].kind is TokenKind.VALUE_ID:
                in_result_list.add(cursor)
                name, suffix = tokens[cursor].value_name, tokens[cursor].value_suffix
                if tokens[cursor + 1].is_punct(":"):  # '%r : 2', the group size written apart
                    suffix = ":" + tokens[cursor + 2].text
                    cursor += 2
                names[name] += 1
                values += int(suffix[1:]) if suffix.startswith(":") else 1
                cursor += 2 if tokens[cursor + 1].is_punct(",") else 1
            assert tokens[cursor].is_punct("="), f"a line starts with the use {token.text}"
        elif (following.is_punct(":") and following.offset == token.end) or following.is_punct("="):
            names[token.value_name] += 1
            values += 1
    return names, values


def mlir_value_count(module: Any) -> int:
    """Op results plus block arguments in the whole module, as MLIR sees them."""
    total = 0

    def walk(operations: Any) -> None:
        nonlocal total
        for op in operations:
            total += len(op.results)
            for region in op.regions:
                for block in region.blocks:
                    total += len(block.arguments)
                    walk(block.operations)

    walk(module.body.operations)
    return total


def check_names_and_aliases(text: str, builder: MLIRBuilder, sources: Sequence[Generated], module: Any) -> None:
    """Every name is the builder's and defined once; no alias of a source module survives."""
    tokens = tokenize(text)
    used = {t.value_name for t in tokens if t.kind is TokenKind.VALUE_ID}
    assert used <= builder.names, f"names the builder never handed out: {sorted(used - builder.names)}"
    alias_names = set().union(*(s.aliases for s in sources))
    leaked = {t.text for t in tokens if t.kind in (TokenKind.HASH_ID, TokenKind.BANG_ID)} & alias_names
    assert not leaked, f"aliases of the source module leaked: {leaked}"
    names, values = definitions(tokens)
    assert values == mlir_value_count(module)
    assert not [name for name, count in names.items() if count > 1], "names defined more than once"


def check_faithful_copy(source: Generated, builder: MLIRBuilder, symbol: str) -> None:
    """The builder's module verifies, ``@symbol`` is alpha-equivalent to the source's
    function, and its names and aliases are the builder's."""
    rendered = builder.render()
    with mlir_session():
        original = parse_module(source.text, what="generated module")
        copy = parse_module(rendered, what="inlined module")
        expected = canonical_function(original, source.func_name, resource_blobs(original))
        assert canonical_function(copy, symbol, resource_blobs(copy)) == expected
        check_names_and_aliases(rendered, builder, [source], copy)


def reserved_builder(names: Sequence[str]) -> MLIRBuilder:
    """A builder with the wrapper functions' argument names taken up front."""
    builder = MLIRBuilder()
    for name in names:
        builder.reserve(name)
    return builder


def distinct_names(count: int) -> st.SearchStrategy[list[str]]:
    return st.lists(SSA_NAMES, min_size=count, max_size=count, unique=True)


# ---------------------------------------------------------------------- properties
def examples(count: int) -> int:
    """``count`` examples under the ci profile; more when the loaded profile asks for more (explore)."""
    return max(count, settings.default.max_examples)


@settings(max_examples=examples(300))
@given(data=st.data(), source=mlir_modules())
def test_inlined_function_is_alpha_equivalent_to_the_original(data: st.DataObject, source: Generated) -> None:
    assert "".join(t.text for t in tokenize(source.text)) == source.text
    operands = data.draw(distinct_names(len(source.arg_types)), label="operands")
    builder = reserved_builder(operands)
    inline_as_function(builder, source, "copy", operands)
    check_faithful_copy(source, builder, "copy")


@settings(max_examples=examples(200))
@given(data=st.data(), first=mlir_modules(), second=mlir_modules())
def test_many_copies_share_one_builder(data: st.DataObject, first: Generated, second: Generated) -> None:
    sources = data.draw(st.lists(st.sampled_from([first, second]), min_size=2, max_size=4), label="copies")
    locations = [data.draw(st.one_of(st.none(), LOCATIONS), label="location") for _ in sources]
    operands = data.draw(distinct_names(sum(len(s.arg_types) for s in sources) + len(first.arg_types)))
    builder = reserved_builder(operands)
    cursor = 0
    for index, (source, location) in enumerate(zip(sources, locations)):
        count = len(source.arg_types)
        inline_as_function(builder, source, f"copy{index}", operands[cursor : cursor + count], location)
        cursor += count
    # Two copies in one body, sharing their operands.
    shared = operands[cursor:]
    params = ", ".join(f"{n}: {t}" for n, t in zip(shared, first.arg_types))
    all_results = first.result_types * 2
    with builder.block(f"func.func @together({params}) -> ({', '.join(all_results)}) {{"):
        results = [r for _ in range(2) for r in inline_torch_mlir_output(first.text, shared, builder, func_name=first.selector)]
        builder.emit(f"return {', '.join(results)} : {', '.join(all_results)}" if results else "return")
    rendered = builder.render()
    with mlir_session():
        module = parse_module(rendered, what="module with several inlined copies")
        originals = {}
        for source in (first, second):
            original = parse_module(source.text, what="generated module")
            originals[id(source)] = canonical_function(original, source.func_name, resource_blobs(original))
        blobs = resource_blobs(module)
        for index, (source, location) in enumerate(zip(sources, locations)):
            text, op_locations = canonical_function(module, f"copy{index}", blobs)
            original_text, original_locations = originals[id(source)]
            assert text == original_text
            if location is None:
                assert op_locations == original_locations
            else:
                assert set(op_locations) <= {f"loc({location})"}
        check_names_and_aliases(rendered, builder, [first, second], module)


@settings(max_examples=examples(200))
@given(data=st.data(), source=mlir_modules())
def test_inlining_is_deterministic(data: st.DataObject, source: Generated) -> None:
    count = len(source.arg_types)
    names = data.draw(distinct_names(2 * count), label="operands")
    operands, others = names[:count], names[count:]
    location = data.draw(st.one_of(st.none(), LOCATIONS), label="location")
    rendered = set()
    for _ in range(2):
        builder = reserved_builder(names)
        inline_as_function(builder, source, "a", operands, location)
        inline_as_function(builder, source, "b", others)
        rendered.add(builder.render())
    assert len(rendered) == 1


@settings(max_examples=examples(200))
@given(data=st.data(), source=mlir_modules())
def test_results_take_the_names_the_caller_chose_where_they_can(data: st.DataObject, source: Generated) -> None:
    operands = data.draw(distinct_names(len(source.arg_types)), label="operands")
    builder = reserved_builder(operands)
    wanted = [builder.fresh("want") for _ in source.result_types]
    returned = inline_as_function(builder, source, "copy", operands, result_names=wanted)
    rendered = builder.render()
    defined, _ = definitions(tokenize(rendered))
    for want, got in zip(wanted, returned):
        # A wanted name is defined exactly when the result took it; a result keeps a name
        # of its own only when it is an argument, a group member or a value returned twice.
        assert (got == want) == (defined[want] == 1)
        keeps_own = "#" in got or got in operands or returned.count(got) > 1
        assert (got == want) != keeps_own, f"{got} (wanted {want})"
    check_faithful_copy(source, builder, "copy")
