"""`shell`: run one command line in the workspace, within the risk profile's command policy.

Every command line is lexed the way POSIX `sh` does before anything runs, so the checks see
what the shell would run: each command of a pipeline or sequence, the programs started by
wrappers such as `env`, `xargs` or `find -exec`, and the scripts passed to `sh -c` or `eval`.
Syntax that would hide a command from those checks (command substitution, subshells, control
structures, background jobs, here-documents) is refused outright.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from policies_app.policy import blocked_by_readonly, readonly_refusal
from runs_app.engine.tools import sandbox
from runs_app.engine.tools.base import LocalToolContext, ToolResult
from runs_app.engine.tools.paths import PathDenied, resolve_path, workspace_of

MAX_OUTPUT_BYTES = 64 * 1024
MAX_COMMAND_BYTES = 64 * 1024
DEFAULT_TIMEOUT_SECS = 60
MAX_NESTING = 3
# Each program records the programs before it in its pipeline, so checking is quadratic in the
# length of one pipeline; this many programs per line keeps that well under a millisecond.
MAX_PROGRAMS = 256
# Each redirection target is resolved against the profile's roots (a few syscalls per root).
MAX_REDIRECTIONS = 256
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
SH = "/bin/sh"

TOOL_SPECS: dict[str, dict[str, Any]] = {
    "shell": {
        "name": "shell",
        "description": (
            "Run a shell command in the workspace and return its output (stdout, then stderr "
            "labelled [stderr]). Pipelines and sequences (|, &&, ||, ;) are allowed; every "
            "program must be in the allowed command list. Command substitution, subshells, "
            "control structures and background jobs are not supported."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run with /bin/sh"},
            },
            "required": ["command"],
        },
    },
}

WILDCARD = "*"
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "csh", "tcsh", "fish"})
INTERPRETERS = frozenset({"python", "python2", "python3", "perl", "ruby", "node", "php", "lua"})
DOWNLOADERS = frozenset({"curl", "wget"})
# Devices a redirection may name without writing to hardware.
HARMLESS_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
SYSTEM_DIRS = ("/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/sys", "/proc", "/root")
KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in"}
    | {"function", "select", "coproc", "{", "}", "!", "[[", "]]"}
)

SEPARATORS = frozenset({"|", "|&", "&&", "||", ";", "\n"})
PIPES = frozenset({"|", "|&"})
REDIRECTIONS = frozenset({"<", ">", ">>", ">|", "<>", "<&", ">&", "<<<"})
WRITE_REDIRECTIONS = frozenset({">", ">>", ">|", "<>", ">&"})
READ_REDIRECTIONS = frozenset({"<", "<>", "<&"})
_OPERATORS = sorted(
    ["&&", "||", ";;", ";&", "|&", "<<-", "<<<", "<<", ">>", "<&", ">&", "<>", ">|", "&>>", "&>"]
    + list("|&;<>()"),
    key=len,
    reverse=True,
)
_OPERATOR_CHARS = frozenset("|&;<>()")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SPECIAL_PARAMETERS = frozenset("@*#?$!-0123456789")


class CommandRejected(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------------------------------------
# Lexing: POSIX sh token recognition, just enough to find every command a line would run.


@dataclass(frozen=True)
class _Word:
    text: str  # with quotes and escapes removed
    literal: bool  # False when the shell would still expand it ($, globs, ~, braces)


@dataclass(frozen=True)
class _Op:
    text: str


class _Lexer:
    def __init__(self, command: str) -> None:
        self.src = command
        self.pos = 0
        self.tokens: list[_Word | _Op] = []
        self.chars: list[str] = []
        self.in_word = False
        self.quoted = False
        self.literal = True

    def tokens_of(self) -> list[_Word | _Op]:
        src = self.src
        while self.pos < len(src):
            c = src[self.pos]
            if c in " \t":
                self._end_word()
                self.pos += 1
            elif c == "\n":
                self._end_word()
                self.tokens.append(_Op("\n"))
                self.pos += 1
            elif c == "#" and not self.in_word:
                end = src.find("\n", self.pos)
                self.pos = len(src) if end < 0 else end
            elif c == "\\":
                self._backslash()
            elif c == "'":
                end = src.find("'", self.pos + 1)
                if end < 0:
                    raise CommandRejected("Unterminated quote in command")
                self._add(src[self.pos + 1 : end], quoted=True)
                self.pos = end + 1
            elif c == '"':
                self._double_quoted()
            elif c == "`":
                raise CommandRejected("Command substitution is not allowed")
            elif c == "$":
                self._dollar()
            elif c in _OPERATOR_CHARS:
                self._operator()
            else:
                if c in "*?[{" or (c == "~" and not self.in_word):
                    self.literal = False
                self._add(c)
                self.pos += 1
        self._end_word()
        return self.tokens

    def _add(self, text: str, *, quoted: bool = False) -> None:
        self.chars.append(text)
        self.in_word = True
        self.quoted = self.quoted or quoted

    def _end_word(self) -> None:
        if self.in_word:
            self.tokens.append(_Word("".join(self.chars), self.literal))
        self.chars, self.in_word, self.quoted, self.literal = [], False, False, True

    def _backslash(self) -> None:
        nxt = self.src[self.pos + 1 : self.pos + 2]
        if nxt == "\n":  # line continuation
            self.pos += 2
            return
        self._add(nxt or "\\", quoted=True)
        self.pos += 2

    def _double_quoted(self) -> None:
        src, i = self.src, self.pos + 1
        self._add("", quoted=True)
        while i < len(src):
            c = src[i]
            if c == '"':
                self.pos = i + 1
                return
            if c == "\\" and src[i + 1 : i + 2] in ('"', "\\", "$", "`", "\n"):
                if src[i + 1] != "\n":
                    self._add(src[i + 1])
                i += 2
            elif c == "`":
                raise CommandRejected("Command substitution is not allowed")
            elif c == "$":
                self.pos = i
                self._dollar()
                i = self.pos
            else:
                self._add(c)
                i += 1
        raise CommandRejected("Unterminated quote in command")

    def _dollar(self) -> None:
        src, i = self.src, self.pos
        nxt = src[i + 1 : i + 2]
        if nxt == "(":
            raise CommandRejected("Command substitution is not allowed")
        if nxt == "{":
            end = src.find("}", i + 2)
            inner = src[i + 2 : end] if end >= 0 else ""
            # `${x@P}`, `${x:-...}` and friends can evaluate text the checks never saw.
            if not (_NAME.fullmatch(inner) or (len(inner) == 1 and inner in _SPECIAL_PARAMETERS)):
                raise CommandRejected("Only simple ${NAME} parameter expansions are allowed")
            self._add(src[i : end + 1])
            self.literal = False
            self.pos = end + 1
            return
        match = _NAME.match(src, i + 1)
        if match:
            self._add(src[i : match.end()])
            self.literal = False
            self.pos = match.end()
        elif nxt and nxt in _SPECIAL_PARAMETERS:
            self._add(src[i : i + 2])
            self.literal = False
            self.pos = i + 2
        else:
            self._add("$")
            self.pos = i + 1

    def _operator(self) -> None:
        src, i = self.src, self.pos
        op = next(o for o in _OPERATORS if src.startswith(o, i))
        prefix = ""
        # `2>file`: digits glued to a redirection are a file descriptor, not a word.
        if op[0] in "<>" and self.in_word and not self.quoted and "".join(self.chars).isdigit():
            prefix = "".join(self.chars)
            self.chars, self.in_word = [], False
        self._end_word()
        self.tokens.append(_Op(prefix + op))
        self.pos = i + len(op)


# ---------------------------------------------------------------------------------------------
# Parsing: commands, their redirections, and the programs they start.


@dataclass(frozen=True)
class Invocation:
    """One program a command line would start, as the high-risk patterns see it."""

    name: str  # basename, lower-case
    args: tuple[str, ...]
    upstream: tuple[str, ...] = ()  # programs earlier in the same pipeline
    writes: tuple[str, ...] = ()  # files the command's redirections write


@dataclass
class _Command:
    words: list[_Word] = field(default_factory=list)
    redirections: list[tuple[str, _Word]] = field(default_factory=list)
    pipes_to_next: bool = False


def _commands(tokens: list[_Word | _Op]) -> list[_Command]:
    commands = [_Command()]
    pending: str | None = None
    previous: _Word | _Op | None = None
    for token in tokens:
        current = commands[-1]
        if isinstance(token, _Word):
            if pending is not None:
                current.redirections.append((pending, token))
                pending = None
            else:
                current.words.append(token)
            previous = token
            continue
        op = token.text.lstrip("0123456789")
        if pending is not None:
            raise CommandRejected(f"Redirection '{pending}' needs a target")
        if op == "\n" and isinstance(previous, _Op) and previous.text in PIPES | {"&&", "||"}:
            continue  # a line ending in an operator continues the list
        if op in SEPARATORS:
            current.pipes_to_next = op in PIPES
            commands.append(_Command())
        elif op == "&":
            raise CommandRejected("Background jobs ('&') are not allowed")
        elif op in ("<<", "<<-"):
            raise CommandRejected("Here-documents ('<<') are not supported")
        elif op in ("&>", "&>>"):
            raise CommandRejected(f"Redirection '{op}' is not supported by /bin/sh; use '> file 2>&1'")
        elif op in REDIRECTIONS:
            pending = op
        else:
            raise CommandRejected(f"Shell syntax '{token.text}' is not supported")
        previous = token
    if pending is not None:
        raise CommandRejected(f"Redirection '{pending}' needs a target")
    return [c for c in commands if c.words or c.redirections]


def _strip_assignments(words: list[_Word]) -> list[_Word]:
    """The words from the program on, without the `NAME=value` prefixes."""
    index = 0
    while index < len(words) and _ASSIGNMENT.match(words[index].text):
        index += 1
    return words[index:]


def _options_and_rest(args: list[_Word], with_value: frozenset[str]) -> list[_Word]:
    """The words after a wrapper's own options: the wrapped command line."""
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            return args[i + 1 :]
        if not text.startswith("-") or text == "-":
            return args[i:]
        i += 2 if text in with_value else 1
    return []


