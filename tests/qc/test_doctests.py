"""The examples in qc's docstrings run: a number an example shows is one the code gives."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import qc

MODULES = sorted(info.name for info in pkgutil.iter_modules(qc.__path__, "qc."))


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"


def test_the_modules_have_examples() -> None:
    tried = sum(doctest.testmod(importlib.import_module(n)).attempted for n in MODULES)
    assert len(MODULES) >= 10 and tried >= 50
