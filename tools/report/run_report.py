"""The round and run reports: Markdown with the measured numbers, plus PNG plots.

autoenvscaling report RUN_DIR   -> RUN_DIR/reports/run.md and *.png
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .activity import activity_markdown
from .domains import domain_markdown
from .heldout import heldout_change, heldout_markdown, heldout_points
from .metrics import RoundMetrics, as_number

EMBEDDED_NOTE = (
    "The embedded policy is SmolLM2-135M-Instruct, a plumbing model: it exercises every code path "
    "(proposer and solver rollouts, the gate, GRPO, the adapter swap) but cannot be expected to "
    "write valid environments or solve the pool. Few or no admitted environments is the expected "
    "outcome; point the run at a real endpoint for results."
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _served(m: RoundMetrics) -> str:
    """`proposer / solver`: what each role is served after the round's training."""
    return " / ".join(m.served.get(role, "-") for role in ("proposer", "solver"))


def load_history(reports_dir: Path) -> list[RoundMetrics]:
    path = reports_dir / "metrics.json"
    if not path.exists():
        return []
    return [RoundMetrics.model_validate(item) for item in json.loads(path.read_text())]


def save_history(reports_dir: Path, history: list[RoundMetrics]) -> None:
    reports_dir.mkdir(parents=True, exist_ok=True)
    tmp = reports_dir / "metrics.json.tmp"
    tmp.write_text(json.dumps([m.model_dump(mode="json") for m in history], indent=2))
    tmp.replace(reports_dir / "metrics.json")


def round_markdown(m: RoundMetrics, *, embedded: bool = False) -> str:
    lines = [
        f"# Round {m.round}",
        "",
        f"Policy: `{m.policy}`",
        "",
        *(
            [
                "Served after training: "
                + ", ".join(f"{role} `{name}`" for role, name in m.served.items()),
                "",
            ]
            if m.served
            else []
        ),
        # One quote, one paragraph per warning (adjacent quote lines would run together).
        *"\n>\n".join(f"> **Warning:** {w}" for w in m.warnings).splitlines(),
        *([""] if m.warnings else []),
        "| measure | value |",
        "| --- | --- |",
        f"| candidates | {m.candidates} |",
        f"| revisions after rejections | {m.revisions} |",
        f"| scored (infrastructure failures excluded) | {m.scored} |",
        f"| infrastructure failures (candidates) | {m.infrastructure_failures} |",
        f"| admitted | {m.admitted} |",
        f"| valid-environment rate | {_fmt(m.valid_environment_rate)} |",
        f"| proposer tokens | {m.proposer_tokens} |",
        f"| proposer cost (USD) | {m.proposer_cost:.4f} |",
        f"| tokens per valid environment | {_fmt(m.tokens_per_valid_environment, 6)} |",
        f"| cost per valid environment (USD) | {_fmt(m.cost_per_valid_environment)} |",
        f"| solver attempts on the pool | {m.solver_attempts} |",
        f"| solver mean reward, pool | {_fmt(m.solver_mean_reward_pool)} |",
        *(
            [
                f"| solver mean reward, held-out | {_fmt(m.solver_mean_reward_heldout)} |",
                f"| held-out success [95% interval] | {m.heldout.shown()} |",
            ]
            if m.heldout_configured and m.heldout is not None
            else []
        ),
        f"| pool active / retired | {m.pool_active} / {m.pool_retired} |",
        f"| pool tasks measured but undecided (too few valid samples; kept) "
        f"| {len(m.pool_undecided)} |",
        "",
        f"Infrastructure failures (excluded from every rate, mean and reward): "
        f"{m.infrastructure_failures} candidate(s), {m.solver_infrastructure_failures} solver "
        f"attempt(s); model calls retried: {m.model_retries}",
        "",
        f"Decontamination: {m.decontamination or 'unknown'}",
        "",
        *([f"Splits: {m.splits}", ""] if m.splits else []),
        *heldout_markdown([e for e in (m.heldout_before, m.heldout) if e is not None]),
        *(
            f"Proposer on held-out briefs, {e.when} ({e.briefs} briefs x {e.samples_per_brief}, "
            f"checkpoint {e.checkpoint}): {e.shown()}\n"
            for e in (m.proposer_heldout_before, m.proposer_heldout)
            if e is not None
        ),
        "Reject reasons (rejecting stage: count): "
        + (", ".join(f"{k}: {v}" for k, v in sorted(m.reject_reasons.items())) or "none"),
        "",
        "Difficulty histogram of the active pool (solver mean reward): "
        + ", ".join(f"{k}: {v}" for k, v in m.difficulty_histogram.items()),
        "",
        *domain_markdown(m.domains),
        activity_markdown(m.agent_activity, m.grpo_groups),
        "## Training",
        "",
    ]
    if m.proposer_truncation is not None:
        lines += [f"Proposer update, episodes cut: {m.proposer_truncation.shown()}", ""]
    if m.training:
        steps = m.training.get("step_tasks") or []
        lines += [
            f"- {k}: {'n/a' if v is None else v}"
            for k, v in m.training.items()
            if k != "step_tasks"
        ]
        if steps:
            lines += ["", "Tasks per training step (the round's admitted tasks come first):", ""]
            lines += [f"- step {i}: {', '.join(tasks)}" for i, tasks in enumerate(steps, 1)]
    else:
        lines.append("- not run")
    lines += ["", "## Wall time per stage (s)", ""]
    lines += [f"- {k}: {v:.1f}" for k, v in m.stage_seconds.items()]
    if m.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in m.notes]
    if embedded:
        lines += ["", f"> {EMBEDDED_NOTE}"]
    return "\n".join(lines) + "\n"