def _opts(*names: str) -> frozenset[str]:
    return frozenset(names)


# Programs that run another command line: (options taking a value, positional arguments before it).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (_opts("-u", "--unset", "-C", "--chdir"), 0),
    "timeout": (_opts("-s", "--signal", "-k", "--kill-after"), 1),
    "xargs": (
        _opts("-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--eof")
        | _opts("--max-args", "--max-procs", "--max-chars", "--max-lines"),
        0,
    ),
    "nice": (_opts("-n", "--adjustment"), 0),
    "ionice": (_opts("-c", "-n", "-p", "-P", "-u", "--class", "--classdata"), 0),
    "stdbuf": (_opts("-i", "-o", "-e"), 0),
    "time": (_opts("-f", "-o", "--format", "--output"), 0),
    "exec": (_opts("-a"), 0),
    "sudo": (_opts("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"), 0),
    "doas": (_opts("-u", "-C"), 0),
    "chroot": (_opts(), 1),
    **{name: (_opts(), 0) for name in ("nohup", "setsid", "command", "builtin", "busybox")},
}


def _wrapped(name: str, args: list[_Word]) -> list[_Word]:
    """The command line a wrapper program runs, or [] when `name` is not a wrapper."""
    if name == "find":
        for i, word in enumerate(args):
            if word.text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((j for j in range(i + 1, len(args)) if args[j].text in (";", "+")), len(args))
                return args[i + 1 : end]
        return []
    if name not in _WRAPPERS:
        return []
    value_options, positional = _WRAPPERS[name]
    rest = _strip_assignments(_options_and_rest(args, value_options)[positional:])
    if name == "xargs" and not rest:
        return [_Word("echo", True)]  # what xargs runs when given no command
    return rest


