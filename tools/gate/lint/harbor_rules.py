"""The rules of Harbor's own `harbor lint` that we take over, with our severity and our messages."""

from __future__ import annotations

from pathlib import Path

from harbor.lint import LintRule
from harbor.lint import lint_task as harbor_lint_task

from ...harbor_adapter import pip_install_packages
from .model import LintContext, Severity

# Harbor rules we take over, with our severity. Left out on purpose: shared-verifier and
# root-agent (our trials use the shared verifier as root, like TB2), unpinned-image (the
# offline base is tagged as the FROM images), agent-image-test-leak (our `image-test-leak` is a superset), and the
# config/file rules that `tasks/format.py` reports with more precise messages.
# Unpinned packages are a style rule (Harbor's own lint warns): the build is offline or fetches
# whatever it fetches either way, and real tasks write `pip install pytest`.
_HARBOR_RULES: dict[LintRule, Severity] = {
    LintRule.UNPINNED_PYTHON_DEPENDENCY: "warning",
    LintRule.OVERLAPPING_ARTIFACTS: "error",
    LintRule.ARTIFACT_LOG_OVERLAP: "error",
    LintRule.COMPOSE_PRIVILEGED: "error",
    LintRule.COMPOSE_ADDITIONAL_CAPABILITIES: "error",
    LintRule.COMPOSE_WRITABLE_BIND_MOUNT: "error",
    LintRule.COMPOSE_EXTERNAL_BIND_MOUNT: "error",
    LintRule.COMPOSE_SYMLINK_BIND_MOUNT: "error",
    LintRule.VERIFIER_RUNTIME_INSTALL: "warning",
    LintRule.VERIFIER_NETWORK_DOWNLOAD: "warning",
}


def check_harbor_rules(ctx: LintContext, *, quiet: bool) -> None:
    try:
        findings = harbor_lint_task(ctx.root, selected_rules=set(_HARBOR_RULES))
    except (OSError, ValueError, RuntimeError) as exc:  # Harbor lets these propagate
        if quiet:  # the format errors already say what made the task unreadable
            return
        ctx.add("harbor-lint", "error", ".", f"Harbor's lint could not read the task: {exc}")
        return
    for finding in findings:
        message = finding.message
        if finding.rule == LintRule.UNPINNED_PYTHON_DEPENDENCY and finding.line:
            path = Path(finding.path)
            unpinned = _unpinned_packages(path, finding.line)
            if unpinned == []:  # only option values (`--retries 3`) looked like packages
                continue
            names = ", ".join(f"`{n}`" for n in unpinned or [])
            quoted = _source_line(path, finding.line)
            message = (
                f"{names or 'a package'} not pinned in `{quoted}`: write each as name==version "
                "(e.g. requests==2.32.3) or install from a pinned requirements file"
            )
        ctx.add(str(finding.rule), _HARBOR_RULES[finding.rule], finding.path, message, finding.line)


# pip options that take a value Harbor 0.25's parser does not know: it reads `--retries 3` as
# a package named "3" (seen on real tasks: `pip install --no-cache-dir --retries 3 x==1`).
_MORE_VALUE_FLAGS = frozenset(
    "--retries --timeout --trusted-host --proxy --progress-bar --only-binary --no-binary "
    "--python-version --implementation --abi --upgrade-strategy --global-option --exists-action "
    "--cert --client-cert".split()
)


def _unpinned_packages(path: Path, line: int) -> list[str] | None:
    """The unpinned packages Harbor saw on `line`, found with Harbor's own parser, less option
    values; None when the line cannot be read again (the message is then generic)."""
    try:  # Harbor's parser has no public door (tools/harbor_adapter.py)
        commands = list(pip_install_packages(path, line))
    except (ImportError, OSError, ValueError):
        return None
    out = []
    for command, unpinned in commands:
        values = {b for a, b in zip(command, command[1:], strict=False) if a in _MORE_VALUE_FLAGS}
        out += [p for p in unpinned if p not in values]
    return out


def _source_line(path: Path, line: int) -> str:
    try:
        text = path.read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, UnicodeDecodeError, IndexError):
        return "?"
    return text if len(text) <= 120 else text[:117] + "..."
