"""The paths a task's verifier writes, moves, builds or deletes itself: not the agent's outputs.

Real verifiers copy a helper into the workdir and run it, write a probe file and read it back,
compile the agent's sources into a jar, or clear a stale output before re-running the agent's
program. `output-not-in-instruction` must not ask the instruction to name those files. Read
line by line, like the rule itself: shell redirections and the destinations of cp/mv/install/ln/
tee/mkdir/touch/rm and of `-o`/`-d`/`--output`; in Python open(..., "w"), write_text/bytes,
mkdir, touch, unlink, shutil copies and removals, also through a name bound to the path first
(`OUT = Path("/app/out.txt")` ... `OUT.write_text(...)`), and paths in an exclude/skip list.
Python's string literals are also read as the commands they usually are: a subprocess argument
list (`["gcc", "x.c", "-o", "/app/new.o"]`, over several lines too), a shell string
(`"curl -o /app/page.html ..."`, `"... | tee /app/run.log"`) or keystrokes sent to a terminal,
and an output flag followed by a name bound to a path (`"-o", str(binary)`).
"""

from __future__ import annotations

import io
import posixpath
import re
import shlex
import tokenize
from pathlib import Path

_ABS = r"/[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-*]+)*"
_REDIRECT = re.compile(rf"(?:\d?>>?|&>)\s*[\"']?({_ABS})")
_PREFIXES = {"sudo", "then", "do", "else", "!", "{", "(", "time", "command", "exec"}
_SHELL_WRITERS = {"touch", "rm", "rmdir", "tee", "truncate", "shred"}
_SHELL_LAST_ARG = {"cp", "mv", "install", "ln", "rsync"}
_TESTS = {"[", "[[", "test", "if", "elif", "while", "until"}
_OUTPUT_FLAGS = {"-o", "-d", "--output", "--out", "-O", "--outdir", "--output-dir"}
_PY_ASSIGN = re.compile(
    rf"""^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*(?:\w+\()?\s*[rbuf]*["']({_ABS})["']"""
)
_PY_WRITE_CALL = re.compile(
    r"\.(?:write_text|write_bytes|mkdir|touch|unlink|rmdir|rename|replace|symlink_to)\("
)
_PY_OPEN_WRITE = re.compile(r"""open\(\s*([^,()]+?)\s*,\s*[rbuf]*["'][^"']*[wax+]""")
_PY_FUNCS = re.compile(
    r"(?:shutil\.(?:copy\w*|move|rmtree)|os\.(?:remove|unlink|makedirs|mkdir|rename|replace))"
    r"\(([^()]*)\)"
)
_FILTER_WORDS = re.compile(r"\b(?:exclude[sd]?|ignore[sd]?|skip(?:ped|s)?|--exclude)\b", re.I)
_PATH_IN_TEXT = re.compile(rf"({_ABS})")


