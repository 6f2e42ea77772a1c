"""The layers import downwards only: the shared base (hive_bash.model, errors, settings,
private_files, tokens) imports no layer, the task engine (hive_bash.core) none of the tool
layer, the daemon, the client or the SDK shim, so what the model reads (hive_bash.mcp.replies)
is built on the core's types, never the other way round."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import hive_bash

PACKAGE = Path(hive_bash.__file__).parent
ABOVE_THE_CORE = ("hive_bash.mcp", "hive_bash.daemon", "hive_bash.client", "hive_bash.sdk")
# The shared base (model, errors, settings, private_files, tokens) sits below the core too.
ABOVE_THE_BASE = ("hive_bash.core", *ABOVE_THE_CORE)


def imported_names(path: Path) -> Iterator[str]:
    """Every module (and `from` name) a file imports, absolute."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import (the package imports by absolute names only)"
            assert node.module is not None
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def upward_imports(files: list[Path], above: tuple[str, ...]) -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(PACKAGE)), name)
        for path in files
        for name in imported_names(path)
        if any(name == layer or name.startswith(layer + ".") for layer in above)
    ]


def test_the_task_engine_imports_no_layer_above_it() -> None:
    assert upward_imports(sorted((PACKAGE / "core").rglob("*.py")), ABOVE_THE_CORE) == []


def test_the_shared_base_imports_nothing_above_it() -> None:
    assert upward_imports(sorted(PACKAGE.glob("*.py")), ABOVE_THE_BASE) == []
