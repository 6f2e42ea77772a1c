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


def core_files_that(predicate: str) -> list[str]:
    """The core modules whose source contains `predicate` (a call or an assignment, as written)."""
    return sorted(
        str(path.relative_to(PACKAGE / "core"))
        for path in (PACKAGE / "core").rglob("*.py")
        if predicate in path.read_text()
    )


def test_a_tasks_ending_is_decided_in_one_place_and_written_once() -> None:
    # decide_ending is called by the lifecycle only; Task.end is the one write of an end into a record.
    assert core_files_that("decide_ending(") == ["ending.py", "lifecycle.py"]
    assert core_files_that("record.status, record.end_reason") == ["task.py"]
    assert core_files_that(".end_reason =") == []


def test_records_reach_the_disk_through_the_lifecycle_only() -> None:
    users = {name for name in core_files_that("RecordSaver") if name != "record_saver.py"}
    assert users == {"lifecycle.py"}
    assert core_files_that("_store.save(") == ["record_saver.py"]
    assert core_files_that(".cause =") == ["task.py"]  # a Task's cause is set by its own methods