def _shell_words(line: str) -> list[list[str]]:
    """The commands of one shell line, split at ; && || | (best effort; never raises)."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = line.split()
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set(";&|"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _shell_written(line: str) -> set[str]:
    out = {m.group(1) for m in _REDIRECT.finditer(line)}
    for words in _shell_words(line):
        while words and (words[0] in _PREFIXES or "=" in words[0]):
            words = words[1:]
        if not words:
            continue
        command = posixpath.basename(words[0])
        args = [w for w in words[1:] if w.startswith("/")]
        if command in _SHELL_WRITERS:
            out.update(args)
        elif command in _SHELL_LAST_ARG and len(words) > 2 and words[-1].startswith("/"):
            target = words[-1]
            out.add(target)
            # into a folder: each source lands there under its own name
            sources = [w for w in words[1:-1] if not w.startswith("-")]
            out.update(posixpath.join(target, posixpath.basename(src)) for src in sources)
            if command == "mv":  # moved out of the agent's reach: the tests put their own there
                out.update(src for src in sources if src.startswith("/"))
        if command in _TESTS:
            continue
        for flag, value in zip(words, words[1:], strict=False):
            if flag in _OUTPUT_FLAGS and value.startswith("/"):
                out.add(value)
    return out


def _python_written(line: str, names: dict[str, str]) -> set[str]:
    out: set[str] = set()

    def resolve(expr: str) -> str | None:
        expr = expr.strip()
        literal = _PATH_IN_TEXT.search(expr)
        if literal and expr.lstrip("rbuf").startswith(("'", '"', "Path(")):
            return literal.group(1)
        head = re.match(r"[A-Za-z_]\w*", expr)
        return names.get(head.group(0)) if head else None

    for match in _PY_OPEN_WRITE.finditer(line):
        if (path := resolve(match.group(1))) is not None:
            out.add(path)
    for match in _PY_FUNCS.finditer(line):
        args = [a for a in match.group(1).split(",") if a.strip()]
        target = args[-1] if args else ""
        if (path := resolve(target)) is not None:
            out.add(path)
    if call := _PY_WRITE_CALL.search(line):
        receiver = line[: call.start()]
        literal = _PATH_IN_TEXT.findall(receiver)
        if literal:
            out.add(literal[-1])
        else:
            head = re.search(r"([A-Za-z_]\w*)\s*(?:\)|\s)*$", receiver)
            if head and head.group(1) in names:
                out.add(names[head.group(1)])
    return out


def _python_literals(text: str) -> list[str]:
    """The string literals of a Python file in order (f-strings too, as written). Never raises:
    a file tokenize cannot read falls back to quoted runs on each line."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [m.group(2) for m in re.finditer(r"""(["'])((?:(?!\1)[^\\\n])*)\1""", text)]
    out: list[str] = []
    for token in tokens:
        if token.type == tokenize.STRING:
            body = token.string.lstrip("rbufRBUF")
            quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
            out.append(body[len(quote) : len(body) - len(quote)])
        elif token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            out.append(token.string)
    return out


def _commands_in_literals(text: str) -> set[str]:
    """What the commands held in a Python file's string literals write: each literal read as a
    shell line, and argument lists read as one command (an output flag, then its path)."""
    literals = _python_literals(text)
    out: set[str] = set()
    for literal in literals:
        for line in literal.splitlines():
            out |= _shell_written(line)
    for flag, value in zip(literals, literals[1:], strict=False):
        if flag in _OUTPUT_FLAGS and value.startswith("/"):
            out.add(value)
    return out


_FLAG_THEN_NAME = re.compile(
    r"""["'](-o|-d|--output|--out|-O|--outdir|--output-dir)["']\s*,\s*(?:str\(\s*)?([A-Za-z_]\w*)"""
)


def _flag_names(text: str, names: dict[str, str]) -> set[str]:
    """An argument list's output flag followed by a name bound to a path
    (`["mpicc", "-o", str(binary), src]` after `binary = Path("/workspace/x")`)."""
    return {names[m.group(2)] for m in _FLAG_THEN_NAME.finditer(text) if m.group(2) in names}


def written_by_verifier(sources: list[tuple[Path, str]]) -> set[str]:
    """Normalised absolute paths the scripts under tests/ write, move, build, delete or filter.
    A folder among them covers what is under it (`cp helper.sh /app/tools/`); `mkdir` alone
    marks nothing: the agent's output folder is often made by the tests too."""
    written: set[str] = set()
    for path, text in sources:
        python = path.suffix == ".py"
        names: dict[str, str] = {}
        if python:
            written |= _commands_in_literals(text)
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if python:
                if assigned := _PY_ASSIGN.match(line):
                    names[assigned.group(1)] = assigned.group(2)
                written |= _python_written(line, names)
            else:
                written |= _shell_written(line)
            if _FILTER_WORDS.search(line):
                written |= set(_PATH_IN_TEXT.findall(line))
        if python:
            written |= _flag_names(text, names)
    return {posixpath.normpath(p.rstrip("/")) for p in written if "*" not in p}


def is_written(path: str, written: set[str], workdir: str = "/") -> bool:
    """`path`, or a folder above it other than the workdir or a top-level folder, is written by
    the verifier (`cp x /app/` writes one file into /app, not every file of it)."""
    path = posixpath.normpath(path)
    workdir = posixpath.normpath(workdir)
    return any(
        path == w or (path.startswith(w + "/") and w != workdir and w.count("/") > 1)
        for w in written
    )
