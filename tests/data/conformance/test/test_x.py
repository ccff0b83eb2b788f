"""A stand-in for a module of Helion's test suite, run by tests/test_conformance_runner.py
through scripts/helion_conformance.py: one test of each kind of outcome."""

from __future__ import annotations

import os
import unittest

import torch

import helion
from helion._testing import DEVICE, TestCase, code_and_output
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[8]))
def add_one(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + 1
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def inline_asm(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.inline_asm_elementwise("mov.u32 $0, $1;", "=r,r", [x[tile]], dtype=torch.int32,
                                              is_pure=True, pack=1)
    return out


class TestX(TestCase):
    def test_a_passes_with_code_assertions(self) -> None:
        x = torch.arange(20.0, device=DEVICE)
        code, out = code_and_output(add_one, (x,))
        torch.testing.assert_close(out, x + 1)
        self.assertIn("text no code generator writes", code)
        lines = code.splitlines()
        assert len([line for line in lines if "tl.load" in line]) == 99
        self.assertExpectedJournal(code)

    def test_b_wrong_numbers(self) -> None:
        x = torch.arange(20.0, device=DEVICE)
        torch.testing.assert_close(add_one(x), x + 2)

    def test_c_typed_refusal(self) -> None:
        inline_asm(torch.arange(20, dtype=torch.int32, device=DEVICE))

    def test_d_crash(self) -> None:
        os.abort()

    def test_e_expected_error_not_raised(self) -> None:
        with self.assertRaises(ValueError):
            add_one(torch.arange(20.0, device=DEVICE))

    def test_f_needs_newer_helion(self) -> None:
        from helion.language import a_name_no_helion_defines  # noqa: F401

    @unittest.skip("needs an accelerator")
    def test_g_skipped(self) -> None:
        raise AssertionError("a skipped test does not run")

    def test_h_after_the_crash(self) -> None:
        x = torch.ones(5, device=DEVICE)
        torch.testing.assert_close(add_one(x), x + 1)
        # The kernels' device, to the tests; torch itself still sees no accelerator.
        assert torch.accelerator.current_accelerator() == DEVICE
        assert not torch.accelerator.is_available()
        a = torch.ones(2, 3, 4, dtype=torch.bfloat16, device=DEVICE)  # a CPU kernel torch lacks, supplied
        torch.testing.assert_close(torch.bmm(a, a.transpose(1, 2), out_dtype=torch.float32),
                                   torch.full((2, 3, 3), 4.0, device=DEVICE))
