"""The manual stays true to the code: docs/configuration.md's table is Settings', and nothing the
README, docs/ or the sources' comments name is missing (scripts/docs.py does the work)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