def _embedded_script(name: str, args: list[_Word]) -> _Word | None:
    """The script text of `sh -c '<script>'`, `eval <script>` or `env -S '<script>'`, if any."""
    if name == "eval":
        return _Word(" ".join(a.text for a in args), all(a.literal for a in args)) if args else None
    if name in SHELLS:
        for i, word in enumerate(args):
            text = word.text
            if text.startswith("-") and not text.startswith("--") and "c" in text[1:]:
                return next((w for w in args[i + 1 :] if not w.text.startswith("-")), None)
    if name == "env":
        for i, word in enumerate(args):
            if word.text in ("-S", "--split-string") and i + 1 < len(args):
                return args[i + 1]
            if word.text.startswith("--split-string="):
                return _Word(word.text.split("=", 1)[1], word.literal)
    return None


# ---------------------------------------------------------------------------------------------
# High-risk patterns (SPEC §2.2 block_high_risk_commands). docs/tools.md lists the same table.


@dataclass(frozen=True)
class HighRiskPattern:
    name: str
    description: str
    matches: Callable[[Invocation], bool] | None = None
    text: Callable[[str], bool] | None = None  # checked on the raw command line, in linear time


_WORD_CHARS = re.compile(r"[^\s(){}|;&<>]+")
_FUNCTION_HEAD = re.compile(r"\(\s*\)\s*\{")
_PIPE = re.compile(r"\|")


