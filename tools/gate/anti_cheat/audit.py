"""`OracleAuditAgent`: one Harbor trial that runs the oracle and then audits the task with it.

1. Lists the image before and after running solution/solve.sh exactly as Harbor's oracle does:
   the files the oracle created or changed are its outputs (measured, not guessed).
2. Leak search over what the agent could read at the start: every file of the image (exact
   bytes), the files no Debian package owns (also after normalisation, see `leaks`), members of
   archives, the git history of every repository (every object of its store, reachable or not;
   commit and tag messages; standalone packs and bundles), and the instruction text. A hit is a
   leak with its location.
3. Near misses: the task's own tests/test.sh is run in this sandbox on each wrong answer
   `near_miss` derives from the outputs, and, when one of them passes, on the oracle's own state
   (the control, which must score 1.0 for the result to count); the rewards are reported. The oracle's outputs are put back afterwards, so Harbor's own verifier
   then judges the oracle's state as usual.

Everything it measured goes to the agent context's metadata; `anti_cheat` judges it.
"""

from __future__ import annotations

import io
import re
import tarfile
import time
from pathlib import Path
from typing import Any, override

from harbor.agents.oracle import OracleAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trial.paths import TrialPaths

from ...tasks.format import load_task
from ...trials.script_agent import NoWebTools
from ..flake import root_sh, run_tests_here
from .leaks import (
    Leak,
    OutputIndex,
    archive_members,
    fingerprint,
    git_objects,
    in_instruction,
    is_archive,
    pack_as_objects_tar,
    tokens,
)
from .near_miss import derive_near_misses, is_data_output
from .probes import (
    NOT_OUTPUTS,
    hidden_files,
    list_image,
    named_in_instruction,
)

MAX_OUTPUT_FILES = 50
MAX_OUTPUT_BYTES = 1_000_000
MAX_CANDIDATES = 400
MAX_DOWNLOAD_BYTES = 40_000_000
MAX_ARCHIVE_BYTES = 20_000_000
MAX_GIT_BYTES = 50_000_000
MAX_REPOS = 5
MAX_SCOPE = 20_000  # workspace files hashed before the oracle runs
# A task whose input is the history (recover a lost commit, merge a branch, bisect): the
# instruction is about git, and the reference solution itself reads the history. An
# instruction that only mentions a repository, over an oracle that computes its answer from the
# files, is not enough: that is how an answer left in the history leaks.
_ABOUT_GIT = re.compile(
    r"\b(git|commits?|branch(?:es)?|reflogs?|stash\w*|merg\w+|rebas\w+|cherry-pick\w*|"
    r"bisect\w*|histor(?:y|ies)|recover\w*)\b",
    re.I,
)
_READS_HISTORY = re.compile(
    r"\bgit\b[^\n;|&]*\b(log|show|reflog|fsck|cat-file|stash|rev-list|reset|checkout|switch|"
    r"restore|merge|cherry-pick|revert|bisect|blame|diff|rebase|branch|unpack-objects)\b"
)


def history_is_input(instruction: str, task_dir: Path) -> bool:
    """The git history is what the task works on, so finding the answer there is no leak."""
    try:
        solution = (task_dir / "solution" / "solve.sh").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        solution = ""
    return bool(_ABOUT_GIT.search(instruction)) and bool(_READS_HISTORY.search(solution))


async def _fetch(env: BaseEnvironment, paths: list[str], local: Path) -> dict[str, bytes]:
    """The files at `paths` in the sandbox (one tar round trip; missing ones left out)."""
    if not paths:
        return {}
    listing = local.with_suffix(".list")
    listing.write_bytes(b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths))
    await env.upload_file(listing, "/tmp/.aes-fetch-list")
    await root_sh(
        env,
        "tar -cPf /tmp/.aes-fetch.tar --null --no-recursion -T /tmp/.aes-fetch-list "
        "2>/dev/null; rm -f /tmp/.aes-fetch-list; test -f /tmp/.aes-fetch.tar || tar -cf "
        "/tmp/.aes-fetch.tar -T /dev/null",
    )
    await env.download_file("/tmp/.aes-fetch.tar", local)
    await root_sh(env, "rm -f /tmp/.aes-fetch.tar")
    out: dict[str, bytes] = {}
    with tarfile.open(local, mode="r:") as tf:
        for member in tf:
            handle = tf.extractfile(member) if member.isfile() else None
            if handle is not None:
                out["/" + member.name.lstrip("/")] = handle.read()
    local.unlink(missing_ok=True)
    return out


