"""The four domains (tools/tasks/domains.py): read from a task's tags, named by every seed, shown
in the proposer's brief, and spread over the proposer slots."""

from __future__ import annotations

from pathlib import Path

from autoenvscaling.graphs.proposer.prompts import brief_prompt
from autoenvscaling.tools.agents.brief import build_brief
from autoenvscaling.tools.tasks.domains import (
    DEFAULT_DOMAIN,
    DOMAINS,
    domain_of_tags,
    folder_domain,
    task_domain,
)
from autoenvscaling.tools.tasks.format import load_task

from .conftest import SEED_DIR, seed_tasks

GPU_TASK = SEED_DIR.parent / "gpu" / "rmsnorm-triton"


def test_the_domain_is_the_first_tag_that_names_one():
    assert DOMAINS == ("software", "professional-work", "computer-use", "kernels")
    assert domain_of_tags(["c", "kernels", "software"]) == "kernels"
    assert domain_of_tags(["professional-work"]) == "professional-work"
    # no domain named, no tags, tags of the wrong type: the default
    assert domain_of_tags(["git", "bash"]) == DEFAULT_DOMAIN == "software"
    assert domain_of_tags(None) == domain_of_tags("kernels") == "software"
    assert domain_of_tags([{"kernels": 1}, 3]) == "software"


def test_a_folder_without_a_readable_task_toml_has_no_domain(tmp_path: Path):
    assert folder_domain(tmp_path) is None
    (tmp_path / "task.toml").write_text("[metadata\ntags = ['kernels']")
    assert folder_domain(tmp_path) is None
    (tmp_path / "task.toml").write_text("[metadata]\ncategory = 'x'\n")
    assert folder_domain(tmp_path) == "software"
    (tmp_path / "task.toml").write_text("metadata = 3\n")
    assert folder_domain(tmp_path) == "software"
    (tmp_path / "task.toml").write_text("[metadata]\ntags = ['computer-use', 'x11']\n")
    assert folder_domain(tmp_path) == "computer-use"
    # a proposer's oversized task.toml is not read
    padding = "# " + "x" * 70_000 + "\n"
    (tmp_path / "task.toml").write_text("[metadata]\ntags = ['kernels']\n" + padding)
    assert folder_domain(tmp_path) is None


def test_every_seed_names_its_domain_and_kernels_has_four():
    named = {}
    for folder in seed_tasks():
        tags = load_task(folder).config.metadata.get("tags") or []
        assert any(t in DOMAINS for t in tags), f"{folder.name}: no domain in its tags {tags}"
        named[folder.name] = task_domain(load_task(folder))
        assert folder_domain(folder) == named[folder.name]
    kernels = sorted(name for name, domain in named.items() if domain == "kernels")
    assert len(kernels) >= 4, kernels
    assert {"matmul-blocked-c", "rolling-stats-python"} <= set(kernels)
    assert named["logrotate-script"] == "software"
    # the GPU example is a kernels task outside the seed pool
    assert folder_domain(GPU_TASK) == "kernels" and GPU_TASK.parent != SEED_DIR


def test_the_brief_names_all_four_domains_and_the_slots_take_turns_over_held_ones():
    brief = build_brief(None, SEED_DIR, n_examples=1)
    text = brief_prompt(brief)
    for domain in DOMAINS:
        assert f"`{domain}`" in text, domain
    held = {d.domain: d.tasks for d in brief.domains}
    assert [d.domain for d in brief.domains] == list(DOMAINS)
    assert held["kernels"] >= 4 and held["software"] >= 17
    assert sum(held.values()) == len(seed_tasks())
    aimed = [d for d in DOMAINS if held[d]]
    slots = [brief.for_slot(i, 2 * len(aimed)) for i in range(2 * len(aimed))]
    assert [s.domain for s in slots] == aimed * 2  # every held domain, twice, in turn
    for s in slots:
        assert s.focus and f"domain `{s.domain}`" in s.focus
        category = s.focus.split("category `")[1].rstrip("`")
        assert next(c for c in brief.categories if c.category == category).domain == s.domain
    # a domain's second slot aims at another of its categories where it has several
    software = [s.focus.split("category")[1] for s in slots if s.domain == "software" and s.focus]
    assert len(software) == 2 and software[0] != software[1]
    # the focus reaches the prompt
    assert "domain `kernels`" in brief_prompt(next(s for s in slots if s.domain == "kernels"))
