"""ADD/COPY sources as the builder will read them: variables expanded, or refused.

The builder fetches an ADD URL itself, in the host's network (its loopback and internal
services), whatever network the build's RUN steps are given; `ARG SRC=http://...` + `ADD ${SRC}`
hides the URL from a reader of the literal text. So a source is judged after expansion, with
the values this Dockerfile gives its variables (ARG defaults, ENV), and a source whose value
we cannot know for certain is refused rather than guessed.

Invariant: a source we call resolved expands to the same text in the builder (buildah 1.28,
docker), or we refuse it. Hence the strict corners:
- ENV wins over ARG whatever their order, and the base image's ENV wins over an ARG (measured on
  buildah 1.28): a name the base image sets (`inherited`; None: not known) is refused unless this
  stage's own ENV sets it;
- a name with no value in this Dockerfile (undeclared, `ARG X` with no default and no global
  default, the builder's predefined proxy and platform names, which build flags may set) is
  refused, also inside `${X:-word}`;
- only `$X`, `${X}`, `${X:-word}` and `${X:+word}` are read; quotes, backslashes or other forms
  next to a `$` are refused, and so is a value that expands to more than one word;
- an ARG/ENV line that assigns a name and uses it in the same line, or cannot be split into
  words, makes the names it touches unknown.

Remote sources (any `scheme://` or `git@`) are never built, even for a task granted the
internet: the builder's own fetch does not go through that network. A RUN step does.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel

from .dockerfile import Dockerfile, DockerfileError, Hazard, copy_args

#: Names the builder may give a value from its own flags or environment, whatever the Dockerfile
#: says: never trusted in a source.
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY")
PREDEFINED = frozenset(
    {
        *_PROXIES,
        *(name.lower() for name in _PROXIES),
        *(f"{w}{p}" for w in ("TARGET", "BUILD") for p in ("PLATFORM", "OS", "ARCH", "VARIANT")),
        "SOURCE_DATE_EPOCH",
    }
)

REMOTE_ADVICE = (
    "the builder fetches a remote source itself, on the host's network (its loopback and "
    "internal services included), outside the build's own network, so it is never allowed, "
    "not even for a task granted the internet. Put the file in environment/ and COPY it, or "
    "download it in a RUN step (e.g. RUN curl -fsSLo /dest URL): RUN steps use the build's "
    "network, none unless the task declares allow_internet and the gate runs with "
    "--allow-internet"
)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# One variable reference: $NAME, ${NAME}, ${NAME:-word}, ${NAME:+word} (word without $ or }).
_REFERENCE = re.compile(rf"\$(?:({_NAME})|\{{({_NAME})(?:(:[-+])([^${{}}]*))?\}})")
_REMOTE = re.compile(r"://|^git@", re.IGNORECASE)


class CopySource(BaseModel):
    """One source of a COPY/ADD: as written, and as the builder will read it (None: unknown)."""

    instruction: Literal["COPY", "ADD"]
    line: int
    written: str
    resolved: str | None
    why: str = ""  # why `resolved` is None

    @property
    def remote(self) -> bool:
        return bool(_REMOTE.search(self.written) or _REMOTE.search(self.resolved or ""))

    def shown(self) -> str:
        """The source as written, with its value when that differs."""
        if self.resolved is not None and self.resolved != self.written:
            return f"{self.written} (= {self.resolved})"
        return self.written


# A name's value in scope: a string, or None when it cannot be known (the reason alongside).
_Value = tuple[str | None, str]


class _Scope:
    """The variables of one stage: ARG and ENV kept apart, since ENV wins over ARG."""

    def __init__(self, inherited: frozenset[str] | None) -> None:
        self.args: dict[str, _Value] = {}
        self.envs: dict[str, _Value] = {}
        self.inherited = inherited
        self.unread = False  # an ARG/ENV line could not be read: its names are unknown

    def lookup(self, name: str) -> _Value:
        if name in self.envs:  # this stage's ENV wins over the base image's and over ARG
            return self.envs[name]
        if self.unread:
            return None, f"${name} may be set by an ARG/ENV line this reader cannot split"
        if name in PREDEFINED:
            return None, f"${name} may be set by the builder's own flags"
        if name not in self.args:
            return None, f"${name} has no value in this Dockerfile"
        if self.inherited is None or name in self.inherited:
            return None, f"${name}: the base image may set it, and its ENV wins over ARG"
        return self.args[name]

    def expand(self, word: str) -> _Value:
        """`word` with its variables replaced, or (None, why)."""
        if "$" not in word:
            return word, ""
        if re.search(r"['\"\\`]", word):
            return None, "quotes or backslashes next to a variable"
        out: list[str] = []
        at = 0
        for match in _REFERENCE.finditer(word):
            literal = word[at : match.start()]
            if "$" in literal:
                break
            name = match[1] or match[2]
            value, why = self.lookup(name)
            if value is None:
                return None, why
            if match[3] == ":-":
                value = value or match[4]
            elif match[3] == ":+":
                value = match[4] if value else ""
            out += [literal, value]
            at = match.end()
        rest = word[at:]
        if "$" in rest:
            return None, f"`{word}` uses a form of variable this reader does not expand"
        return "".join([*out, rest]), ""


def _pairs(name: str, value: str) -> list[tuple[str, str | None]] | None:
    """(name, raw value or None for no default) of an ARG/ENV line; None: cannot be split."""
    words = _words(value)
    if words is None:
        return None
    if name == "ENV" and words and "=" not in words[0]:  # legacy `ENV NAME value with spaces`
        return [(words[0], value.strip()[len(words[0]) :].strip())]
    pairs: list[tuple[str, str | None]] = []
    for word in words:
        key, eq, raw = word.partition("=")
        if not re.fullmatch(_NAME, key):
            return None
        pairs.append((key, raw if eq else None))
    return pairs


def _words(line: str) -> list[str] | None:
    """The words of an ARG/ENV line split at unquoted blanks, quotes kept; None when a quote is
    left open. One pass: the line is hostile and may be long."""
    words: list[str] = []
    word: list[str] = []
    quote = ""
    chars = iter(line)
    for ch in chars:
        if quote:
            word.append(ch)
            if ch == "\\" and quote == '"':
                word.append(next(chars, ""))
            elif ch == quote:
                quote = ""
        elif ch.isspace():
            if word:
                words.append("".join(word))
                word = []
        else:
            word.append(ch)
            if ch in "'\"":
                quote = ch
            elif ch == "\\":
                word.append(next(chars, ""))
    if quote:
        return None
    if word:
        words.append("".join(word))
    return words


def _value(raw: str, scope: _Scope) -> _Value:
    """An ARG default or ENV value: quotes removed, variables expanded with `scope`."""
    if "$" in raw and re.search(r"['\\`]", raw):
        return None, "a value with quotes or backslashes next to a variable"
    try:
        words = shlex.split(raw)
    except ValueError:
        return None, "a value that cannot be split into words"
    if len(words) != 1:
        return ("", "") if not words else (None, "a value of several words")
    return scope.expand(words[0])


def _assign(kind: str, value: str, scope: _Scope, outer: _Scope | None) -> None:
    """One ARG/ENV line into `scope`; `outer`: the global ARGs a bare `ARG NAME` takes."""
    pairs = _pairs(kind, value)
    if pairs is None:
        scope.unread = True
        return
    names = {key for key, _ in pairs}
    computed: dict[str, _Value] = {}
    for key, raw in pairs:
        if raw is None:  # `ARG NAME`: the global default, if any
            computed[key] = outer.lookup(key) if outer else (None, f"${key} has no default")
        elif any(m[1] in names or m[2] in names for m in _REFERENCE.finditer(raw)):
            computed[key] = (None, f"${key} is set from a name assigned in the same line")
        else:
            computed[key] = _value(raw, scope)
    (scope.envs if kind == "ENV" else scope.args).update(computed)


def copy_sources(
    dockerfile: Dockerfile, inherited: frozenset[str] | None = frozenset()
) -> list[CopySource]:
    """Every COPY/ADD source, resolved in its stage's scope. `inherited`: the names the base
    images' ENV sets (None: not known, so no ARG-only name resolves); lint, which asks no
    engine, passes none and the build checks again with the engine's answer."""
    outer = _Scope(frozenset())  # the ARGs before the first FROM
    scope: _Scope | None = None
    found: list[CopySource] = []
    for ins in dockerfile.instructions:
        if ins.name == "FROM":
            scope = _Scope(inherited)
        elif ins.name == "ARG" and scope is None:
            _assign("ARG", ins.value, outer, None)
        elif ins.name in ("ARG", "ENV") and scope is not None:
            _assign(ins.name, ins.value, scope, outer)
        elif ins.name in ("COPY", "ADD"):
            found += _sources_of(ins.name, ins.line, ins.value, scope or _Scope(None))
    return found