def _word_before(text: str, end: int) -> str:
    """The word of `_WORD_CHARS` that ends at `end`, after skipping blanks backwards."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    j = i
    while j > 0 and not (text[j - 1].isspace() or text[j - 1] in "(){}|;&<>"):
        j -= 1
    return text[j:i]


def _defines_self_piping_function(text: str) -> bool:
    """`name() { ... name | name ...}`, found in one pass: every step only looks at the blanks and
    the word next to a `(`, `|` or `}`, so the time is linear in the length of the line (a regular
    expression with a back-reference took minutes on one long word)."""
    events: list[tuple[int, str, str]] = []
    for head in _FUNCTION_HEAD.finditer(text):
        events.append((head.end(), "head", _word_before(text, head.start())))
    for pipe in _PIPE.finditer(text):
        start = pipe.end()
        while start < len(text) and text[start].isspace():
            start += 1
        after = _WORD_CHARS.match(text, start)
        before = _word_before(text, pipe.start())
        if before and after and after.group() == before:
            events.append((pipe.start(), "pipe", before))
    events += [(i, "close", "") for i, c in enumerate(text) if c == "}"]
    open_functions: set[str] = set()
    for _, kind, name in sorted(events):
        if kind == "head" and name:
            open_functions.add(name)
        elif kind == "close":
            open_functions.clear()
        elif kind == "pipe" and name in open_functions:
            return True
    return False


def _short_options(args: tuple[str, ...]) -> Iterator[str]:
    for arg in args:
        if arg == "--":
            return
        if arg.startswith("-") and len(arg) > 1:
            yield arg


def _recursive_rm(inv: Invocation) -> bool:
    return inv.name == "rm" and any(
        o == "--recursive" or (not o.startswith("--") and ("r" in o or "R" in o))
        for o in _short_options(inv.args)
    )


def _grants_world_write(mode: str) -> bool:
    if re.fullmatch(r"[0-7]{3,4}", mode):
        return int(mode[-1]) & 2 != 0
    for clause in mode.split(","):
        match = re.fullmatch(r"([ugoa]*)([-+=])([rwxXst]*)", clause)
        if match and match[2] in "+=" and "w" in match[3] and ("o" in match[1] or "a" in match[1]):
            return True
    return False


def _under(path: str, roots: tuple[str, ...]) -> bool:
    path = os.path.normpath(path)
    return any(path == root or path.startswith(root + "/") for root in roots)


def _written_files(inv: Invocation) -> tuple[str, ...]:
    targets = inv.writes
    if inv.name == "tee":
        targets += tuple(a for a in inv.args if not a.startswith("-"))
    return targets


def _writes_device(inv: Invocation) -> bool:
    return any(
        _under(t, ("/dev",)) and os.path.normpath(t) not in HARMLESS_DEVICES and not _under(t, ("/dev/fd",))
        for t in _written_files(inv)
    )


def _power_state(inv: Invocation) -> bool:
    if inv.name in ("shutdown", "reboot", "halt", "poweroff"):
        return True
    if inv.name in ("init", "telinit"):
        return inv.args[:1] in (("0",), ("6",))
    return inv.name == "systemctl" and any(a in ("poweroff", "reboot", "halt", "kexec") for a in inv.args)


HIGH_RISK_PATTERNS: tuple[HighRiskPattern, ...] = (
    HighRiskPattern(
        "recursive-delete",
        "`rm` with `-r`, `-R` or `--recursive` (including `rm -rf`)",
        _recursive_rm,
    ),
    HighRiskPattern("find-delete", "`find ... -delete`", lambda i: i.name == "find" and "-delete" in i.args),
    HighRiskPattern(
        "privilege-escalation",
        "`sudo`, `su`, `doas`, `pkexec`, `runuser`",
        lambda i: i.name in ("sudo", "su", "doas", "pkexec", "runuser"),
    ),
    HighRiskPattern(
        "pipe-into-shell",
        "piping into a shell: `... | sh`, `... | bash` (also zsh, dash, ksh, mksh, ash, csh, tcsh, fish), "
        "which covers `curl ... | sh` and `wget ... | sh`",
        lambda i: bool(i.upstream) and i.name in SHELLS,
    ),
    HighRiskPattern(
        "download-and-execute",
        "`curl` or `wget` piped into an interpreter: python, python2, python3, perl, ruby, node, php, lua",
        lambda i: i.name in INTERPRETERS and any(u in DOWNLOADERS for u in i.upstream),
    ),
    HighRiskPattern(
        "filesystem-format",
        "`mkfs`, `mkfs.*`, `mke2fs`, `mkswap`, `wipefs`, `fdisk`, `sfdisk`, `parted`",
        lambda i: (
            i.name.startswith("mkfs") or i.name in ("mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "parted")
        ),
    ),
    HighRiskPattern("raw-copy", "`dd` (any use)", lambda i: i.name == "dd"),
    HighRiskPattern(
        "world-writable",
        "`chmod` granting write to others: octal modes like `777`, `666`, `0777`, or `o+w`, `a+w`, `a=rwx`",
        lambda i: i.name == "chmod" and any(_grants_world_write(a) for a in i.args),
    ),
    HighRiskPattern("ownership-change", "`chown`, `chgrp`", lambda i: i.name in ("chown", "chgrp")),
    HighRiskPattern(
        "power-state",
        "`shutdown`, `reboot`, `halt`, `poweroff`, `init 0`/`init 6`, `telinit 0`/`6`, "
        "`systemctl poweroff|reboot|halt|kexec`",
        _power_state,
    ),
    HighRiskPattern(
        "fork-bomb",
        "a function that pipes into itself, such as `:(){ :|:& };:`",
        text=_defines_self_piping_function,
    ),
    HighRiskPattern(
        "device-write",
        "redirecting output or `tee` into `/dev/...`, except `/dev/null`, `/dev/stdout`, `/dev/stderr`, "
        "`/dev/tty` and `/dev/fd/*`",
        _writes_device,
    ),
    HighRiskPattern(
        "system-file-write",
        "redirecting output or `tee` into " + ", ".join(f"`{d}`" for d in SYSTEM_DIRS),
        lambda i: any(_under(t, SYSTEM_DIRS) for t in _written_files(i)),
    ),
    HighRiskPattern(
        "remote-shell",
        "`nc`, `ncat`, `netcat` with `-e`, `-c`, `--exec`, `--sh-exec` or `--lua-exec`",
        lambda i: (
            i.name in ("nc", "ncat", "netcat")
            and any(a in ("-e", "-c", "--exec", "--sh-exec", "--lua-exec") for a in i.args)
        ),
    ),
)


# ---------------------------------------------------------------------------------------------
# The checks.


@dataclass
class _Plan:
    command: str  # the line as the model sent it, for messages
    invocations: list[tuple[str, Invocation]] = field(default_factory=list)  # (word as typed, invocation)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    argv: list[str] | None = None  # set when the line is one plain command that needs no shell
    changes_directory: bool = False

    def high_risk(self) -> CommandRejected:
        return CommandRejected(f"High-risk command blocked by policy: {self.command}")


def _analyse(script: str, ctx: LocalToolContext, plan: _Plan, depth: int = 0) -> None:
    if depth > MAX_NESTING:
        raise CommandRejected("Command nesting is too deep")
    if ctx.risk.block_high_risk_commands:
        # Before lexing: a fork bomb is also refused as shell syntax, but it deserves this message.
        if any(p.text is not None and p.text(script) for p in HIGH_RISK_PATTERNS):
            raise plan.high_risk()
    commands = _commands(_Lexer(script).tokens_of())
    pipeline: tuple[str, ...] = ()
    for cmd in commands:
        if len(plan.invocations) >= MAX_PROGRAMS:
            raise CommandRejected(f"Command line runs more than {MAX_PROGRAMS} programs")
        writes: list[str] = []
        for op, target in cmd.redirections:
            base = op.lstrip("0123456789")
            if base == "<<<" or (base in ("<&", ">&") and (target.text.isdigit() or target.text == "-")):
                continue
            if not target.literal:
                raise CommandRejected(f"Redirection target must be a literal path: '{target.text}'")
            # Relative targets are checked against the workspace, which is only right before any `cd`.
            if plan.changes_directory and not target.text.startswith("/"):
                raise CommandRejected(
                    f"Redirection target after 'cd' must be an absolute path: '{target.text}'"
                )
            if base in WRITE_REDIRECTIONS:
                writes.append(target.text)
            if base in READ_REDIRECTIONS:
                plan.reads.append(target.text)
        plan.writes += writes
        if len(plan.reads) + len(plan.writes) > MAX_REDIRECTIONS:
            raise CommandRejected(f"Command line has more than {MAX_REDIRECTIONS} redirections")
        words = _strip_assignments(cmd.words)
        before = len(plan.invocations)
        if words:
            _add_invocations(words, pipeline, tuple(writes), ctx, plan, depth)
        elif writes:
            plan.invocations.append(("", Invocation("", (), pipeline, tuple(writes))))
        added = tuple(inv.name for _, inv in plan.invocations[before:] if inv.name)
        pipeline = pipeline + added if cmd.pipes_to_next else ()
    if depth == 0 and len(commands) == 1:
        only = commands[0]
        plain = only.words and not only.redirections and not _ASSIGNMENT.match(only.words[0].text)
        if plain and all(w.literal for w in only.words):
            plan.argv = [w.text for w in only.words]


def _add_invocations(
    words: list[_Word],
    upstream: tuple[str, ...],
    writes: tuple[str, ...],
    ctx: LocalToolContext,
    plan: _Plan,
    depth: int,
) -> None:
    """Record the program `words` start, then whatever it wraps (`env rm ...`), and so on."""
    for _ in range(MAX_NESTING + 1):
        word, args = words[0], words[1:]
        if word.text in KEYWORDS:
            raise CommandRejected(f"Shell control syntax is not supported: '{word.text}'")
        if not word.literal:
            raise CommandRejected(f"Command name must be a literal word: '{word.text}'")
        name = os.path.basename(word.text).lower()
        plan.changes_directory = plan.changes_directory or name in ("cd", "pushd", "popd")
        plan.invocations.append((word.text, Invocation(name, tuple(a.text for a in args), upstream, writes)))
        script = _embedded_script(name, args)
        if script is not None:
            if not script.literal:
                raise CommandRejected(f"The script run by '{name}' must be literal text")
            _analyse(script.text, ctx, plan, depth + 1)
        words = _wrapped(name, args)
        if not words:
            return
        writes = ()
    raise CommandRejected("Command nesting is too deep")


def _is_allowed(word: str, name: str, allowed: tuple[str, ...]) -> bool:
    for entry in (e.strip() for e in allowed):
        if entry == WILDCARD:
            return True
        # Entries naming a path must match the command word exactly; plain names match the basename.
        if ("/" in entry and entry == word) or entry.lower() == name:
            return True
    return False


def check_command(ctx: LocalToolContext, command: str) -> list[str] | None:
    """Raise CommandRejected when the policy refuses `command`.

    Returns the argv to run directly when the line needs no shell, else None.
    """
    plan = _Plan(command)
    _analyse(command, ctx, plan)
    if ctx.risk.block_high_risk_commands:
        for _, inv in plan.invocations:
            if any(p.matches is not None and p.matches(inv) for p in HIGH_RISK_PATTERNS):
                raise plan.high_risk()
    for word, inv in plan.invocations:
        if word and not _is_allowed(word, inv.name, ctx.risk.allowed_commands):
            raise CommandRejected(f"Command '{os.path.basename(word)}' is not in allowed_commands")
    for targets, for_write in ((plan.reads, False), (plan.writes, True)):
        for target in dict.fromkeys(targets):
            if os.path.normpath(target) in HARMLESS_DEVICES or _under(target, ("/dev/fd",)):
                continue
            try:
                resolve_path(ctx, target, for_write=for_write)
            except PathDenied as exc:
                raise CommandRejected(exc.message) from None
    return plan.argv


# ---------------------------------------------------------------------------------------------
# Running.


class _Capture(threading.Thread):
    """Drains one pipe, keeping only the first MAX_OUTPUT_BYTES so a flood cannot exhaust memory."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.data = bytearray()
        self.total = 0

    def run(self) -> None:
        while chunk := os.read(self.stream.fileno(), 65536):
            self.total += len(chunk)
            room = MAX_OUTPUT_BYTES - len(self.data)
            if room > 0:
                self.data += chunk[:room]


