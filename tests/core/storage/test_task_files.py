"""hive_bash.core.storage.task_files on its own: the name of every file in a tasks dir, and what the directory holds."""

from __future__ import annotations

from pathlib import Path

from hive_bash.core.storage.task_files import TaskFiles


def test_a_tasks_files_are_named_by_its_id(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    assert [path.name for path in files.of_task("build-1")] == [
        "build-1.json",
        "build-1.out",
        "build-1.err",
        "build-1.cmd",
        ".build-1.json.reserve",
        "build-1.rc",
        "build-1.state",
    ]
    assert all(path.parent == tmp_path for path in files.of_task("build-1"))
    assert (files.output("t", "stdout"), files.output("t", "stderr")) == (files.out("t"), files.err("t"))
    assert (files.session("dev").name, files.spare("ab-1").name) == ("dev.session", ".spare-ab-1.reserve")


def test_listing_finds_records_sessions_and_spares_only(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    for path in (files.record("b"), files.record("a"), files.out("a"), files.session("dev"), files.reserve("a")):
        path.write_text("")
    files.spare("x-0").write_text("")
    assert list(files.records()) == [("a", files.record("a")), ("b", files.record("b"))]
    assert list(files.sessions()) == [("dev", files.session("dev"))]
    assert list(files.spares()) == [files.spare("x-0")]
