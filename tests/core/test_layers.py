"""The layers import downwards only: the shared base (hive_bash.model, errors, settings,
private_files, tokens, burst_log) imports no layer, the task engine (hive_bash.core) none of the tool
layer, the daemon, the client or the SDK shim, so what the model reads (hive_bash.mcp.replies)
is built on the core's types, never the other way round; and the layers above the engine
(mcp, client, daemon) import only the names its face (hive_bash/core/__init__.py) exports."""

from __future__ import annotations

import ast
import importlib
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


def past_the_face(files: list[Path], root: Path = PACKAGE) -> list[tuple[str, str]]:
    """(file, name) for each import of a core module, or of a name hive_bash.core does not export."""
    face = set(getattr(hive_bash.core, "__all__", ()))
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
    """Each name resolves (imported on first use), and none is a module: a module would open the whole of it."""
    for name in hive_bash.core.__all__:
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


# A lazy face (hive_bash/core/__init__.py; hive_bash/core/output/__init__.py is a plain one) names each of its
# names twice: imported under `if TYPE_CHECKING:` for the type checker, and in `_FACE` (name -> the
# module it is imported from on first use); `__all__` is `_FACE`'s keys.
LAZY_FACES = sorted(path for path in PACKAGE.rglob("__init__.py") if "\n_FACE" in path.read_text())


def face_mismatches(path: Path, package: str) -> list[str]:
    """What the type checker's imports of a lazy face and its `_FACE` map disagree on."""
    tree = ast.parse(path.read_text())
    face = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "_FACE"
    )
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom) and imported.module is not None, ast.unparse(imported)
                for alias in imported.names:
                    typed[alias.asname or alias.name] = f"{imported.module}.{alias.name}"
    found = [f"{name}: imported for the type checker only" for name in sorted(typed.keys() - face.keys())]
    found += [f"{name}: in _FACE only" for name in sorted(face.keys() - typed.keys())]
    found += [
        f"{name}: {typed[name]} for the type checker, {package}.{face[name]}.{name} in _FACE"
        for name in sorted(typed.keys() & face.keys())
        if typed[name] != f"{package}.{face[name]}.{name}"
    ]
    return found


def test_each_lazy_face_names_the_same_names_for_the_type_checker_and_at_run_time() -> None:
    assert [str(path.relative_to(PACKAGE)) for path in LAZY_FACES] == ["core/__init__.py"]
    for path in LAZY_FACES:
        package = ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        assert face_mismatches(path, package) == [], path
        module = importlib.import_module(package)
        assert sorted(module.__all__) == sorted(module._FACE), path
        for name, home in module._FACE.items():
            assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{home}"), name), name


def test_the_lazy_face_check_names_what_disagrees(tmp_path: Path) -> None:
    face = tmp_path / "__init__.py"
    face.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from p.a import Both as Both, Typed as Typed\n"
        "    from p.b import Moved as Moved\n"
        '_FACE: dict[str, str] = {"Both": "a", "Moved": "a", "Lazy": "b"}\n'
    )
    assert face_mismatches(face, "p") == [
        "Typed: imported for the type checker only",
        "Lazy: in _FACE only",
        "Moved: p.b.Moved for the type checker, p.a.Moved in _FACE",
    ]
