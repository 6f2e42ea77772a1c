"""The layers import downwards only: the task engine (hive_bash.core) and the vocabulary every
layer shares (hive_bash.model) import none of the tool layer, the daemon, the client or the SDK
shim, so what the model reads (hive_bash.mcp.replies) is built on the core's types, never the
other way round."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import hive_bash

PACKAGE = Path(hive_bash.__file__).parent
ABOVE_THE_CORE = ("hive_bash.mcp", "hive_bash.daemon", "hive_bash.client", "hive_bash.sdk")


def imported_names(path: Path) -> Iterator[str]:
    """Every module (and `from` name) a file imports, absolute."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_the_task_engine_imports_no_layer_above_it() -> None:
    files = [*sorted((PACKAGE / "core").rglob("*.py")), PACKAGE / "model.py"]
    upward = [
        (str(path.relative_to(PACKAGE)), name)
        for path in files
        for name in imported_names(path)
        if any(name == layer or name.startswith(layer + ".") for layer in ABOVE_THE_CORE)
    ]
    assert upward == []
