"""Every name bench/lib/phase_timers.py patches exists, as the kind of function its table says.

The timers wrap private functions by string ("TaskManager._ended"): a rename or a move
would otherwise only show when bench/breakdown.py's daemon fails to start, or, for a name
that moved without its old one going, as a row that silently reads zero. No daemon here.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


phase_timers = load(BENCH / "lib" / "phase_timers.py")

PATCHED = [
    pytest.param(module_name, attribute, is_async, id=f"{module_name}:{attribute}")
    for _, _, module_name, attributes, is_async in phase_timers.DAEMON_TIMERS
    for attribute in attributes
]


def patched_function(module_name: str, attribute: str) -> object:
    """What phase_timers would wrap, as defined (getattr_static: no descriptor runs)."""
    owner, leaf = phase_timers.resolve(module_name, attribute)
    target = inspect.getattr_static(owner, leaf)
    return target.__func__ if isinstance(target, (staticmethod, classmethod)) else target


@pytest.mark.parametrize(("module_name", "attribute", "is_async"), PATCHED)
def test_each_patched_name_exists_and_is_sync_or_async_as_declared(
    module_name: str, attribute: str, is_async: bool
) -> None:
    function = patched_function(module_name, attribute)
    assert callable(function), f"hive_bash.{module_name}.{attribute} is not a function"
    assert inspect.iscoroutinefunction(function) == is_async, (
        f"hive_bash.{module_name}.{attribute}: the table says {'async' if is_async else 'sync'}"
    )


def test_a_name_that_is_gone_fails_to_resolve() -> None:
    with pytest.raises(AttributeError):
        patched_function("core.tasks.manager", "TaskManager._no_such_step")
    with pytest.raises(AttributeError):
        patched_function("core.tasks.manager", "NoSuchClass.submit")
    with pytest.raises(ModuleNotFoundError):
        patched_function("core.no_such_module", "anything")


def test_the_rows_each_timer_belongs_to_exist() -> None:
    names = {name for name, *_ in phase_timers.DAEMON_TIMERS}
    parents = {parent for _, parent, *_ in phase_timers.DAEMON_TIMERS if parent is not None}
    assert parents <= names | {phase_timers.SERVER}


def test_the_servers_it_wraps_have_their_app_factory() -> None:
    from hive_bash.daemon import serve

    assert callable(serve.create_app)
    assert callable(load(BENCH / "servers" / "reference_server.py").create_app)
