"""The gate's static stage over a corpus of real, human-written Harbor / Terminal-Bench tasks:
how many pass lint, each rule's hits (errors and warnings, by task), what the tasks fetch from
the internet (by phase), what our backends cannot honour. Run it after changing a rule to see
what the change costs on tasks people really write. It also counts the tasks whose verifier an
RL policy could forge (tools/gate/forgeability.py), by route, and each task's static kind of
"no" as `autoenvscaling import` gives it (tools/gate/importer.py: task_wrong, or cannot_run_here
by what is missing; base images asked of the engine).

    .venv/bin/python benchmarks/bench_real_tasks.py CORPUS [--backend podman] [--json OUT]
        [--git-cost]

CORPUS is any folder: every folder below it holding a task.toml is a task. The corpus is not
part of this repository (public task sets stay in their own repositories): assemble one by
fetching task repositories and pointing this script at the folder. `--git-cost` also times the
git-history leak search (`leaks.git_objects`) on synthetic repositories of growing size.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HARBOR_TELEMETRY", "0")

from autoenvscaling.tools.gate.anti_cheat.leaks import git_objects  # noqa: E402
from autoenvscaling.tools.gate.forgeability import forgeability  # noqa: E402
from autoenvscaling.tools.gate.importer import BaseImages, kind_of  # noqa: E402
from autoenvscaling.tools.gate.lint import lint_task  # noqa: E402
from autoenvscaling.tools.gate.network import network_need  # noqa: E402


def find_tasks(corpus: Path) -> list[Path]:
    return sorted({p.parent for p in corpus.rglob("task.toml") if p.is_file()})


def measure(corpus: Path, backend: str | None) -> dict:
    tasks = find_tasks(corpus)
    errors: collections.Counter[str] = collections.Counter()
    warnings: collections.Counter[str] = collections.Counter()
    phases: collections.Counter[str] = collections.Counter()
    routes: collections.Counter[str] = collections.Counter()
    forgeable = forgeable_if_separate = 0
    kinds: collections.Counter[str] = collections.Counter()
    per_task: dict[str, dict] = {}
    passed = needs = declared = 0
    verdicts: collections.Counter[str] = collections.Counter()
    lacking: collections.Counter[str] = collections.Counter()
    bases = BaseImages(backend or "podman", ask_engine=backend is not None)
    started = time.monotonic()
    for task in tasks:
        report = lint_task(task, backend=backend)
        need = network_need(task)
        error_rules = sorted({f.rule for f in report.errors})
        warning_rules = sorted({f.rule for f in report.warnings})
        errors.update(error_rules)
        warnings.update(warning_rules)
        passed += report.ok
        if need.uses:
            needs += 1
            phases.update(need.phases())
            kinds.update({u.what for u in need.uses})
        declared += need.declared
        forge = forgeability(task)
        forgeable += forge.forgeable
        forgeable_if_separate += forge.forgeable_if_separate
        routes.update({r.route for r in forge.routes})
        kind, missing = kind_of(report, task, bases, allow_internet=False)
        verdicts[kind or "ready"] += 1
        lacking.update({m.need for m in missing})
        per_task[str(task.relative_to(corpus))] = {
            "ok": report.ok,
            "errors": [str(f) for f in report.errors],
            "warnings": warning_rules,
            "network": [str(u) for u in need.uses],
            "forgeable": [f"{r.file}:{r.line or ''} {r.route}: {r.what}" for r in forge.routes],
            "kind": kind,
            "missing": [m.what for m in missing],
        }
    return {
        "corpus": str(corpus),
        "tasks": len(tasks),
        "passed_lint": passed,
        "errors_by_rule": dict(errors.most_common()),
        "warnings_by_rule": dict(warnings.most_common()),
        "need_network": needs,
        "declare_internet": declared,
        "network_by_phase": dict(phases.most_common()),
        "network_by_kind": dict(kinds.most_common()),
        "forgeable": forgeable,
        "forgeable_if_separate": forgeable_if_separate,
        "forgeable_by_route": dict(routes.most_common()),
        "kinds": dict(verdicts.most_common()),
        "missing_by_need": dict(lacking.most_common()),
        "engine_asked": bases.engine_asked,
        "seconds": round(time.monotonic() - started, 2),
        "per_task": per_task,
    }


def git_cost(commits: list[int]) -> list[dict]:
    """Seconds `git_objects` takes to read a packed repository of n commits (one 2 kB file
    changed per commit, then `git gc`): the leak search's cost per repository."""
    out = []
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.com",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.com",
    }
    for n in commits:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp)
            subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env, check=True)
            parts = []
            for i in range(n):
                body = (str(i) * 2048)[:2048] + "\n"
                parts.append(
                    f"commit refs/heads/main\nmark :{i + 1}\n"
                    f"committer b <b@example.com> {i} +0000\ndata {len(f'c{i}')}\nc{i}\n"
                    + (f"from :{i}\n" if i else "")
                    + f"M 644 inline f{i % 50}.txt\ndata {len(body)}\n{body}\n"
                )
            script = "".join(parts)
            subprocess.run(
                ["git", "fast-import", "--quiet"],
                cwd=repo,
                env=env,
                input=script.encode(),
                check=True,
            )
            subprocess.run(["git", "gc", "-q"], cwd=repo, env=env, check=True)
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as tf:
                tf.add(repo / ".git" / "objects", arcname=".")
            store = buffer.getvalue()
            started = time.monotonic()
            count = sum(1 for _ in git_objects(store))
            out.append(
                {
                    "commits": n,
                    "objects": count,
                    "store_bytes": len(store),
                    "seconds": round(time.monotonic() - started, 3),
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--backend", default="podman", help="'none' for the backend-free rules")
    parser.add_argument("--json", type=Path, help="write every number (and each task's) here")
    parser.add_argument("--git-cost", action="store_true")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"{args.corpus} is not a folder")
    result = measure(args.corpus, None if args.backend == "none" else args.backend)
    if args.git_cost:
        result["git_cost"] = git_cost([10, 100, 1000, 5000])
    print(f"{result['tasks']} tasks under {args.corpus} ({result['seconds']} s)")
    print(f"pass lint: {result['passed_lint']}")
    print(
        f"need the internet: {result['need_network']} (declare it: {result['declare_internet']})"
        f"; by phase {result['network_by_phase']}"
    )
    print(f"  by kind: {result['network_by_kind']}")
    print(
        f"forgeable (the verifier runs the agent's code where it can write the reward): "
        f"{result['forgeable']}; still forgeable on the separate verifier: "
        f"{result['forgeable_if_separate']}; tasks per route {result['forgeable_by_route']}"
    )
    print(
        f"kind of no (static, offline): {result['kinds']}; tasks missing, by need: "
        f"{result['missing_by_need']} (engine asked: {result['engine_asked']})"
    )
    print("errors, tasks per rule:")
    for rule, hits in result["errors_by_rule"].items():
        print(f"  {hits:4d}  {rule}")
    print("warnings, tasks per rule:")
    for rule, hits in result["warnings_by_rule"].items():
        print(f"  {hits:4d}  {rule}")
    for row in result.get("git_cost", []):
        print(
            f"git history read: {row['commits']} commits, {row['objects']} objects, "
            f"{row['store_bytes'] / 1e6:.2f} MB packed: {row['seconds']} s"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
