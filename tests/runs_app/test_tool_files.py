from __future__ import annotations

import os
from pathlib import Path

import pytest

from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from runs_app.engine.tools.base import LocalToolContext
from runs_app.engine.tools.files import TOOL_SPECS, file_list, file_read, file_write
from runs_app.engine.tools.paths import PathDenied, resolve_path


def context(tmp_path: Path, **risk: object) -> LocalToolContext:
    """A workspace at tmp_path/ws; tmp_path itself is forbidden unless a test says otherwise."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    risk.setdefault("forbidden_paths", (str(tmp_path),))
    return LocalToolContext(
        risk=RiskProfileSpec(alias="test", **risk),  # type: ignore[arg-type]
        runtime=RuntimeProfileSpec(alias="test"),
        workspace=workspace,
    )


def test_a_relative_path_is_read_from_the_workspace(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (ctx.workspace / "notes.txt").write_text("hello")

    result = file_read(ctx, {"path": "notes.txt"})

    assert result.success and result.output == "hello"


def test_an_absolute_path_inside_the_workspace_is_allowed(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (ctx.workspace / "notes.txt").write_text("hello")

    assert file_read(ctx, {"path": str(ctx.workspace / "notes.txt")}).output == "hello"


def test_a_workspace_under_the_default_forbidden_tmp_stays_usable(tmp_path: Path) -> None:
    ctx = context(tmp_path, forbidden_paths=RiskProfileSpec(alias="d").forbidden_paths + (str(tmp_path),))

    assert file_write(ctx, {"path": "a/b.txt", "content": "x"}).success
    assert file_read(ctx, {"path": "a/b.txt"}).output == "x"


def test_a_dot_dot_escape_is_refused_as_forbidden(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")

    result = file_read(context(tmp_path), {"path": "../outside.txt"})

    assert not result.success
    assert result.error == "Path '../outside.txt' is forbidden by policy"


def test_a_dot_dot_escape_is_refused_as_outside_when_nothing_forbids_it(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")

    result = file_read(context(tmp_path, forbidden_paths=()), {"path": "sub/../../outside.txt"})

    assert result.error == "Path 'sub/../../outside.txt' is outside the workspace and allowed roots"
    assert result.output == ""


def test_a_symlink_pointing_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    ctx = context(tmp_path, forbidden_paths=())
    (tmp_path / "secret.txt").write_text("secret")
    (ctx.workspace / "link.txt").symlink_to(tmp_path / "secret.txt")

    result = file_read(ctx, {"path": "link.txt"})

    assert result.error == "Path 'link.txt' is outside the workspace and allowed roots"


def test_writing_through_a_symlinked_directory_pointing_outside_creates_nothing(tmp_path: Path) -> None:
    ctx = context(tmp_path, forbidden_paths=())
    (tmp_path / "elsewhere").mkdir()
    (ctx.workspace / "door").symlink_to(tmp_path / "elsewhere")

    result = file_write(ctx, {"path": "door/planted.txt", "content": "x"})

    assert result.error == "Path 'door/planted.txt' is outside the workspace and allowed roots"
    assert not (tmp_path / "elsewhere" / "planted.txt").exists()


def test_a_dangling_symlink_pointing_outside_cannot_be_written_through(tmp_path: Path) -> None:
    ctx = context(tmp_path, forbidden_paths=())
    (ctx.workspace / "trap.txt").symlink_to(tmp_path / "not-yet.txt")

    result = file_write(ctx, {"path": "trap.txt", "content": "x"})

    assert result.error == "Path 'trap.txt' is outside the workspace and allowed roots"
    assert not (tmp_path / "not-yet.txt").exists()


def test_a_symlink_that_stays_inside_the_workspace_is_followed(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (ctx.workspace / "real.txt").write_text("real")
    (ctx.workspace / "alias.txt").symlink_to(ctx.workspace / "real.txt")

    assert file_read(ctx, {"path": "alias.txt"}).output == "real"


def test_a_forbidden_path_is_refused_even_without_workspace_only(tmp_path: Path) -> None:
    ctx = context(tmp_path, level="full", forbidden_paths=(str(tmp_path / "vault"),))
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "key").write_text("k")
    (tmp_path / "open.txt").write_text("open")

    assert file_read(ctx, {"path": str(tmp_path / "vault" / "key")}).error == (
        f"Path '{tmp_path / 'vault' / 'key'}' is forbidden by policy"
    )
    assert file_read(ctx, {"path": str(tmp_path / "open.txt")}).output == "open"


def test_full_level_lifts_workspace_only(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("out")

    supervised = context(tmp_path, forbidden_paths=(), workspace_only=True)
    full = context(tmp_path, forbidden_paths=(), workspace_only=True, level="full")

    assert not file_read(supervised, {"path": "../outside.txt"}).success
    assert file_read(full, {"path": "../outside.txt"}).output == "out"


def test_a_forbidden_directory_inside_the_workspace_wins_over_the_workspace(tmp_path: Path) -> None:
    ctx = context(tmp_path, forbidden_paths=(str(tmp_path / "ws" / "secrets"),))
    (ctx.workspace / "secrets").mkdir()
    (ctx.workspace / "secrets" / "token").write_text("t")

    assert file_read(ctx, {"path": "secrets/token"}).error == "Path 'secrets/token' is forbidden by policy"
    assert file_list(ctx, {"path": "secrets"}).error == "Path 'secrets' is forbidden by policy"


def test_forbidden_paths_expand_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "ws" / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("private")
    monkeypatch.setenv("HOME", str(home))
    ctx = context(tmp_path, forbidden_paths=("~/.ssh",))

    assert (
        file_read(ctx, {"path": "home/.ssh/id_rsa"}).error == "Path 'home/.ssh/id_rsa' is forbidden by policy"
    )
    assert file_read(ctx, {"path": "~/.ssh/id_rsa"}).error == "Path '~/.ssh/id_rsa' is forbidden by policy"


def test_an_allowed_root_under_a_forbidden_directory_is_usable(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    ctx = context(tmp_path, allowed_roots=(str(shared),))

    assert file_write(ctx, {"path": str(shared / "f.txt"), "content": "shared"}).success
    assert file_read(ctx, {"path": str(shared / "f.txt")}).output == "shared"


def test_writing_into_a_read_only_root_is_refused(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / "doc.txt").write_text("doc")
    ctx = context(tmp_path, allowed_roots_read_only=(str(reference),))
    target = str(reference / "doc.txt")

    result = file_write(ctx, {"path": target, "content": "overwritten"})

    assert result.error == f"Path '{target}' is in a read-only root and cannot be written"
    assert (reference / "doc.txt").read_text() == "doc"
    assert file_read(ctx, {"path": target}).output == "doc"


def test_reading_from_a_write_only_root_is_refused(tmp_path: Path) -> None:
    dropbox = tmp_path / "dropbox"
    dropbox.mkdir()
    ctx = context(tmp_path, allowed_roots_write_only=(str(dropbox),))
    target = str(dropbox / "report.txt")

    assert file_write(ctx, {"path": target, "content": "report"}).success
    assert file_read(ctx, {"path": target}).error == (
        f"Path '{target}' is in a write-only root and cannot be read"
    )
    assert file_list(ctx, {"path": str(dropbox)}).error == (
        f"Path '{dropbox}' is in a write-only root and cannot be read"
    )


def test_relative_allowed_roots_are_joined_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "doc.txt").write_text("doc")
    ctx = context(tmp_path, allowed_roots_read_only=("../ref",))

    assert file_read(ctx, {"path": "../ref/doc.txt"}).output == "doc"
    assert resolve_path(ctx, "../ref/doc.txt", for_write=False) == (tmp_path / "ref" / "doc.txt").resolve()


def test_the_readonly_level_refuses_file_write_but_not_reading(tmp_path: Path) -> None:
    ctx = context(tmp_path, level="readonly")
    (ctx.workspace / "notes.txt").write_text("keep")

    result = file_write(ctx, {"path": "notes.txt", "content": "changed"})

    assert result.error == "Security policy: read-only mode, cannot perform 'file_write'"
    assert file_read(ctx, {"path": "notes.txt"}).output == "keep"
    assert file_list(ctx, {}).output == "notes.txt"


def test_file_write_creates_parent_directories_and_reports_the_size(tmp_path: Path) -> None:
    ctx = context(tmp_path)

    result = file_write(ctx, {"path": "deep/er/note.txt", "content": "héllo"})

    assert result.output == "Wrote 6 bytes to 'deep/er/note.txt'"
    assert (ctx.workspace / "deep" / "er" / "note.txt").read_text(encoding="utf-8") == "héllo"


def test_file_write_replaces_existing_content(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (ctx.workspace / "f.txt").write_text("old and long")

    file_write(ctx, {"path": "f.txt", "content": "new"})

    assert (ctx.workspace / "f.txt").read_text() == "new"


def test_missing_or_mistyped_arguments_are_reported(tmp_path: Path) -> None:
    ctx = context(tmp_path)

    assert file_read(ctx, {}).error == "Missing 'path' parameter"
    assert file_read(ctx, {"path": ""}).error == "Missing 'path' parameter"
    assert file_read(ctx, {"path": 3}).error == "'path' must be a string"
    assert file_write(ctx, {"content": "x"}).error == "Missing 'path' parameter"
    assert file_write(ctx, {"path": "f.txt"}).error == "Missing 'content' parameter"
    assert file_write(ctx, {"path": "f.txt", "content": 5}).error == "'content' must be a string"
    assert file_read(ctx, {"path": "f.txt", "max_bytes": 0}).error == "'max_bytes' must be a positive integer"
    assert (
        file_read(ctx, {"path": "f.txt", "max_bytes": True}).error == "'max_bytes' must be a positive integer"
    )


def test_file_read_is_cut_at_max_bytes_with_a_marker(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (ctx.workspace / "big.txt").write_text("abcdefghij")

    result = file_read(ctx, {"path": "big.txt", "max_bytes": 4})

    assert result.output == "abcd\n[truncated: showing the first 4 of 10 bytes]"


def test_file_read_reports_missing_files_directories_and_fifos(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (ctx.workspace / "dir").mkdir()
    os.mkfifo(ctx.workspace / "pipe")

    assert file_read(ctx, {"path": "nope.txt"}).error == "Path 'nope.txt' does not exist"
    assert file_read(ctx, {"path": "dir"}).error == "Path 'dir' is a directory"
    assert file_read(ctx, {"path": "pipe"}).error == "Path 'pipe' is not a regular file"
    assert file_write(ctx, {"path": "dir", "content": ""}).error == "Path 'dir' is a directory"


def test_a_null_byte_in_a_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PathDenied, match="null byte"):
        resolve_path(context(tmp_path), "a\x00b", for_write=False)


def test_file_list_sorts_entries_and_marks_directories(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    for name in ("b.txt", "a.txt"):
        (ctx.workspace / name).write_text("")
    for name in ("c", "a"):
        (ctx.workspace / name).mkdir()

    assert file_list(ctx, {}).output == "a/\na.txt\nb.txt\nc/"
    assert file_list(ctx, {"path": "."}).output == "a/\na.txt\nb.txt\nc/"


def test_file_list_reports_empty_directories_and_non_directories(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    (ctx.workspace / "empty").mkdir()
    (ctx.workspace / "f.txt").write_text("")

    assert file_list(ctx, {"path": "empty"}).output == "(empty directory)"
    assert file_list(ctx, {"path": "f.txt"}).error == "Path 'f.txt' is not a directory"
    assert file_list(ctx, {"path": "missing"}).error == "Path 'missing' does not exist"


def test_tool_specs_describe_the_three_file_tools() -> None:
    assert set(TOOL_SPECS) == {"file_read", "file_write", "file_list"}
    for name, spec in TOOL_SPECS.items():
        assert spec["name"] == name and spec["description"]
        assert spec["parameters"]["type"] == "object"
    assert TOOL_SPECS["file_read"]["parameters"]["required"] == ["path"]
    assert TOOL_SPECS["file_write"]["parameters"]["required"] == ["path", "content"]
    assert TOOL_SPECS["file_list"]["parameters"]["required"] == []


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/1/environ", "/dev/fd/0", "/sys/kernel/notes"])
def test_file_tools_never_open_proc_sys_or_dev_whatever_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    monkeypatch.setenv("CLAWBOARD_CANARY", "sk-canary")
    ctx = context(tmp_path, level="full", workspace_only=False, forbidden_paths=())

    result = file_read(ctx, {"path": path})

    assert not result.success and "sk-canary" not in result.output
    assert result.error is not None and result.error.startswith(f"Path '{path}' is in /")
    assert result.error.endswith(", which file tools never open")


def test_a_symlink_through_proc_is_judged_by_where_it_leads(tmp_path: Path) -> None:
    ctx = context(tmp_path, level="full", workspace_only=False, forbidden_paths=())
    (ctx.workspace / "env").symlink_to("/proc/self/environ")

    assert file_read(ctx, {"path": "env"}).error == "Path 'env' is in /proc, which file tools never open"


def test_file_write_replaces_the_name_so_another_hard_link_keeps_its_content(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("kept")
    os.link(elsewhere, ctx.workspace / "linked.txt")
    (ctx.workspace / "linked.txt").chmod(0o640)

    assert file_write(ctx, {"path": "linked.txt", "content": "new"}).success

    assert (ctx.workspace / "linked.txt").read_text() == "new"
    assert elsewhere.read_text() == "kept"
    assert (ctx.workspace / "linked.txt").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in ctx.workspace.iterdir()) == ["linked.txt"]  # no temporary left