def _sources_of(name: str, line: int, value: str, scope: _Scope) -> Iterator[CopySource]:
    _flags, words = copy_args(value)
    kind: Literal["COPY", "ADD"] = "ADD" if name == "ADD" else "COPY"
    for word in words:
        resolved, why = scope.expand(word)
        if resolved is not None and (not resolved or re.search(r"\s", resolved)):
            resolved, why = None, f"`{word}` expands to {json.dumps(resolved)}, not one path"
        yield CopySource(instruction=kind, line=line, written=word, resolved=resolved, why=why)


def source_hazards(text: str, inherited: frozenset[str] | None = frozenset()) -> list[Hazard]:
    """The ADD/COPY sources a build must refuse: remote ones, and ones that cannot be resolved."""
    try:
        sources = copy_sources(Dockerfile.parse(text), inherited)
    except DockerfileError as exc:
        return [Hazard(rule="dockerfile-parse", line=1, message=str(exc))]
    found = []
    for source in sources:
        if source.remote:
            message = f"{source.instruction} {source.shown()}: {REMOTE_ADVICE}"
            found.append(Hazard(rule="dockerfile-remote-add", line=source.line, message=message))
        elif source.resolved is None:
            found.append(
                Hazard(
                    rule="dockerfile-unresolved-source",
                    line=source.line,
                    message=unresolved_message(source),
                )
            )
    return found


def unresolved_message(source: CopySource) -> str:
    return (
        f"{source.instruction} {source.written}: the source cannot be resolved ({source.why}); "
        "the builder would decide what it names. Write the path of a file of environment/, or "
        "set the variable with an ARG default or ENV in this stage"
    )
