"""Is the answer readable before the work is done? Comparisons of the oracle's outputs against
what the agent can read at the start: files of the image, members of archives, objects of git
repositories (reachable or not), and the instruction.

Git history counts as readable: every object a repository's store holds (packed or loose,
reachable or not, reflogs and stashes included), commit and tag messages, and standalone packs
and bundles.

A match is exact (same bytes), or equal after normalisation: the same tokens with the same counts
once case, whitespace, separators (`,;|:` tabs, quotes, brackets) and line order are ignored, so
a reformatted, re-sorted or upper-cased copy still counts. Tiny outputs are compared exactly only
(a few tokens match by chance).

Pure functions over bytes; `probes.OracleAuditAgent` gathers the candidates inside the trial.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

MIN_TOKENS = 4  # fewer tokens than this: exact matches only
MAX_MEMBER_BYTES = 5_000_000
MAX_MEMBERS = 2000
ARCHIVE_SUFFIXES = (".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tar.xz", ".zip", ".gz", ".bz2", ".xz")

_TOKEN = re.compile(r"[^\s,;|:\"'`{}\[\]()<>=]+")


class Leak(BaseModel):
    location: str  # e.g. "/var/backups/report.bak", "/opt/a.tgz!report.json", "git:/app@<sha>"
    kind: str  # "expected_output" | "task_file"
    same_as: str  # the output (or tests/ file) it matches
    match: str  # "exact" | "normalised"


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def normalised_key(data: bytes) -> str | None:
    """The order-, case-, whitespace- and separator-insensitive fingerprint; None when too short
    or not text."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    toks = tokens(text)
    if len(toks) < MIN_TOKENS:
        return None
    counted = sorted(Counter(toks).items())
    return hashlib.sha256(repr(counted).encode()).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(data: bytes) -> dict[str, object]:
    """What the gate keeps of an output to compare it later: digests, size, its first bytes."""
    return {
        "sha256": sha256(data),
        "normalised": normalised_key(data),
        "size": len(data),
        "head": data[:120].decode("utf-8", "replace"),
    }