def _environment(ctx: LocalToolContext, workspace: str) -> dict[str, str]:
    """PATH, HOME, LANG and the profile's passthrough names: nothing else of `ctx.env` (the
    server's environment, provider keys included) reaches the command."""
    env = {"PATH": DEFAULT_PATH, "HOME": workspace, "LANG": ctx.env.get("LANG") or "C.UTF-8"}
    for name in ctx.risk.shell_env_passthrough:
        if _NAME.fullmatch(name) and name in ctx.env:
            env[name] = ctx.env[name]
    return env


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _output(out: _Capture, err: _Capture) -> str:
    data = bytes(out.data)
    if err.data:
        if data and not data.endswith(b"\n"):
            data += b"\n"
        data += b"[stderr]\n" + bytes(err.data)
    total = out.total + err.total
    if len(data) > MAX_OUTPUT_BYTES or total > len(out.data) + len(err.data):
        text = data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")
        return text + f"\n[output truncated to {MAX_OUTPUT_BYTES} bytes of {total}]"
    return data.decode("utf-8", errors="replace")


def sandbox_refusal(ctx: LocalToolContext) -> str | None:
    """Why `shell` must not run for this profile on this host, or None (SPEC §7: no sandbox, no shell)."""
    if not ctx.risk.sandbox_enabled:
        return None
    state = sandbox.status()
    if state.available:
        return None
    return (
        f"Shell sandbox unavailable: {state.detail}. shell does not run without it; "
        "a risk profile may set sandbox_enabled = false to run commands unsandboxed"
    )


