"""``python -m hodiff check``: help text, --list, suggestions, --order bounds (issue 8)."""

from __future__ import annotations

import numpy as np
import pytest

import hodiff as hd
import hodiff.functions as F
import hodiff.tools.cli_check as cli
from hodiff.__main__ import main
from hodiff.testing import all_specs


def test_help_describes_the_check_and_lists_functions_without_markup(capsys):
    with pytest.raises(SystemExit) as e:
        main(["check", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    words = " ".join(out.split())
    assert "against central finite differences" in words
    assert "functions:" in out
    listed = words.split("functions: ")[1].split(" examples:")[0].split(", ")
    assert listed == list(dict.fromkeys(s.fn.__name__ for s in all_specs()))
    assert "``" not in out
    assert "--list" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out


def test_list_prints_every_spec_with_its_orders(capsys):
    assert main(["check", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(all_specs())
    assert any(line.split() == ["add2[broadcast]", "orders", "1..3"] for line in lines)
    assert any(line.split() == ["sign", "not", "differentiable"] for line in lines)


def test_unknown_names_get_close_matches(capsys):
    assert cli.run_check(order=1, functions=["expp", "softmaxx", "zzzzzz"]) == 2
    err = capsys.readouterr().err
    assert "no spec for expp; did you mean exp" in err
    assert "no spec for softmaxx; did you mean softmax" in err
    assert "no spec for zzzzzz\n" in err  # nothing close: no suggestion
    assert "--list" in err


def test_order_above_what_the_specs_support_is_an_error(capsys):
    top = max(s.order for s in all_specs() if s.fn is F.exp)
    assert cli.run_check(order=top + 1, functions=["exp"]) == 2
    assert f"checked up to order {top}" in capsys.readouterr().err
    assert cli.run_check(order=top, functions=["exp"]) == 0
    capsys.readouterr()


def test_a_passing_report_table_is_one_readable_line():
    report = hd.gradcheck(F.exp, np.array([0.5, -1.0]), order=2, raise_exception=False)
    line = report.table()
    assert "\n" not in line
    assert line.startswith("all 4 elements passed (orders 1-2, largest error")
    failing = hd.gradcheck(
        lambda x: F.exp(x.unlinked()) * x, np.array([0.5]), raise_exception=False
    )  # drops the derivative of exp(x)
    assert not failing
    assert "analytic" in failing.table()  # failures: the table
    assert "analytic" in report.table(only_failures=False)  # the full table on request
