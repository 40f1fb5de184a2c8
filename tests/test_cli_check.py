"""``python -m hodiff check``: the table, the exit status, and that wrong rules are caught."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import hodiff.functions as F
import hodiff.tools.cli_check as cli
from hodiff.__main__ import main
from hodiff.engine.function import Function
from hodiff.testing import Spec


class StopGradient(Function):
    """The value of x, cut from the graph (a test helper, not a hodiff primitive)."""

    differentiable = False

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0].copy()


class WrongFirst(Function):
    """y = x^2 with the rule 3 x gy: wrong at order 1."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] ** 2

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * inputs[0].data * 3.0, accum[0])


class WrongSecond(Function):
    """y = x^2 with the rule 2 stop(x) gy: right at order 1, its own derivative is lost."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] ** 2

    def backward_impl(self, inputs, outputs, prop_down, accum):
        if prop_down[0]:
            inputs[0].store(outputs[0].grad * StopGradient()(inputs[0].data) * 2.0, accum[0])


class NoRule(Function):
    """y = 2 x without a backward rule: the check must report it, not crash."""

    def forward_impl(self, inputs, outputs):
        outputs[0] = inputs[0] * 2.0


def wrong_first(x):
    return WrongFirst()(x)


def wrong_second(x):
    return WrongSecond()(x)


def no_rule(x):
    return NoRule()(x)


BAD_SPECS = [
    Spec(wrong_first, ((2, 3),), np.square),
    Spec(wrong_second, ((2, 3),), np.square),
    Spec(no_rule, ((2,),), lambda x: 2 * x),
    Spec(F.exp, ((2, 3),), np.exp),
]


def rows_of(out: str) -> dict[tuple[str, int], str]:
    """(function, order) -> result, parsed from the printed table."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[-1] in ("pass", "FAIL"):
            rows[(parts[0], int(parts[1]))] = parts[-1]
    return rows


def test_known_good_functions_pass(capsys):
    assert cli.run_check(order=3, functions=["add2", "mul2", "exp"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "function",
        "order",
        "max",
        "abs",
        "err",
        "max",
        "rel",
        "err",
        "result",
    ]
    rows = rows_of(out)
    for name in ("add2", "add2[broadcast]", "mul2", "exp"):
        assert [rows[(name, k)] for k in (1, 2, 3)] == ["pass"] * 3
    assert "0 failed" in out.splitlines()[-1]


def test_order_limits_the_rows(capsys):
    assert cli.run_check(order=1, functions=["exp"]) == 0
    rows = rows_of(capsys.readouterr().out)
    assert set(rows) == {("exp", 1), ("exp[0d]", 1)}


def test_wrong_rules_are_caught(monkeypatch, capsys):
    monkeypatch.setattr(cli, "all_specs", lambda: BAD_SPECS)
    assert cli.run_check(order=2) == 1
    out = capsys.readouterr().out
    rows = rows_of(out)
    assert rows[("wrong_first", 1)] == "FAIL"
    assert rows[("wrong_second", 1)] == "pass"
    assert rows[("wrong_second", 2)] == "FAIL"
    assert rows[("exp", 1)] == rows[("exp", 2)] == "pass"
    assert rows[("no_rule", 1)] == "FAIL"
    assert "no backward rule" in out  # the exception is reported, not raised
    summary = out.splitlines()[-1]
    assert "4 failed" in summary  # wrong_first 1, wrong_second 2, no_rule 1 and 2
    assert "wrong_first" in summary


def test_selected_passing_function_among_bad_ones(monkeypatch, capsys):
    monkeypatch.setattr(cli, "all_specs", lambda: BAD_SPECS)
    assert cli.run_check(order=3, functions=["exp"]) == 0
    assert cli.run_check(order=1, functions=["wrong_second"]) == 0  # only order 2 is wrong
    capsys.readouterr()


def test_bad_arguments(capsys):
    assert cli.run_check(order=3, functions=["no_such_function"]) == 2
    assert "no spec for no_such_function" in capsys.readouterr().err
    assert cli.run_check(order=0, functions=["exp"]) == 2


def test_non_differentiable_specs_are_skipped(capsys):
    assert cli.run_check(order=2, functions=["sign"]) == 0  # two sign rows (alpha at 0 too)
    assert "2 not differentiable, skipped" in capsys.readouterr().out


def test_plain_counter_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    cli.run_check(order=1, functions=["exp"])
    err = capsys.readouterr().err
    assert "[1/2] exp" in err
    assert "[2/2] exp[0d]" in err


def test_main_dispatches_to_run_check(monkeypatch, capsys):
    monkeypatch.setattr(cli, "all_specs", lambda: BAD_SPECS)
    assert main(["check", "--order", "1", "--functions", "wrong_first"]) == 1
    assert main(["check", "--order", "1", "--functions", "exp"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(("names", "status"), [(["exp"], 0), (["nothing_here"], 2)])
def test_python_dash_m(names, status):
    proc = subprocess.run(
        [sys.executable, "-m", "hodiff", "check", "--order", "2", "--functions", *names],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == status, proc.stdout + proc.stderr
    if status == 0:
        assert "passed, 0 failed" in proc.stdout
