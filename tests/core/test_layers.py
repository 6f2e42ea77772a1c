"""The layers import downwards only: the shared base (hive_bash.model, errors, settings,
private_files, tokens, burst_log) imports no layer, the task engine (hive_bash.core) none of the tool
layer, the daemon, the client or the SDK shim, so what the model reads (hive_bash.mcp.replies)
is built on the core's types, never the other way round; and the layers above the engine
(mcp, client, daemon) import only the names its face (hive_bash/core/__init__.py) exports."""

from __future__ import annotations

import ast
import types
from collections.abc import Iterator
from pathlib import Path

import hive_bash
import hive_bash.core

PACKAGE = Path(hive_bash.__file__).parent
ABOVE_THE_CORE = ("hive_bash.mcp", "hive_bash.daemon", "hive_bash.client", "hive_bash.sdk")
# The shared base (model, errors, settings, private_files, tokens, burst_log) sits below the core too.
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
    assert core_files_that("decide_ending(") == ["tasks/ending.py", "tasks/lifecycle.py"]
    assert core_files_that("record.status, record.end_reason") == ["tasks/task.py"]
    assert core_files_that(".end_reason =") == []


def test_records_reach_the_disk_through_the_bookkeeping_only() -> None:
    users = {name for name in core_files_that("RecordSaver") if name not in ("storage/saver.py", "storage/__init__.py")}
    assert users == {"tasks/bookkeeping.py"}
    assert core_files_that("_store.save(") == ["storage/saver.py"]
    assert core_files_that(".cause =") == ["tasks/task.py"]  # a Task's cause is set by its own methods


# The layers above reach the engine through its face (hive_bash/core/__init__.py) only.
THROUGH_THE_FACE = ("mcp", "client", "daemon")


def face_names() -> set[str]:
    """The names hive_bash/core/__init__.py imports: all the engine exports."""
    tree = ast.parse((PACKAGE / "core" / "__init__.py").read_text())
    return {alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names} - {
        "annotations"
    }


def past_the_face(files: list[Path], root: Path = PACKAGE) -> list[tuple[str, str]]:
    """(file, name) for each import of a core module, or of a name hive_bash.core does not export."""
    face = face_names()
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names if alias.name.startswith("hive_bash.core")]
            elif isinstance(node, ast.ImportFrom) and node.module == "hive_bash.core":
                names = [f"hive_bash.core.{alias.name}" for alias in node.names if alias.name not in face]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hive_bash.core."):
                names = [str(node.module)]
            else:
                continue
            found.extend((str(path.relative_to(root)), name) for name in names)
    return found


def test_the_layers_above_import_only_the_engines_face() -> None:
    files = sorted(path for layer in THROUGH_THE_FACE for path in (PACKAGE / layer).rglob("*.py"))
    assert past_the_face(files) == []


def test_the_face_exports_names_of_the_engine_not_its_modules() -> None:
    """Each name resolves, and none is a module: a module would open the whole of it."""
    for name in face_names():
        assert not isinstance(getattr(hive_bash.core, name), types.ModuleType), name


def test_the_face_check_names_what_passes_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import hive_bash.core.tasks.task\n"
        "from hive_bash.core.output.reading import Page\n"
        "from hive_bash.core import output, TaskView\n"
    )
    assert past_the_face([bad], tmp_path) == [
        ("bad.py", "hive_bash.core.tasks.task"),
        ("bad.py", "hive_bash.core.output.reading"),
        ("bad.py", "hive_bash.core.output"),
    ]


# Inside the engine: its subpackages, lowest first. Each imports only subpackages before it in
# this list, and only through their faces (their __init__.py): `from hive_bash.core.storage
# import RecordStore`, never hive_bash.core.storage.records from outside storage/. The
# modules at the engine's root (wording, shell_words, exit_meaning, command_warnings) import no
# subpackage; every subpackage may import them.
SUBPACKAGES = ("storage", "output", "processes", "sessions", "todos", "tasks")
ROOT_MODULES = ("wording", "shell_words", "exit_meaning", "command_warnings")


def engine_imports(path: Path) -> Iterator[str]:
    """The engine's modules and subpackages a file imports, as dotted names below hive_bash.core."""
    for name in imported_names(path):
        if name.startswith("hive_bash.core."):
            yield name.removeprefix("hive_bash.core.")


def misplaced_engine_imports(core: Path) -> list[tuple[str, str]]:
    """(file, import) for each import inside the engine that goes up, sideways, or past a face."""
    found = []
    for path in sorted(core.rglob("*.py")):
        parts = path.relative_to(core).parts
        own = parts[0] if len(parts) == 2 else None  # None: the engine's root (its face or a root module)
        if path == core / "__init__.py":
            continue  # the engine's face names every subpackage's face
        allowed = set(ROOT_MODULES)
        if own is not None:
            allowed |= set(SUBPACKAGES[: SUBPACKAGES.index(own)])
        for name in engine_imports(path):
            top, _, rest = name.partition(".")
            if top == own:
                continue  # a subpackage's modules import each other by their full names
            if top not in allowed or (top in SUBPACKAGES and "." in rest):
                found.append(("/".join(parts), name))
    return found


def test_the_engines_subpackages_import_downward_through_faces() -> None:
    core = PACKAGE / "core"
    assert sorted(p.name for p in core.iterdir() if (p / "__init__.py").exists()) == sorted(SUBPACKAGES)
    assert sorted(p.stem for p in core.glob("*.py") if p.stem != "__init__") == sorted(ROOT_MODULES)
    assert misplaced_engine_imports(core) == []


def test_the_subpackage_check_names_what_goes_up_or_past_a_face(tmp_path: Path) -> None:
    core = tmp_path / "core"
    (core / "storage").mkdir(parents=True)
    (core / "tasks").mkdir()
    (core / "wording.py").write_text("from hive_bash.core.storage import TaskRecord\n")
    (core / "storage" / "records.py").write_text(
        "from hive_bash.core.storage.task_files import TaskFiles\nfrom hive_bash.core.tasks import Task\n"
    )
    (core / "tasks" / "task.py").write_text(
        "from hive_bash.core.storage import RecordStore\n"
        "from hive_bash.core.storage.records import TaskRecord\n"
        "from hive_bash.core import wording\n"
    )
    assert misplaced_engine_imports(core) == [
        ("storage/records.py", "tasks"),
        ("storage/records.py", "tasks.Task"),
        ("tasks/task.py", "storage.records.TaskRecord"),
        ("wording.py", "storage"),
        ("wording.py", "storage.TaskRecord"),
    ]


def test_each_face_is_plain_imports_under_their_own_names() -> None:
    """A grep from a call site finds the definition: a face imports each name as itself, at import time
    (no lazy registry, no name imported only for the type checker, no `x as y`)."""
    found = []
    for path in sorted(PACKAGE.rglob("__init__.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                found.append(f"{path.relative_to(PACKAGE)}: a lazy __getattr__")
            if isinstance(node, ast.If):
                found.append(f"{path.relative_to(PACKAGE)}: an import under a condition")
            if isinstance(node, ast.ImportFrom):
                found += [
                    f"{path.relative_to(PACKAGE)}: {alias.name} as {alias.asname}"
                    for alias in node.names
                    if alias.asname not in (None, alias.name)
                ]
    assert found == []
