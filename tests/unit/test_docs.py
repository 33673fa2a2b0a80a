"""The documentation: the reference pages are what ``docs/generate.py`` makes of their sources
today (``make reference`` writes them), they cover every kind, flag, chart value, metric and key,
the offline commands the pages show print what the pages say, and the site builds strictly."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from podgang import cli, kinds
from podgang.metrics import GrouperMetrics, WebhookMetrics
from tests.metrics_support import exported_series
from tests.paths import ROOT

_spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)
REFERENCE = ROOT / "docs" / "reference"


@pytest.fixture(autouse=True)
def built_in_defaults(monkeypatch):
    """Flags read their defaults from PODGANG_* variables: the pages show the built-in ones."""
    for name in [n for n in os.environ if n.startswith("PODGANG_") or n == "POD_NAMESPACE"]:
        monkeypatch.delenv(name)


def test_every_generated_page_is_what_its_source_makes_today():
    stale = [str(path.relative_to(ROOT)) for path, content in generate.pages().items()
             if not path.exists() or path.read_text() != content]
    assert not stale, f"stale generated pages (run `make reference`): {stale}"


def test_a_stale_page_is_found_and_written_again(tmp_path, monkeypatch):
    page = tmp_path / "metrics.md"
    page.write_text("# Metrics\n\nhand-edited\n")
    monkeypatch.setattr(generate, "pages", lambda: {page: "# Metrics\n\nfrom the registry\n"})
    assert generate.main(["--check"]) == 1
    assert page.read_text() == "# Metrics\n\nhand-edited\n"  # --check writes nothing
    assert generate.main([]) == 0
    assert generate.main(["--check"]) == 0
    assert page.read_text() == "# Metrics\n\nfrom the registry\n"


def test_the_kinds_page_has_every_kind_of_the_registry_with_its_rules():
    page = (REFERENCE / "workload-kinds.md").read_text()
    for kind in kinds.WORKLOADS.values():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{kind.kind}` |")), None)
        assert row is not None, f"{kind.kind} is not on the kinds page"
        assert kind.resource.group in row
        assert kind.doc.size, f"{kind.kind} has no KindDoc: say its gang size in words"
    ray = next(line for line in page.splitlines() if line.startswith("| `RayCluster` |"))
    assert "headgroup" in ray and "`suspended`" in ray  # its roles, and where KAI's grouper differs


def _scale_pattern(doc: str) -> re.Pattern:
    """``spec.replicatedJobs[<i>].replicas`` as a pattern of the fields it stands for."""
    parts = re.split(r"(<[^>]+>)", doc)
    return re.compile("".join(r"[^.\[\]]+" if part.startswith("<") else re.escape(part) for part in parts))


def test_the_kinds_page_names_the_field_scale_sets_for_every_kind_that_scales():
    """A kind sized by parts (JobSet, PyTorchJob, RayCluster …) had no field on the page: its
    fields, in words, are checked against what --scale sets on every example of that kind."""
    page = (REFERENCE / "workload-kinds.md").read_text().split("## `podgang plan --scale`")[1]
    for kind in kinds.WORKLOADS.values():
        if kind.scale_parts is not None:
            assert kind.scale_parts_doc, f"{kind.kind}: say in scale_parts_doc which fields --scale sets"
            row = next(line for line in page.splitlines() if line.startswith(f"| `{kind.kind}` |"))
            assert f"`{kind.scale_parts_doc}`" in row
    checked = set()
    for path in [*(ROOT / "examples").glob("*.yaml"), *(ROOT / "tests" / "corpus").rglob("*.yaml")]:
        for obj in yaml.safe_load_all(path.read_text()):
            kind = kinds.workload_kind(obj) if isinstance(obj, dict) else None
            if kind is None or kind.scale_parts is None:
                continue
            for field in kind.scale_parts(obj).values():
                assert _scale_pattern(kind.scale_parts_doc).fullmatch(kinds.path_text(field)), (path, field)
                checked.add(kind.kind)
    assert {"JobSet", "PyTorchJob", "MPIJob", "RayCluster"} <= checked


def test_the_plan_page_lists_every_kind_plan_reads():
    """It had left out the training, Ray and Spark kinds and the Nodes, Queues and PriorityClasses."""
    page = (ROOT / "docs" / "plan.md").read_text()
    listed = page[page.index(generate.KINDS_READ_BEGIN):page.index(generate.KINDS_READ_END)]
    for kind in [*(k.kind for k in kinds.WORKLOADS.values()), "Pod", "PodGroup", "Node", "Queue", "PriorityClass"]:
        assert f"`{kind}`" in listed, kind


def _user_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "charts" / "podgang" / "README.md", *(ROOT / "docs").rglob("*.md")]


def test_the_docs_install_podgang_into_one_namespace():
    """The chart README installed into podgang-system, the install page into podgang."""
    for page in _user_pages():
        assert "podgang-system" not in page.read_text(), page


def test_the_docs_make_no_reference_a_user_cannot_follow():
    """"seed 003" and "spec §3" name documents podgang was built from, not ones its users have."""
    for page in [*_user_pages(), ROOT / "examples" / "README.md"]:
        found = re.findall(r"\b[Ss]eeds? 0\d\d\b|§", page.read_text())
        assert not found, (page, found)


def test_the_cli_install_page_installs_what_the_package_declares():
    """Nothing said how to install the CLI and the kubectl plugin outside the development venv."""
    page = (ROOT / "docs" / "install-cli.md").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for script in project["scripts"]:
        assert f"`{script}`" in page, script
    assert f"dist/podgang-{project['version']}-py3-none-any.whl" in page
    for command in cli.PLUGIN_COMMANDS:
        assert f"kubectl podgang {command}" in page, command
    assert "install-cli.md" in (ROOT / "mkdocs.yml").read_text()


def test_the_webhook_names_the_docs_use_are_the_charts():
    """The webhook page named pods.podgang.io; the chart's are mutate-pods.podgang.io … ."""
    chart = (ROOT / "charts" / "podgang" / "templates" / "webhook-configurations.yaml").read_text()
    names = set(re.findall(r'"([a-z-]+\.podgang\.io)"', chart))
    assert "validate-pods.podgang.io" in names
    for page in _user_pages():
        used = set(re.findall(r"(?<![\w.-])([a-z-]+\.podgang\.io)(?![\w/-])", page.read_text()))
        assert used <= names, (page, used - names)