def plotted_series(history: list[RoundMetrics]) -> dict[str, list[float | None]]:
    """Each line of rounds.png, one value per round; None where the round measured nothing
    (no candidate scored, no refresh attempt reached a verdict, no held-out set, no GRPO
    update). A series no round measured is left out."""
    series: dict[str, list[float | None]] = {
        "valid-environment rate": [m.valid_environment_rate for m in history],
        "pool active": [float(m.pool_active) for m in history],
        "pool retired": [float(m.pool_retired) for m in history],
        "solver mean reward, pool": [m.solver_mean_reward_pool for m in history],
        "solver mean reward, held-out": [
            m.solver_mean_reward_heldout if m.heldout_configured else None for m in history
        ],
        "GRPO episode reward (solver update)": [
            as_number(m.training.get("reward_mean")) for m in history
        ],
    }
    return {k: v for k, v in series.items() if any(x is not None for x in v)}


def rounds_figure(history: list[RoundMetrics]) -> Any:
    """The rounds.png figure. A missing value is NaN, which matplotlib draws as a gap with no
    marker: never as 0, which would read as a measured zero."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [m.round for m in history]
    series = plotted_series(history)
    panels = [
        ("valid-environment rate", (0, 1), {"valid-environment rate": "o"}),
        ("pool size", None, {"pool active": "o", "pool retired": "x"}),
        (
            "mean reward",
            (0, 1),
            {
                "solver mean reward, pool": "o",
                "solver mean reward, held-out": "x",
                "GRPO episode reward (solver update)": "s",
            },
        ),
    ]
    points = heldout_points(
        [(x, e) for m in history for x, e in ((0, m.heldout_before), (m.round, m.heldout))]
    )
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(17, 3.6))
    ax = axes[-1]
    if points:
        xs, rates, lows, highs = zip(*points, strict=True)
        ax.errorbar(
            xs,
            rates,
            yerr=[
                [r - lo for r, lo in zip(rates, lows, strict=True)],
                [hi - r for r, hi in zip(rates, highs, strict=True)],
            ],
            marker="o",
            capsize=4,
            label="success, 95% interval",
        )
        ax.legend(fontsize="small")
    ax.set(title="held-out success", xlabel="round (0: before round 1)", ylim=(0, 1))
    for ax, (title, ylim, lines) in zip(axes, panels, strict=False):
        for name, marker in lines.items():
            if name in series:
                values = [math.nan if v is None else v for v in series[name]]
                ax.plot(rounds, values, marker=marker, label=name)
        ax.set(title=title, xlabel="round")
        if ylim:
            ax.set_ylim(*ylim)
        if len(lines) > 1 and ax.get_lines():
            ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _plots(history: list[RoundMetrics], out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    made = []
    fig = rounds_figure(history)
    path = out / "rounds.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    made.append(path)
    last = history[-1]
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.bar(list(last.difficulty_histogram), list(last.difficulty_histogram.values()))
    ax.set(
        title=f"pool difficulty, round {last.round}", xlabel="solver mean reward", ylabel="tasks"
    )
    fig.tight_layout()
    path = out / "difficulty.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    made.append(path)
    return made


def _by_role(values: dict[str, str]) -> str:
    return " / ".join(values.get(role, "-") for role in ("proposer", "solver"))


def turn_table(history: list[RoundMetrics]) -> list[str]:
    """Did the loop turn? Per round: what the proposers submitted and the gate made of it, the
    GRPO groups that had reward variance (a gradient) per role, how far each role's update moved
    the weights, the pool, and whether the round's brief cites the previous round's rollouts."""
    lines = [
        "## Did the loop turn?",
        "",
        "| round | submitted by `submit` / autosubmitted / proposals | admitted | rejected at "
        "| GRPO groups with reward variance (proposer / solver) "
        "| weight change, L2 (proposer / solver) | pool active / retired "
        "| brief cites round N-1 | round (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in history:
        proposer = next((a for a in m.agent_activity if a.role == "proposer"), None)
        submitted = (
            "- / -"
            if proposer is None or proposer.submitted is None
            else f"{proposer.submitted - proposer.autosubmitted} / {proposer.autosubmitted}"
        )
        rejected = ", ".join(f"{k}: {v}" for k, v in sorted(m.reject_reasons.items())) or "-"
        groups = {
            g.role: f"{g.groups - g.without_reward_variance} of {g.groups}" for g in m.grpo_groups
        }
        proposer_training = m.training.get("proposer")
        changes = {
            "solver": _fmt(as_number(m.training.get("param_change_l2")), 4),
            "proposer": _fmt(
                as_number(proposer_training.get("param_change_l2"))
                if isinstance(proposer_training, dict)
                else None,
                4,
            ),
        }
        evidence = m.brief_evidence
        cites = (
            "-"
            if not evidence
            else ("yes" if evidence.get("cites_previous_round") else "no")
            + f" ({evidence.get('failures', 0)} failures from rounds "
            + f"{evidence.get('failure_rounds') or '-'})"
        )
        total = m.stage_seconds.get("round_total")
        lines.append(
            f"| {m.round} | {submitted} / {m.candidates} | {m.admitted} | {rejected} "
            f"| {_by_role(groups)} | {_by_role(changes)} | {m.pool_active} / {m.pool_retired} "
            f"| {cites} | {'-' if total is None else f'{total:.0f}'} |"
        )
    return lines


def _heldout_cell(m: RoundMetrics) -> str:
    """The run table's held-out cell: success with its interval; an older round's mean reward;
    '-' when configured but nothing was measured; 'n/a' with no held-out set."""
    if m.heldout is not None:
        return m.heldout.shown()
    return _fmt(m.solver_mean_reward_heldout) if m.heldout_configured else "n/a"


def _manifest_splits(run_dir: Path) -> str:
    """The splits line the manifest recorded when the run began ('' when it holds none)."""
    path = run_dir / "manifest.json"
    if not path.is_file():
        return ""
    return str(json.loads(path.read_text()).get("config", {}).get("splits_check") or "")


def write_run_report(run_dir: Path, *, embedded: bool = False) -> Path:
    reports = Path(run_dir) / "reports"
    history = load_history(reports)
    if not history:
        raise FileNotFoundError(f"{reports}/metrics.json: no finished round to report yet")
    plots = _plots(history, reports)
    lines = [
        f"# Run report: {Path(run_dir).name}",
        "",
        "| round | candidates | admitted | valid rate | rejects | solver pool | held-out success "
        "[95% interval] | pool active | served after training (proposer / solver) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in history:
        # Older histories name no served checkpoint: the solver update's, or why there is none.
        trained = (
            _served(m)
            if m.served
            else m.training.get("checkpoint") or m.training.get("reason") or "-"
        )
        lines.append(
            f"| {m.round} | {m.candidates} | {m.admitted} | {_fmt(m.valid_environment_rate)} "
            f"| {sum(m.reject_reasons.values())} | {_fmt(m.solver_mean_reward_pool)} "
            f"| {_heldout_cell(m)} "
            f"| {m.pool_active} | {trained} |"
        )
    before = history[0].heldout_before
    if before is not None:
        lines.insert(4, f"| before round 1 | - | - | - | - | - | {before.shown()} | - | - |")
    change = heldout_change(
        history[0].heldout_before, next((m.heldout for m in reversed(history) if m.heldout), None)
    )
    splits = _manifest_splits(Path(run_dir)) or history[-1].splits
    lines += [
        "",
        *([f"Splits: {splits}", ""] if splits else []),
        *([change, ""] if change else []),
    ]
    lines += ["", *turn_table(history)]
    total_admitted = sum(m.admitted for m in history)
    total_scored = sum(m.scored for m in history)
    lines += [
        "",
        f"Run valid-environment rate: {total_admitted}/{total_scored}"
        + (f" = {total_admitted / total_scored:.3g}" if total_scored else ""),
        "",
    ]
    warned = [(m.round, w) for m in history for w in m.warnings]
    if warned:
        lines += ["Warnings:", ""] + [f"- round {r}: {w}" for r, w in warned] + [""]
    lines += [f"![{p.stem}]({p.name})" for p in plots]
    if embedded:
        lines += ["", f"> {EMBEDDED_NOTE}"]
    path = reports / "run.md"
    path.write_text("\n".join(lines) + "\n")
    return path
