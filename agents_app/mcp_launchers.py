"""Launchers that download an MCP server when it starts (`npx -y <pkg>`, `uvx <pkg>`, …).

A stdio server runs in a sandbox without network, so a command that would fetch its package
first can never start there. Such a command is resolved, when it is read, to the server's
installed executable: in the project's MCP install directory (`MCP_SERVERS_DIR`: npm packages
under `node_modules/.bin`, PyPI packages under `venv/bin`), then on PATH. A launcher that
cannot be resolved stays as it is and the validator refuses it with how to install it.
`parse` is pure; `resolve` looks at the file system."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

NPM, PYPI = "npm", "pypi"
# Flags a launcher may carry before the package; each takes no value.
_NPX_FLAGS = frozenset({"-y", "--yes", "-q", "--quiet", "--silent"})
_BUNX_FLAGS = frozenset({"--bun", "--silent", "-y", "--yes"})
_UVX_FLAGS = frozenset({"-q", "--quiet", "--offline", "--no-cache"})
_VERSION_NPM = re.compile(r"^(@[^/@]+/[^@]+|[^@]+)@.*$")
_VERSION_PYPI = re.compile(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?(?:[@=<>!~].*)?$")


@dataclass(frozen=True)
class Launcher:
    """`text` is how the command was written (`npx -y <pkg>`), `package` the package it would
    download, `rest` the server's own arguments."""

    text: str
    ecosystem: str
    package: str
    rest: tuple[str, ...]

    @property
    def executable(self) -> str:
        """The executable the package installs, by the usual convention (its unscoped name)."""
        return self.package.rsplit("/", 1)[-1]


def _package(ecosystem: str, spec: str) -> str:
    found = (_VERSION_NPM if ecosystem == NPM else _VERSION_PYPI).match(spec)
    return found.group(1) if found else spec


def parse(command: str, args: tuple[str, ...] | list[str]) -> Launcher | None:
    """The launcher `command args` is, or None when it runs an installed program."""
    name = os.path.basename(command.strip())
    words = list(args)
    prefix = [name]
    if name in ("pnpm", "yarn") and words[:1] == ["dlx"]:
        prefix.append(words.pop(0))
        flags, ecosystem = _NPX_FLAGS, NPM
    elif name == "npx":
        flags, ecosystem = _NPX_FLAGS, NPM
    elif name == "bunx":
        flags, ecosystem = _BUNX_FLAGS, NPM
    elif name == "uvx":
        flags, ecosystem = _UVX_FLAGS, PYPI
    elif name == "uv" and words[:2] == ["tool", "run"]:
        prefix += words[:2]
        words = words[2:]
        flags, ecosystem = _UVX_FLAGS, PYPI
    else:
        return None
    while words and words[0] in flags:
        prefix.append(words.pop(0))
    if not words or words[0].startswith("-"):
        # Some other option (`--package`, `--from`, …): still a download, of a package not named here.
        return Launcher(text=" ".join(prefix), ecosystem=ecosystem, package="", rest=tuple(words))
    spec = words.pop(0)
    return Launcher(
        text=" ".join([*prefix, spec]),
        ecosystem=ecosystem,
        package=_package(ecosystem, spec),
        rest=tuple(words),
    )


def _npm_bin_names(root: Path, package: str) -> list[str]:
    """The executables an installed npm package declares (`bin` of its package.json)."""
    try:
        manifest = json.loads((root / "node_modules" / package / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    declared = manifest.get("bin") if isinstance(manifest, dict) else None
    if isinstance(declared, str):
        return [package.rsplit("/", 1)[-1]]
    if isinstance(declared, dict):
        names = [str(k) for k in declared]
        unscoped = package.rsplit("/", 1)[-1]
        return sorted(names, key=lambda n: n != unscoped)
    return []


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def resolve(launcher: Launcher, install_dir: Path) -> str | None:
    """The absolute path of the installed executable, or None when it is not installed."""
    if not launcher.package:
        return None
    if launcher.ecosystem == NPM:
        names = _npm_bin_names(install_dir, launcher.package) or [launcher.executable]
        candidates = [install_dir / "node_modules" / ".bin" / n for n in names]
    else:
        names = [launcher.executable]
        candidates = [install_dir / "venv" / "bin" / launcher.executable]
    for candidate in candidates:
        if _executable(candidate):
            return str(candidate)
    for name in names:
        found = shutil.which(name)
        if found:
            return str(Path(found).absolute())
    return None


def install_hint(launcher: Launcher, install_dir: Path) -> str:
    """How to install the package where `resolve` finds it."""
    package = launcher.package or "<package>"
    if launcher.ecosystem == NPM:
        return f"npm install --prefix {install_dir} {package}"
    return f"python3 -m venv {install_dir}/venv && {install_dir}/venv/bin/pip install {package}"
