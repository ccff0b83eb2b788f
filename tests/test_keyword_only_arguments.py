"""ATen ops with keyword-only arguments: the rules pass them by name, and every op Helion
rewrites into an op of its own (its decomposition table) lowers with each keyword value.

Helion's decomposition table is Inductor's with a few entries replaced; a replaced entry
whose op takes keyword-only arguments maps the ATen call to a Helion op, which the rules
must turn back into the ATen call with those keywords (``aten.gelu``'s ``approximate``).
"""

from __future__ import annotations

import pytest
import torch
from helion._compiler.device_ir import _get_custom_decomp_table
import torch.nn.functional as F
from filecheck_util import run_filecheck
from kernels.keyword_kernels import (
    gelu_both_forms,
    gelu_erf,
    gelu_tanh,
    gelu_both_forms_reference,
    keyword_only_arguments,
    keyword_only_arguments_reference,
)
from torch._inductor.decomposition import select_decomp_table

from helion_mlir import OutputType, generate_mlir
from helion_mlir.errors import HelionMLIRError
from helion_mlir.lowering.aten_calls import bind_to_schema
from helion_mlir.runtime.kernel.compiled_kernel import compile_kernel

aten = torch.ops.aten
OUTPUT_TYPES = [t.value for t in OutputType]

# Each op Helion rewrites that has keyword-only arguments -> the kernel exercising them.
REWRITTEN_WITH_KEYWORDS = {aten.gelu.default: (gelu_both_forms, gelu_both_forms_reference)}


def _x() -> torch.Tensor:
    return torch.randn(19, 40, generator=torch.Generator().manual_seed(3))


def test_every_op_helion_rewrites_with_keyword_only_arguments_has_a_kernel() -> None:
    helion_table, inductor_table = _get_custom_decomp_table(), select_decomp_table()
    rewritten = {op for op, fn in helion_table.items() if inductor_table.get(op) is not fn}
    with_keywords = {op for op in rewritten if any(a.kwarg_only for a in op._schema.arguments)}
    assert with_keywords == set(REWRITTEN_WITH_KEYWORDS)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
@pytest.mark.parametrize("op", list(REWRITTEN_WITH_KEYWORDS), ids=str)
def test_rewritten_ops_lower_with_each_keyword_value(op: object, output_type: str) -> None:
    kernel, reference = REWRITTEN_WITH_KEYWORDS[op]
    x = _x()
    compiled = compile_kernel(kernel.bind((x,)), output_type=output_type)
    torch.testing.assert_close(compiled(x), reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_aten_ops_with_keyword_only_arguments_match_torch(output_type: str) -> None:
    x = _x()
    compiled = compile_kernel(keyword_only_arguments.bind((x,)), output_type=output_type)
    torch.testing.assert_close(compiled(x), keyword_only_arguments_reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("output_type", OUTPUT_TYPES)
def test_the_tanh_form_is_torchs_formula_with_its_constant(output_type: str) -> None:
    # torch-mlir's linalg lowering of aten.gelu(approximate="tanh") scales by sqrt(7/11).
    text = generate_mlir(gelu_both_forms.bind((_x(),)), output_type=output_type)
    assert "0.7978846" in text and "0.797724" not in text
    assert '"tanh"' not in text


@pytest.mark.parametrize("output_type", ["linalg-on-tensors", "raw"])
def test_the_erf_form_multiplies_by_the_square_root_of_one_half_as_torch_does(output_type: str) -> None:
    # torch-mlir's lowering of aten.gelu divides by sqrt(2): one division per element.
    text = generate_mlir(gelu_both_forms.bind((_x(),)), output_type=output_type)
    run_filecheck(text, """
        // CHECK: {{0\.7071067[0-9]*}}
        // CHECK-NOT: 1.41421
        // CHECK-NOT: aten.gelu
    """)
    if output_type == "linalg-on-tensors":
        run_filecheck(text, """
            // CHECK: math.erf
            // CHECK-NOT: arith.divf
        """)


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_both_forms_of_half_precision_are_computed_in_float32_and_rounded_once(dtype: torch.dtype,
                                                                              approximate: str) -> None:
    x = (torch.randn(64, 256, generator=torch.Generator().manual_seed(5)) * 3).to(dtype)
    kernel = gelu_tanh if approximate == "tanh" else gelu_erf
    got = compile_kernel(kernel.bind((x,)))(x)
    want = F.gelu(x, approximate=approximate)  # torch: float32 inside, one rounding
    # The float32 results differ from torch's by a few float32 ulps (another tanh or erf), which
    # moves a rounding to the half type only where it is nearly a tie; below x = -3,
    # 1 + tanh cancels to a few float32 ulps, where torch's own result and this one each
    # differ from the exact formula's in about 5% of the elements: there, no farther from
    # the exact formula than torch.
    plain = x.float() >= -3
    assert (got != want)[plain].float().mean() < 0.01
    exact = F.gelu(x.double(), approximate=approximate)
    assert (got.double() - exact).abs().max() <= (want.double() - exact).abs().max()
    torch.testing.assert_close(got, want, rtol=torch.finfo(dtype).eps, atol=1e-6)


def test_a_keyword_only_argument_given_by_position_names_the_keyword() -> None:
    x = torch.empty(2)
    assert bind_to_schema(aten.gelu.default, (x,), {"approximate": "tanh"}) == {"self": x, "approximate": "tanh"}
    with pytest.raises(HelionMLIRError, match=r"aten::gelu takes 1 positional argument.*approximate.*by name"):
        bind_to_schema(aten.gelu.default, (x, "tanh"), {})
    with pytest.raises(HelionMLIRError, match="no parameter named approx"):
        bind_to_schema(aten.gelu.default, (x,), {"approx": "tanh"})
