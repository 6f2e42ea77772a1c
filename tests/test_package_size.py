"""The package stays compact by design (docs/development.md, "Size"): a maintainer reads it whole,
so its size is a budget kept by a test, not a wish: lines per module and per class, and each
module-level constant defined in one module only, and 12,500 lines for the whole package."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import hive_bash

PACKAGE = Path(hive_bash.__file__).parent
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 200
MAX_PACKAGE_LINES = 12_500


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_its_budget() -> None:
    over = {
        str(path.relative_to(PACKAGE)): lines
        for path in modules()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert over == {}, f"modules over {MAX_MODULE_LINES} lines"


def test_the_package_is_within_its_budget() -> None:
    lines = sum(len(path.read_text().splitlines()) for path in modules())
    assert lines <= MAX_PACKAGE_LINES, f"hive_bash/ is {lines} lines; delete before you add (docs/development.md)"


def test_no_class_is_over_its_budget() -> None:
    over = {
        f"{path.relative_to(PACKAGE)}:{node.name}": node.end_lineno - node.lineno + 1
        for path in modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
        if node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    }
    assert over == {}, f"classes over {MAX_CLASS_LINES} lines"


def test_each_module_level_constant_is_defined_once() -> None:
    """An UPPER_CASE name assigned a literal at module level in two modules is one fact kept twice."""
    where: defaultdict[str, list[str]] = defaultdict(list)
    for path in modules():
        for node in ast.parse(path.read_text()).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            value = getattr(node, "value", None)
            if value is None or isinstance(value, ast.Name | ast.Attribute):
                continue  # `X = other.X` names the one definition, it does not repeat it
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                    where[target.id].append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