class OutputIndex:
    """The oracle's outputs, by exact digest and by normalised key."""

    def __init__(self, outputs: dict[str, bytes], min_bytes: int = 16):
        self.exact: dict[str, str] = {}
        self.normal: dict[str, str] = {}
        for path, data in sorted(outputs.items()):
            if len(data) < min_bytes:
                continue
            self.exact.setdefault(sha256(data), path)
            key = normalised_key(data)
            if key is not None:
                self.normal.setdefault(key, path)
        self.sizes = sorted({len(d) for d in outputs.values() if len(d) >= min_bytes})

    def __bool__(self) -> bool:
        return bool(self.exact)

    def match(self, data: bytes) -> tuple[str, str] | None:
        """(output path, "exact" | "normalised") when `data` is one of the outputs."""
        hit = self.exact.get(sha256(data))
        if hit is not None:
            return hit, "exact"
        if not self.normal or len(data) > 4 * max(self.sizes, default=0) + 4096:
            return None
        key = normalised_key(data)
        if key is not None and key in self.normal:
            return self.normal[key], "normalised"
        return None

    def size_window(self) -> tuple[int, int]:
        """Sizes a normalised copy of some output can have (whitespace and separators vary)."""
        if not self.sizes:
            return (0, -1)
        return (max(1, self.sizes[0] // 3), 3 * self.sizes[-1] + 1024)


# --------------------------------------------------------------------------- archives


def is_archive(path: str) -> bool:
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def archive_members(name: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    """(member name, content) of a tar/zip/compressed file, capped; nothing for a broken one.
    Read in memory: nothing is extracted to disk."""
    lower = name.lower()
    try:
        if lower.endswith(".zip") or data[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for info in zf.infolist()[:MAX_MEMBERS]:
                    if not info.is_dir() and info.file_size <= MAX_MEMBER_BYTES:
                        yield info.filename, zf.read(info)
            return
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
                for count, member in enumerate(tf):
                    if count >= MAX_MEMBERS:
                        break
                    if member.isfile() and member.size <= MAX_MEMBER_BYTES:
                        handle = tf.extractfile(member)
                        if handle is not None:
                            yield member.name, handle.read()
            return
        except tarfile.TarError:
            pass
        for suffix, opener in ((".gz", gzip), (".bz2", bz2), (".xz", lzma)):
            if lower.endswith(suffix):
                reader = opener.open(io.BytesIO(data))
                content = reader.read(MAX_MEMBER_BYTES + 1)
                if len(content) <= MAX_MEMBER_BYTES:
                    yield PurePosixPath(name).name.removesuffix(suffix), content
                return
    except (OSError, EOFError, zipfile.BadZipFile, lzma.LZMAError, ValueError):
        return


# --------------------------------------------------------------------------- git objects


def git_objects(
    objects_tar: bytes, max_blob: int = MAX_MEMBER_BYTES
) -> Iterator[tuple[str, str, bytes]]:
    """(sha, kind, content) of what a repository's object store holds, from a tar of its
    `objects/` folder: every blob, and the message of every commit and tag (an answer can sit
    in a commit message as well as in a file). Loose objects and packs, reachable from a ref, a
    reflog or a stash or from nothing at all (`git cat-file --batch-all-objects`): history
    rewritten, reset, removed or packed is still read.

    Read with the host's git in a fresh bare repository of our own (the task's config, hooks and
    alternates are never used), so nothing the task wrote runs here.
    """
    git = shutil.which("git")
    if git is None:
        return
    with tempfile.TemporaryDirectory(prefix="aes-gitleak-") as tmp:
        repo = Path(tmp) / "repo.git"
        env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": tmp}
        subprocess.run(
            [git, "init", "-q", "--bare", str(repo)], check=True, env=env, capture_output=True
        )
        objects = repo / "objects"
        with tarfile.open(fileobj=io.BytesIO(objects_tar), mode="r:*") as tf:
            for member in tf:
                rel = PurePosixPath(member.name)
                parts = [p for p in rel.parts if p not in ("", ".", "..")]
                if not member.isfile() or not parts or parts[0] in ("info",):
                    continue
                target = objects.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tf.extractfile(member)
                if handle is not None:
                    target.write_bytes(handle.read())
        for pack in (objects / "pack").glob("*.pack") if (objects / "pack").is_dir() else []:
            if not pack.with_suffix(".idx").exists():
                subprocess.run(
                    [git, "index-pack", str(pack)], env=env, capture_output=True, cwd=repo
                )
        listing = subprocess.run(
            [git, "cat-file", "--batch-all-objects", "--batch-check", "--unordered"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        wanted = []
        for line in listing.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in ("blob", "commit", "tag"):
                if int(parts[2]) <= max_blob:
                    wanted.append(parts[0])
        if not wanted:
            return
        out = subprocess.run(
            [git, "cat-file", "--batch"],
            cwd=repo,
            env=env,
            input=("\n".join(wanted) + "\n").encode(),
            capture_output=True,
        ).stdout
        pos = 0
        while pos < len(out):
            header_end = out.index(b"\n", pos)
            sha, kind, size = out[pos:header_end].decode().split()
            start = header_end + 1
            content = out[start : start + int(size)]
            if kind != "blob":  # headers (tree, parents, author) are no one's answer
                content = content.split(b"\n\n", 1)[1] if b"\n\n" in content else b""
            yield sha, kind, content
            pos = start + int(size) + 1


def pack_as_objects_tar(data: bytes) -> bytes | None:
    """A standalone pack (`*.pack`) or bundle (`*.bundle`: a header, then a pack) found in the
    image, as the tar of an `objects/` folder that `git_objects` reads; None if it is neither."""
    if data.startswith((b"# v2 git bundle", b"# v3 git bundle")) and b"\n\n" in data:
        data = data.split(b"\n\n", 1)[1]
    if not data.startswith(b"PACK"):
        return None
    buffer = io.BytesIO()
    digest = hashlib.sha1(data).hexdigest()  # noqa: S324 - a file name, not a security check
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        info = tarfile.TarInfo(f"pack/pack-{digest}.pack")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# --------------------------------------------------------------------------- the instruction


def in_instruction(outputs: dict[str, bytes], instruction: str, min_tokens: int = 8) -> list[str]:
    """Outputs whose content the instruction spells out: every token of the output in the same
    order, or every (non-trivial) line of it, after normalisation."""
    inst_tokens = tokens(instruction)
    inst_text = " " + " ".join(inst_tokens) + " "
    inst_lines = {" ".join(tokens(line)) for line in instruction.splitlines()}
    found = []
    for path, data in sorted(outputs.items()):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        toks = tokens(text)
        if len(toks) < min_tokens:
            continue
        lines = [" ".join(tokens(x)) for x in text.splitlines()]
        lines = [x for x in lines if x]
        if f" {' '.join(toks)} " in inst_text or (
            len(lines) >= 3 and all(x in inst_lines for x in lines)
        ):
            found.append(path)
    return found
