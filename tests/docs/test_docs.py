"""The manual stays true to the code: docs/configuration.md's table is Settings', and nothing the
README, docs/ or the sources' comments name is missing (scripts/docs.py does the work)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS_SCRIPT = ROOT / "scripts" / "docs.py"


def docs_check(*parts: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DOCS_SCRIPT), *parts], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_configuration_table_is_generated_from_settings() -> None:
    proc = docs_check("config")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_reference_names_a_file_that_does_not_exist() -> None:
    proc = docs_check("refs")
    assert proc.returncode == 0, "dangling references (file:line: what is missing):\n" + proc.stdout + proc.stderr


def docs_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_script", DOCS_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_check_names_what_is_missing() -> None:
    docs = docs_module()
    tests: dict[Path, object] = {}
    assert docs.check_reference("docs/configuration.md", None, tests) is None
    assert docs.check_reference("docs/no-such-page.md", None, tests) == "docs/no-such-page.md does not exist"
    assert docs.check_reference("tests/core/tasks/test_manager.py", "test_cmd_rules", tests) is None
    assert docs.check_reference("tests/core/tasks/test_manager.py", "test_cmd_*", tests) is None
    assert docs.check_reference("tests/core/tasks/test_manager.py", "test_no_such_*", tests) == (
        "tests/core/tasks/test_manager.py has no test test_no_such_*"
    )
    modules: dict[Path, object] = {}
    assert docs.check_module_name("hive_bash.sdk.client.open_client", modules) is None
    assert docs.check_module_name("hive_bash.sdk.open_client", modules) == (
        "hive_bash.sdk.open_client: hive_bash.sdk has no open_client"
    )
    assert docs.check_module_name("hive_bash.mcp.tools.BashTools.no_such_tool", modules) == (
        "hive_bash.mcp.tools.BashTools.no_such_tool: BashTools has no no_such_tool"
    )
    readme = ROOT / "README.md"
    assert docs.check_link(readme, "docs/tools.md", "waiting-for-input") is None
    assert docs.check_link(readme, "docs/tools.md", "no-such-heading") == (
        "link target docs/tools.md#no-such-heading: no such heading"
    )