def _flags(parser):
    for action in parser._actions:
        yield from action.option_strings
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _flags(sub)


def test_the_cli_page_has_every_flag_of_every_command():
    page = (REFERENCE / "cli.md").read_text()
    for name in ("webhook", "grouper", "plan", "status", "certs"):
        parser, _run = cli.command_parser(name)
        assert f"## `podgang {name}`" in page
        missing = [flag for flag in _flags(parser) if f"`{flag}`" not in page and flag not in ("-h", "--help")]
        assert not missing, f"podgang {name}: {missing} not on the CLI page"
    assert "### `podgang certs ensure`" in page


def test_the_metrics_page_has_every_metric_each_process_exports():
    page = (REFERENCE / "metrics.md").read_text()
    listed = set(re.findall(r"`(podgang_[a-z_]+[a-z])`", page))
    for metrics in (WebhookMetrics(), GrouperMetrics()):
        for name in exported_series(metrics):
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            if family.startswith("podgang_"):
                assert family in listed, f"{family} is not on docs/reference/metrics.md"
    evictions = next(line for line in page.splitlines() if line.startswith("| `podgang_grouper_evictions_total`"))
    assert "`PodgangGangsEvicted`" in evictions  # the alert that reads it, from the chart's PrometheusRule


def test_the_keys_page_has_podgangs_keys_from_their_definitions():
    page = (REFERENCE / "keys.md").read_text()
    for key in ("podgang.io/min-member", "podgang.io/skip", "pod-group-name", "kai.scheduler/podgroup",
                "scheduling.k8s.io/group-name", "scheduling.x-k8s.io/pod-group", "ray.io/group", "podgang.io/woken-at"):
        assert f"| `{key}` |" in page, key
    undocumented = [key for key, _kind, _where, meaning in generate.keys() if not meaning]
    assert not undocumented, f"keys without a #: comment at their definition: {undocumented}"


def test_every_podgang_and_kai_key_the_code_spells_is_on_the_keys_page():
    """However its constant is named (KAI's batch-min-member was missing)."""
    page = (REFERENCE / "keys.md").read_text()
    spelled = set()
    for package in generate.KEY_SOURCES:
        for path in (ROOT / package).rglob("*.py"):
            spelled |= {node.value for node in ast.walk(ast.parse(path.read_text()))
                        if isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and re.fullmatch(r"(podgang\.io|kai\.scheduler)/[a-z0-9-]+", node.value)}
    assert "kai.scheduler/batch-min-member" in spelled
    assert [key for key in sorted(spelled) if f"| `{key}` |" not in page] == []


def test_every_chart_value_has_a_meaning_in_values_yaml_or_the_schema():
    undocumented = [key for key, _type, _default, meaning in generate.chart_values() if not meaning]
    assert not undocumented, f"chart values without a `# --` comment in values.yaml: {undocumented}"


@pytest.mark.parametrize("page", generate.pages_with_commands(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_offline_commands_a_page_shows_print_what_it_shows(page):
    for command, shown in generate.shown_commands(page.read_text()):
        assert generate.run_offline(command) == shown, f"{page.relative_to(ROOT)}: `{command}` prints otherwise " \
                                                       f"(run `make reference`)"


def test_the_site_builds_strictly(tmp_path):
    """Broken links, missing pages and pages left out of the nav fail the build."""
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "workload-kinds" / "index.html").exists()


def test_the_readme_is_short_and_points_into_the_site():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\(((?:docs|examples|charts|bench)/[^)#]*)", readme):
        assert (ROOT / target).exists(), f"README links to a missing {target}"


def test_the_examples_table_names_every_example_and_a_page_that_exists():
    table = (ROOT / "examples" / "README.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+\.yaml)` \|(.*)$", table, re.MULTILINE)}
    assert set(rows) == {p.name for p in (ROOT / "examples").glob("*.yaml")}
    for name, row in rows.items():
        pages = re.findall(r"\]\(\.\./(docs/[^)#]+)", row)
        assert pages, f"{name}: no page explains it"
        assert all((ROOT / page).exists() for page in pages), f"{name}: {pages}"