class OracleAuditAgent(OracleAgent, NoWebTools):
    """Harbor's oracle, then a leak search and the near-miss runs (see module doc)."""

    def __init__(
        self,
        logs_dir: Path,
        *args: Any,
        task_dir: str,
        min_bytes: int = 16,
        max_bytes: int = 50_000_000,
        near_miss: bool = True,
        max_variants: int = 4,
        threshold: float = 0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            logs_dir, Path(task_dir), TrialPaths(Path(logs_dir).parent), *args, **kwargs
        )
        self.task_path = Path(task_dir)
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.near_miss = near_miss
        self.max_variants = max_variants
        self.threshold = threshold

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-oracle-audit"

    # ------------------------------------------------------------------ sandbox helpers

    async def _upload_list(self, env: BaseEnvironment, paths: list[str], remote: str) -> None:
        local = self.logs_dir / remote.rsplit("/", 1)[-1].lstrip(".")
        local.write_bytes(b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths))
        await env.upload_file(local, remote)

    async def _hashes(self, env: BaseEnvironment, paths: list[str]) -> dict[str, str]:
        """path -> sha256, computed inside the sandbox (the files never leave it)."""
        if not paths:
            return {}
        await self._upload_list(env, paths, "/tmp/.aes-hash-list")
        await root_sh(
            env,
            "xargs -0 -r -a /tmp/.aes-hash-list sha256sum -z > /tmp/.aes-hashes 2>/dev/null; true",
        )
        out = self.logs_dir / "hashes.bin"
        await env.download_file("/tmp/.aes-hashes", out)
        await root_sh(env, "rm -f /tmp/.aes-hash-list /tmp/.aes-hashes")
        hashes: dict[str, str] = {}
        for record in out.read_bytes().split(b"\0"):
            digest, _, path = record.partition(b"  ")
            if path:
                hashes[path.decode("utf-8", "surrogateescape")] = digest.decode()
        return hashes

    async def _grep(self, env: BaseEnvironment, paths: list[str], words: list[str]) -> list[str]:
        """The `paths` that contain one of `words` (case-insensitive), found inside the sandbox."""
        if not paths or not words:
            return []
        await self._upload_list(env, paths, "/tmp/.aes-grep-list")
        words_file = self.logs_dir / "grep-words"
        words_file.write_text("\n".join(words) + "\n")
        await env.upload_file(words_file, "/tmp/.aes-grep-words")
        out = await root_sh(
            env,
            "xargs -0 -r -a /tmp/.aes-grep-list grep -l -Z -i -F -f /tmp/.aes-grep-words -- "
            "2>/dev/null; rm -f /tmp/.aes-grep-list /tmp/.aes-grep-words",
        )
        return [p for p in out.split("\0") if p]

    async def _package_files(self, env: BaseEnvironment) -> set[str]:
        """Paths that Debian packages installed: the distribution's, not the task's."""
        out = await root_sh(env, "cat /var/lib/dpkg/info/*.list 2>/dev/null; true")
        return {line for line in out.splitlines() if line.startswith("/")}

    # ------------------------------------------------------------------ the audit

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        env = environment
        clock = _Laps()
        workdir = ((await env.exec("pwd")).stdout or "").strip() or "/"
        before = await list_image(env, self.logs_dir / "listing-before.bin")
        # Contents of the workspace before, so a file the oracle only touched (a checkout that
        # restored it, a rewrite with the same bytes) does not count as an output.
        prefix = workdir.rstrip("/") + "/"
        scope = [p for p in before if p.startswith(prefix)][:MAX_SCOPE] if prefix != "/" else []
        before_hashes = await self._hashes(env, scope)
        clock.lap("before")
        await super().run(instruction, env, context)  # the oracle, unchanged
        clock.lap("oracle")
        after = await list_image(env, self.logs_dir / "listing-after.bin")

        def is_output(path: str, size: int) -> bool:
            return (
                after.get(path) != before.get(path)
                and 0 < size <= self.max_bytes
                and "/__pycache__/" not in path
                and not path.endswith(".pyc")
                and not path.startswith(NOT_OUTPUTS)
            )

        changed = {p: s for p, (s, _) in after.items() if is_output(p, s)}
        rehashed = await self._hashes(env, [p for p in changed if p in before_hashes])
        changed = {
            p: s
            for p, s in changed.items()
            if p not in before_hashes or rehashed.get(p) != before_hashes[p]
        }
        # Tiny files match by chance: the leak search compares only outputs of min_bytes or more.
        outputs = {p: s for p, s in changed.items() if s >= self.min_bytes}
        task = load_task(self.task_path)
        task_instruction = task.instruction
        # Untouched files present from the start: what the agent could have read.
        unchanged = [p for p, v in before.items() if after.get(p) == v and p not in outputs]
        leaks: list[Leak] = []
        notes: list[str] = []

        # 1. exact copies anywhere in the image (hashes computed in the sandbox)
        hidden = hidden_files(self.task_path, self.min_bytes)
        hidden_sizes = {(self.task_path / rel).stat().st_size for rel in hidden.values()}
        sizes = set(outputs.values()) | hidden_sizes
        suspects = [p for p in unchanged if before[p][0] in sizes]
        hashes = await self._hashes(env, suspects + sorted(outputs))
        by_output = {hashes[p]: p for p in outputs if p in hashes}
        for path in suspects:
            digest = hashes.get(path)
            if digest in hidden:
                leaks.append(
                    Leak(location=path, kind="task_file", same_as=hidden[digest], match="exact")
                )
            elif digest in by_output and not named_in_instruction(
                path, task_instruction, workdir, by_output[digest]
            ):
                leaks.append(
                    Leak(
                        location=path,
                        kind="expected_output",
                        same_as=by_output[digest],
                        match="exact",
                    )
                )

        # The oracle's outputs themselves (small text files) for the deeper searches.
        small = sorted(p for p, s in changed.items() if s <= MAX_OUTPUT_BYTES)[:MAX_OUTPUT_FILES]
        every = await _fetch(env, small, self.logs_dir / "outputs.tar")
        contents = {p: b for p, b in every.items() if p in outputs}
        index = OutputIndex(contents, self.min_bytes)
        packaged = await self._package_files(env)
        seen = {leak.location for leak in leaks}

        def record(location: str, data: bytes, *, named_ok: str | None = None) -> None:
            hit = index.match(data)
            if hit is None or location in seen:
                return
            output, how = hit
            if named_ok and named_in_instruction(named_ok, task_instruction, workdir, output):
                return
            seen.add(location)
            leaks.append(Leak(location=location, kind="expected_output", same_as=output, match=how))

        clock.lap("outputs_and_exact_leaks")
        # 2. normalised copies among the files no package owns
        ours = [p for p in unchanged if p not in packaged]
        low, high = index.size_window()
        window = [p for p in ours if low <= before[p][0] <= high and not is_archive(p)]
        words = sorted(
            {max(tokens(d.decode("utf-8", "replace")) or [""], key=len) for d in contents.values()}
            - {""}
        )
        words = [w for w in words if len(w) >= 3]
        candidates = (await self._grep(env, window, words))[:MAX_CANDIDATES] if index else []
        budget = MAX_DOWNLOAD_BYTES
        picked = []
        for path in candidates:
            budget -= before.get(path, (0, ""))[0]
            if budget < 0:
                notes.append("normalised search stopped at its download cap")
                break
            picked.append(path)
        for path, data in (await _fetch(env, picked, self.logs_dir / "cands.tar")).items():
            record(path, data, named_ok=path)

        clock.lap("normalised_leaks")
        # 3. archive members
        archives = [p for p in ours if is_archive(p) and before[p][0] <= MAX_ARCHIVE_BYTES]
        if index and archives:
            total = 0
            chosen = []
            for path in archives:
                total += before[path][0]
                if total > MAX_DOWNLOAD_BYTES:
                    notes.append("archive search stopped at its download cap")
                    break
                chosen.append(path)
            for path, data in (await _fetch(env, chosen, self.logs_dir / "arch.tar")).items():
                for member, content in archive_members(path, data):
                    record(f"{path}!{member}", content)

        clock.lap("archives")
        # 4. git history: every object of every repository's store (packed or loose, reachable
        # or not: reflogs, stashes, removed files), commit and tag messages, standalone packs
        # and bundles. Skipped only where the history is the task's input (history_is_input).
        repos = sorted(
            {p.split("/objects/", 1)[0] for p in ours if "/objects/" in p and _is_object(p)}
        )[:MAX_REPOS]
        loose_packs = [
            p
            for p in ours
            if p.endswith((".pack", ".bundle"))
            and "/objects/pack/" not in p
            and before[p][0] <= MAX_GIT_BYTES
        ][:MAX_REPOS]
        git_cost = {"repos": len(repos), "packs": len(loose_packs), "objects": 0, "bytes": 0}
        if (repos or loose_packs) and history_is_input(task_instruction, self.task_path):
            notes.append(
                f"git history of {', '.join(repos + loose_packs)} not searched: the task is "
                "about git and its reference solution reads the history"
            )
        elif index:
            stores: list[tuple[str, bytes]] = []
            for repo in repos:
                files = [p for p in ours if p.startswith(repo + "/objects/")]
                if sum(before[p][0] for p in files) > MAX_GIT_BYTES:
                    notes.append(f"git objects of {repo} not searched: over the size cap")
                    continue
                fetched = await _fetch(env, files, self.logs_dir / "git.tar")
                buffer = io.BytesIO()
                with tarfile.open(fileobj=buffer, mode="w") as tf:
                    for path, data in fetched.items():
                        info = tarfile.TarInfo(path.split("/objects/", 1)[1])
                        info.size = len(data)
                        tf.addfile(info, io.BytesIO(data))
                stores.append((repo, buffer.getvalue()))
            for path, data in (await _fetch(env, loose_packs, self.logs_dir / "packs.tar")).items():
                packed = pack_as_objects_tar(data)
                if packed is not None:
                    stores.append((path, packed))
            for where, store in stores:
                git_cost["bytes"] += len(store)
                for sha, kind, content in git_objects(store):
                    git_cost["objects"] += 1
                    what = "object" if kind == "blob" else f"{kind} message"
                    record(f"git {what} {sha} in {where}", content)

        clock.lap("git")
        # 5. the instruction
        for output in in_instruction(contents, task_instruction):
            leaks.append(
                Leak(
                    location="instruction.md",
                    kind="expected_output",
                    same_as=output,
                    match="normalised",
                )
            )

        named = self._named(every, task_instruction, workdir)
        metadata: dict[str, Any] = {
            "output_fingerprints": {
                p: fingerprint(b) for p, b in named.items() if is_data_output(p, b)
            },
            "leaks": [leak.model_dump() for leak in leaks],
            "outputs": sorted(outputs)[:50],
            "files_scanned": len(before),
            "files_hashed": len(hashes),
            "normalised_candidates": len(picked),
            "archives_searched": len(archives),
            "git_repos": repos,
            "git_search": git_cost,
            "workdir": workdir,
            "notes": notes,
        }
        if self.near_miss:
            metadata["near_miss"] = await self._near_misses(env, task, named, task_instruction)
            clock.lap("near_miss")
        metadata["phase_seconds"] = clock.laps
        context.metadata = {**(context.metadata or {}), **metadata}

    # ------------------------------------------------------------------ near misses

    async def _verify_here(self, env: BaseEnvironment, task: Any) -> tuple[float | None, str]:
        """Run tests/test.sh in this sandbox as Harbor's verifier would; (reward, output tail)."""
        verifier = task.config.verifier
        await root_sh(env, "rm -f /logs/verifier/reward.txt /logs/verifier/reward.json")
        return await run_tests_here(env, verifier, verifier.timeout_sec, 1500)

    async def _write(self, env: BaseEnvironment, files: dict[str, bytes]) -> None:
        for i, (path, data) in enumerate(sorted(files.items())):
            local = self.logs_dir / f"nm-{i}.bin"
            local.write_bytes(data)
            await env.upload_file(local, path)
            local.unlink(missing_ok=True)

    @staticmethod
    def _named(outputs: dict[str, bytes], instruction: str, workdir: str) -> dict[str, bytes]:
        """Only outputs the instruction asks for: helper files the oracle leaves are nobody's
        answer."""
        return {
            p: b
            for p, b in outputs.items()
            if named_in_instruction(p, instruction, workdir)
            or p.removeprefix(workdir.rstrip("/") + "/") in instruction
        }

    async def _near_misses(
        self, env: BaseEnvironment, task: Any, named: dict[str, bytes], instruction: str
    ) -> dict[str, Any]:
        variants = derive_near_misses(named, instruction, max_variants=self.max_variants)
        report: dict[str, Any] = {"outputs": sorted(named), "variants": []}
        if not variants:
            report["skipped"] = "no text data output named in the instruction to perturb"
            return report
        await env.upload_dir(self.task_path / "tests", "/tests")
        try:
            for variant in variants:
                await self._write(env, variant.files)
                try:
                    reward, tail = await self._verify_here(env, task)
                finally:
                    await self._write(env, {p: named[p] for p in variant.files})
                report["variants"].append(
                    {
                        "kind": variant.kind,
                        "description": variant.description,
                        "reward": reward,
                        "output": tail[-400:],
                    }
                )
            if any((v["reward"] or 0.0) >= self.threshold for v in report["variants"]):
                # Only now the control: do the tests re-run in place give the oracle 1.0?
                control, tail = await self._verify_here(env, task)
                report["control_reward"] = control
                if control is None or control < 1.0:
                    report["skipped"] = (
                        f"the tests re-run in place on the oracle's own state gave {control}, "
                        "not 1.0: the near misses could not be judged"
                    )
                    report["control_output"] = tail[-600:]
        finally:
            await root_sh(env, "rm -rf /tests; rm -f /logs/verifier/reward.* /tmp/.aes-tests-out")
        return report


class _Laps:
    """Seconds spent in each phase of the audit (reported, to see where its time goes)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self._last, 3)
        self._last = now


def _is_object(path: str) -> bool:
    """A git object file: objects/xx/<38 hex> or a pack (and its index)."""
    rest = path.split("/objects/", 1)[1]
    return bool(re.fullmatch(r"[0-9a-f]{2}/[0-9a-f]{38}|pack/pack-[0-9a-f]+\.(pack|idx)", rest))