def run_command(ctx: LocalToolContext, command: str, argv: list[str] | None) -> ToolResult:
    workspace = workspace_of(ctx)
    timeout = ctx.runtime.shell_timeout_secs if ctx.runtime.shell_timeout_secs > 0 else DEFAULT_TIMEOUT_SECS
    env = _environment(ctx, str(workspace))
    # Builtins such as `cd` or `export` have no executable: those lines go through sh too.
    if argv and "/" not in argv[0] and shutil.which(argv[0], path=env["PATH"]) is None:
        argv = None
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return ToolResult.fail(f"Cannot run command: {exc.strerror or exc}")
    program = argv or [SH, "-c", command]
    if not ctx.risk.sandbox_enabled:
        return _run(program, workspace, env, timeout)
    with sandbox.staged_write_only_roots(ctx.risk, workspace) as staged:
        full = sandbox.command_argv(ctx.risk, ctx.runtime, workspace, program, staged=staged)
        with sandbox.process_cgroup(ctx.runtime) as procs:
            return _run(
                full if procs is None else sandbox.enter_cgroup_argv(procs, full), workspace, env, timeout
            )


def _run(program: list[str], workspace: Path, env: dict[str, str], timeout: int) -> ToolResult:
    try:
        proc = subprocess.Popen(
            program,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills every descendant
        )
    except FileNotFoundError:
        return ToolResult.fail(f"Command not found: {program[0]}")
    except OSError as exc:
        return ToolResult.fail(f"Cannot run command: {exc.strerror or exc}")
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(proc.stdout), _Capture(proc.stderr)
    out.start()
    err.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    # Also after a normal exit: nothing the command left behind outlives the tool call. In the
    # sandbox, bwrap dies with its group and the kernel then ends its whole PID namespace.
    _kill_group(proc.pid)
    proc.wait()
    for capture in (out, err):
        capture.join(timeout=5)
        # A reader still blocked (a daemon that left the group holds the pipe) keeps its fd open,
        # so that a reused descriptor number is never read by mistake.
        if not capture.is_alive():
            capture.stream.close()
    output = _output(out, err)
    if timed_out:
        return ToolResult.fail(f"Command timed out after {timeout}s", output)
    if proc.returncode < 0:
        return ToolResult.fail(f"Command terminated by signal {-proc.returncode}", output)
    if proc.returncode != 0:
        return ToolResult.fail(f"Command exited with status {proc.returncode}", output)
    return ToolResult.ok(output)


def shell(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    if blocked_by_readonly(ctx.risk, "shell"):
        return ToolResult.fail(readonly_refusal("shell"))
    command = args.get("command")
    if command is None or (isinstance(command, str) and not command.strip()):
        return ToolResult.fail("Missing 'command' parameter")
    if not isinstance(command, str):
        return ToolResult.fail("'command' must be a string")
    size = len(command.encode("utf-8", "replace"))
    if size > MAX_COMMAND_BYTES:
        return ToolResult.fail(f"Command is too long ({size} bytes); the limit is {MAX_COMMAND_BYTES} bytes")
    try:
        argv = check_command(ctx, command)
    except CommandRejected as exc:
        return ToolResult.fail(exc.message)
    refusal = sandbox_refusal(ctx)
    if refusal is not None:
        return ToolResult.fail(refusal)
    return run_command(ctx, command, argv)
