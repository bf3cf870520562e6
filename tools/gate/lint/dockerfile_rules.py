"""Lint rules for the task's Dockerfile: the instruction subset our sandboxes build, mapped base
images, COPY sources inside the build context, tests/ and solution/ kept out of the image.
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
from pathlib import Path, PurePosixPath

from ...sandbox.bases import SEED_BASE_TAGS
from ...tasks.dockerfile import (
    Dockerfile,
    DockerfileError,
    Instruction,
    build_hazards,
    copy_args,
)
from ...tasks.dockerfile_sources import (
    REMOTE_ADVICE,
    CopySource,
    copy_sources,
    unresolved_message,
)
from .model import LintContext, TaskView

#: The Dockerfile instructions a task may use (a small, reviewable subset of what engines build).
SUPPORTED_DOCKERFILE_INSTRUCTIONS = frozenset(
    {"FROM", "RUN", "COPY", "ADD", "WORKDIR", "ENV", "ARG", "USER"}
)
#: The base images the offline engine holds (`make bases` tags the project's Debian base as
#: each); any other FROM image needs a registry, or an import by hand.
OFFLINE_BASES = frozenset(SEED_BASE_TAGS)


def _offline(image: str) -> bool:
    return re.sub(r"^(?:docker\.io/)?(?:library/)?", "", image) in OFFLINE_BASES


_UNSUPPORTED_ADVICE = {
    "CMD": "Remove it: Harbor starts the container and runs every command itself.",
    "ENTRYPOINT": "Remove it: Harbor starts the container and runs every command itself.",
    "EXPOSE": "Remove it: trials run without network, nothing needs a published port.",
    "HEALTHCHECK": "Remove it and set [environment].healthcheck in task.toml instead.",
    "LABEL": "Remove it; task metadata belongs in task.toml [metadata].",
    "MAINTAINER": "Remove it; the author belongs in task.toml [metadata].",
    "SHELL": "Remove it and call the shell explicitly in RUN (e.g. RUN bash -c '...').",
    "VOLUME": "Remove it; the sandbox keeps the whole filesystem of the trial.",
}


def _covered(source: str, files: list[str]) -> list[str]:
    """Files of the build context (relative posix paths) that a COPY source brings in."""
    norm = posixpath.normpath(source.lstrip("/")) if source not in ("", "/") else "."
    if norm == ".":
        return list(files)
    if any(ch in norm for ch in "*?["):
        return [f for f in files if fnmatch.fnmatch(f, norm) or fnmatch.fnmatch(f, f"{norm}/*")]
    return [f for f in files if f == norm or f.startswith(norm + "/")]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


_TEST_SCRIPT = re.compile(r"test\.sh|test_.*\.py|.*_test\.py|conftest\.py")
# Named like a grader, outside environment/tests/: rejected by name alone before (issue 41).
_VISIBLE_TEST = re.compile(r"test\.sh|test_.*\.py")
_GRADER_NAME = re.compile(
    r"test\.sh|test_.*\.py|.*_test\.py|conftest\.py|(expected|answer|golden).*", re.IGNORECASE
)


def _hidden_files(task: TaskView) -> dict[str, tuple[str, bool]]:
    """sha256 -> ('tests/x', is_answer) for the files of tests/ and solution/.

    is_answer: solution files and graders (test.sh, test_*.py, expected*...). Other tests/ files
    may legitimately be shared with environment/ (e.g. a data generator both sides run).
    """
    out: dict[str, tuple[str, bool]] = {}
    for folder in (task.solution_dir, task.tests_dir):
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            if path.stat().st_size:  # empty files (e.g. __init__.py) leak nothing
                answer = folder == task.solution_dir or bool(_GRADER_NAME.fullmatch(path.name))
                out.setdefault(file_digest(path), (path.relative_to(task.root).as_posix(), answer))
    return out


#: A test-named file of environment/ is a near copy of a grader or the solution when this share
#: of its lines (stripped, longer than a bracket or a keyword) appears in one of them.
NEAR_COPY_SHARE = 0.5
_NEAR_COPY_BYTES = 512 * 1024


def _lines(path: Path) -> set[str]:
    try:
        if path.stat().st_size > _NEAR_COPY_BYTES:
            return set()
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    return {s for line in text.splitlines() if len(s := line.strip()) > 12}


def near_copy(task: TaskView, path: Path) -> str | None:
    """The tests/ or solution/ file (task-relative) that holds most of `path`'s lines: an edited
    copy of a grader leaks as much as the grader itself."""
    own = _lines(path)
    if not own:
        return None
    for folder in (task.tests_dir, task.solution_dir):
        if folder is None or not folder.is_dir():
            continue
        for other in sorted(p for p in folder.rglob("*") if p.is_file()):
            if len(own & _lines(other)) >= NEAR_COPY_SHARE * len(own):
                return other.relative_to(task.root).as_posix()
    return None


def shared_inputs(task: TaskView) -> set[Path]:
    """tests/ files byte-identical to a file of environment/: inputs, not checks."""
    if not task.environment_dir.is_dir() or not task.tests_dir.is_dir():
        return set()
    shipped = {file_digest(p) for p in task.environment_dir.rglob("*") if p.is_file()}
    return {p for p in task.tests_dir.rglob("*") if p.is_file() and file_digest(p) in shipped}


def check_dockerfile(ctx: LintContext, task: TaskView) -> None:
    if task.dockerfile is None:
        return
    dockerfile = task.dockerfile
    try:
        parsed = Dockerfile.read(dockerfile)
    except DockerfileError as exc:
        ctx.add("dockerfile-parse", "error", dockerfile, str(exc))
        return

    def error(rule: str, message: str, line: int | None = None) -> None:
        ctx.add(rule, "error", dockerfile, message, line)

    # Read from the raw text, not through our parser: what the builder may read differently
    # (parser directives, flags hidden by a continuation) is refused here and again at build.
    for hazard in build_hazards(dockerfile.read_text(encoding="utf-8")):
        if hazard.rule != "dockerfile-heredoc":  # the reader's own heredoc rule names them below
            error(hazard.rule, hazard.message, hazard.line)

    context = task.environment_dir
    context_files = sorted(
        p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file()
    )
    hidden = _hidden_files(task)
    # Sources as the builder reads them: ARG/ENV expanded (the build checks again, knowing the
    # base image's ENV too).
    sources_at: dict[int, list[CopySource]] = {}
    for found in copy_sources(parsed):
        sources_at.setdefault(found.line, []).append(found)
    froms = 0
    for ins in parsed.instructions:
        at = f"{ins.name} {ins.value}".strip()
        if ins.name == "CMD":  # Harbor starts the container with its own command
            ctx.add(
                "dockerfile-cmd-ignored",
                "warning",
                dockerfile,
                "CMD is ignored: Harbor starts the container with its own command and runs "
                "every step itself; remove it if the task relies on it running",
                ins.line,
            )
            continue
        if ins.name not in SUPPORTED_DOCKERFILE_INSTRUCTIONS:
            error(
                "dockerfile-unsupported-instruction",
                f"{ins.name} is not supported; the sandbox builds only "
                f"{', '.join(sorted(SUPPORTED_DOCKERFILE_INSTRUCTIONS))}. "
                + _UNSUPPORTED_ADVICE.get(ins.name, "Remove it."),
                ins.line,
            )
            continue
        if froms == 0 and ins.name not in ("FROM", "ARG"):
            error("dockerfile-no-from", f"{ins.name} comes before FROM; start with FROM", ins.line)
        if ins.heredoc:
            error(
                "dockerfile-heredoc",
                f"{ins.name} uses a heredoc (<<), which the sandbox builder does not parse; put "
                "the script in a file of environment/, COPY it and RUN it, or use printf",
                ins.line,
            )
        if ins.name == "FROM":
            froms += 1
            words = ins.value.split()
            image = next((a for a in words if not a.startswith("--")), "")
            if froms > 1:
                error(
                    "dockerfile-multi-stage",
                    "multi-stage builds are not supported; use a single FROM",
                    ins.line,
                )
            elif any(w.startswith("--") for w in words):
                error(
                    "dockerfile-flags",
                    f"`{at}`: FROM flags such as --platform are not supported; remove them",
                    ins.line,
                )
            elif not _offline(image):
                ctx.add(
                    "dockerfile-base-image",
                    "warning",
                    dockerfile,
                    f"base image {image!r} is not one the offline engine holds "
                    f"({', '.join(sorted(OFFLINE_BASES))}): where no registry serves it the "
                    "build cannot start and the gate answers 'cannot run here'. Pull or load it "
                    "into the engine, tag the Debian base as it (python -m "
                    f"autoenvscaling.tools.sandbox.bases {image}) if Debian packages suffice, "
                    "or start FROM one of those",
                    ins.line,
                )
        elif ins.name == "RUN" and ins.value.lstrip().startswith("--"):
            error(
                "dockerfile-flags",
                f"`{at}`: RUN flags (--mount, --network) are not supported; remove them",
                ins.line,
            )
        elif ins.name in ("COPY", "ADD"):
            flags, _sources = copy_args(ins.value)
            unknown = sorted({f.split("=", 1)[0] for f in flags} - {"--chown", "--chmod"})
            if unknown:
                what = "another image or stage" if unknown[0] == "--from" else "this flag"
                error(
                    "dockerfile-flags",
                    f"`{at}`: {unknown[0]} ({what}) is not supported; "
                    "copy local files of environment/, with at most --chown/--chmod",
                    ins.line,
                )
                continue
            for source in sources_at.get(ins.line, []):
                _check_copy_source(ctx, task, ins, source, context_files, hidden)
    if froms == 0:
        error(
            "dockerfile-no-from",
            "has no FROM instruction; start with e.g. FROM debian:bookworm-slim",
        )


def _check_copy_source(
    ctx: LintContext,
    task: TaskView,
    ins: Instruction,
    copied: CopySource,
    context_files: list[str],
    hidden: dict[str, tuple[str, bool]],
) -> None:
    assert task.dockerfile is not None
    dockerfile = task.dockerfile
    if copied.remote:
        ctx.add(
            "dockerfile-remote-add",
            "error",
            dockerfile,
            f"{ins.name} {copied.shown()}: {REMOTE_ADVICE}",
            ins.line,
        )
        return
    if copied.resolved is None:
        ctx.add(
            "dockerfile-unresolved-source",
            "error",
            dockerfile,
            unresolved_message(copied),
            ins.line,
        )
        return
    source = copied.resolved
    norm = posixpath.normpath(source.lstrip("/")) if source.strip("/") else "."
    first = PurePosixPath(norm).parts[0] if norm != "." else "."
    if first == "..":
        ctx.add(
            "image-test-leak"
            if re.search(r"(^|/)\.\./(tests|solution)(/|$)", norm + "/")
            else "dockerfile-outside-context",
            "error",
            dockerfile,
            f"{ins.name} {source}: the build context is environment/, so this path is "
            "outside it. tests/ and solution/ are uploaded by Harbor only at verification "
            "time and must never be copied into the agent's image; copy only files of "
            "environment/",
            ins.line,
        )
        return
    name = PurePosixPath(norm).name
    covered = _covered(source, context_files)
    # environment/tests/ is the author's build input (real tasks keep a simulator's sources
    # there); it leaks only when it holds a test script, or a copy of one (checked below).
    graders = [f for f in covered if _TEST_SCRIPT.fullmatch(PurePosixPath(f).name)]
    # A test-named file elsewhere in environment/ is judged by what it holds (below): real tasks
    # give the agent a harness the instruction names (`/app/test_isolation.py`).
    if first == "solution" or (first == "tests" and (not covered or graders)) or name == "solve.sh":
        ctx.add(
            "image-test-leak",
            "error",
            dockerfile,
            f"{ins.name} {source}: copies test or solution files into the agent's image, "
            "where the agent can read them. Remove this COPY; Harbor uploads tests/ to "
            "/tests only after the agent has finished",
            ins.line,
        )
        return
    if not _covered(source, context_files):
        ctx.add(
            "dockerfile-missing-source",
            "error",
            dockerfile,
            f"{ins.name} {source}: no such file in the build context environment/; add "
            f"environment/{norm} or fix the path",
            ins.line,
        )
        return
    for rel in _covered(source, context_files):
        leaked, answer = hidden.get(file_digest(task.environment_dir / rel), ("", False))
        base = PurePosixPath(rel).name
        if leaked and not answer:
            ctx.add(
                "image-shares-test-file",
                "warning",
                dockerfile,
                f"{ins.name} {source}: environment/{rel} is identical to {leaked}, so the agent "
                "can read it. Fine for a shared input (e.g. a data generator); make sure it holds "
                "no expected output or check",
                ins.line,
            )
            continue
        if _VISIBLE_TEST.fullmatch(base) and not leaked and rel.split("/")[0] != "solution":
            if near := near_copy(task, task.environment_dir / rel):
                leaked = f"{near} (most of its lines)"
            else:
                ctx.add(
                    "image-visible-test",
                    "warning",
                    dockerfile,
                    f"{ins.name} {source}: environment/{rel} is named like a test and the agent "
                    "can read and edit it. Fine for a harness the instruction gives the agent; "
                    "the grader must stay in tests/, and must not run this copy as root",
                    ins.line,
                )
                continue
        if leaked or base == "solve.sh" or rel.split("/")[0] == "solution":
            what = f"a copy of {leaked}" if leaked else "a test or solution file"
            ctx.add(
                "image-test-leak",
                "error",
                dockerfile,
                f"{ins.name} {source}: brings environment/{rel} into the agent's image, "
                f"and it is {what}. Remove environment/{rel} (or exclude it from the COPY)",
                ins.line,
            )
