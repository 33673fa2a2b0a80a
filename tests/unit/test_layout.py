"""The structure the architecture promises (docs/architecture.md), checked on the
source itself: imports at the top of modules, no import cycles, dependencies
pointing one way (processes → rules → objects), and one place (a module, or KAI's
package) that spells each scheduler's names."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from podgang import kinds
from tests.paths import ROOT

#: installed package -> folder (pyproject's package-dir)
PACKAGES = {"podgang": "podgang", "podgang.webhook": "webhook", "podgang.grouper": "grouper",
            "podgang.certs": "certs"}
#: the pure layers: no I/O library, and nothing from a process
PURE = ("podgang.objects", "podgang.rules", "podgang.gang", "podgang.kinds", "podgang.rollouts", "podgang.settings",
        "podgang.backends", "podgang.feasibility", "podgang.nodes", "podgang.quantities")
PROCESSES = ("podgang.webhook", "podgang.grouper", "podgang.certs", "podgang.plan", "podgang.api",
             "podgang.events", "podgang.fence", "podgang.metrics")
IO_LIBRARIES = ("aiohttp", "kubernetes_asyncio", "prometheus_client", "cryptography")
#: what only the modules of podgang/backends/kai/ may spell: KAI's API group and its pod keys
KAI_NAMES = re.compile(r"scheduling\.run\.ai|pod-group-name|kai\.scheduler/")


def modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in relative.parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


MODULES = modules()


def imports(tree: ast.Module, name: str, path: Path) -> set[str]:
    """The podgang modules ``name`` imports at its top level."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [node.module])
            for alias in node.names:  # `from package import module` depends on the module
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {m for m in found if m in MODULES}


def nested_imports(tree: ast.Module) -> list[int]:
    """Lines of imports inside functions or classes (``if TYPE_CHECKING:`` blocks aside)."""
    lines = []
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines += [n.lineno for n in ast.walk(top) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return lines


TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}
GRAPH = {name: imports(tree, name, MODULES[name]) - {name} for name, tree in TREES.items()}


def test_the_process_packages_are_found():
    assert {"podgang.webhook.server", "podgang.grouper.controller", "podgang.certs.pki",
            "podgang.backends.kai", "podgang.kinds"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_are_at_the_top_of_the_module(name):
    assert nested_imports(TREES[name]) == [], f"{MODULES[name]}: imports inside functions or classes"


def test_there_are_no_import_cycles():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith(PURE)))
def test_the_pure_layers_import_no_process_and_no_io_library(name):
    tree = TREES[name]
    libraries = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    libraries |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
    assert not libraries & set(IO_LIBRARIES), f"{name} imports an I/O library"
    assert not {m for m in GRAPH[name] if m.startswith(PROCESSES)}, f"{name} imports a process"


#: the layers docs/architecture.md draws, top first: a module imports only its own layer and those below
LAYERS = (
    ("processes", ("podgang.webhook", "podgang.grouper", "podgang.certs", "podgang.cli", "podgang.plan",
                   "podgang.plan_cli", "podgang.plan_codes", "podgang.status", "podgang.status_cli")),
    ("process plumbing", ("podgang.api", "podgang.discovery", "podgang.events", "podgang.fence", "podgang.metrics",
                          "podgang.options", "podgang.logs", "podgang.manifests", "podgang.declarations")),
    ("the gang model", ("podgang.gang",)),
    ("rules", ("podgang.rules", "podgang.feasibility")),
    ("what the rules know", ("podgang.backends", "podgang.kinds", "podgang.rollouts", "podgang.nodes",
                             "podgang.settings", "podgang.quantities")),
    ("objects", ("podgang.objects", "podgang")),
)


def layer_of(name: str) -> int:
    """The layer of a module: the one whose prefix is the longest that names it."""
    found = [(len(prefix), i) for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
             if name == prefix or name.startswith(prefix + ".")]
    assert found, f"{name} is in no layer of docs/architecture.md"
    return max(found)[1]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_nothing_imports_a_layer_above_its_own(name):
    above = sorted(m for m in GRAPH[name] if layer_of(m) < layer_of(name))
    assert not above, f"{name} ({LAYERS[layer_of(name)][0]}) imports {above}, from a layer above it"


def test_only_the_kai_modules_spell_kais_group_and_keys():
    spelling = sorted(name for name, path in MODULES.items() if KAI_NAMES.search(path.read_text()))
    assert spelling and all(name == "podgang.backends.kai" or name.startswith("podgang.backends.kai.")
                            for name in spelling), spelling


def test_the_wheel_holds_every_module(tmp_path):
    """What the image installs: a wheel built from pyproject.toml, not the editable
    install the suite runs from (which finds every folder anyway)."""
    source = tmp_path / "source"  # a clean copy: no build/ folder left by an earlier build
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in PACKAGES.values():
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("podgang-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    missing = sorted(m for m in MODULES if f"{m.replace('.', '/')}.py" not in names
                     and f"{m.replace('.', '/')}/__init__.py" not in names)
    assert missing == [], f"the wheel lacks {missing}"


#: the most lines a module of the kinds and rules packages may have: one that outgrows it is split
PACKAGE_MODULE_LINES = 700


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_product_module_is_over_700_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= PACKAGE_MODULE_LINES, f"{MODULES[name]}: {lines} lines; split it along its concerns"


#: the rules package's modules, each importing only those before it (docs/architecture.md)
RULES_ORDER = ("names", "scope", "owners", "results", "durations", "gpu", "pins", "membership", "trees", "roles",
               "sizes", "shared", "gangs")


def test_the_rules_modules_are_the_ones_the_architecture_lists():
    assert sorted(m for m in MODULES if m.startswith("podgang.rules.")) == sorted(f"podgang.rules.{m}"
                                                                                  for m in RULES_ORDER)


@pytest.mark.parametrize("position,name", list(enumerate(RULES_ORDER)))
def test_a_rules_module_imports_only_the_ones_before_it(position, name):
    found = {m for m in GRAPH[f"podgang.rules.{name}"] if m.startswith("podgang.rules")}
    allowed = {f"podgang.rules.{m}" for m in RULES_ORDER[:position]}
    assert found <= allowed, f"podgang.rules.{name} imports {sorted(found - allowed)}"


#: what each module of the kinds package may import of the package: the model, and for a
#: TrainJob the JobSet it is made into; never the hub (``__init__``), which imports them all
KINDS_IMPORTS = {"podgang.kinds.model": set(), "podgang.kinds.trainjob": {"podgang.kinds.model", "podgang.kinds.jobset"}}


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith("podgang.kinds.")))
def test_a_kinds_family_imports_the_model_not_another_family(name):
    found = {m for m in GRAPH[name] if m == "podgang.kinds" or m.startswith("podgang.kinds.")}
    assert found <= KINDS_IMPORTS.get(name, {"podgang.kinds.model"}), f"{name} imports {sorted(found)}"


def test_the_hub_is_keyed_by_each_entrys_api_group_and_kind():
    """The hub's rows are written by hand: each must name its entry's own group and kind, and no
    kind name may come twice (``WORKLOADS`` and the bare-name lookups are by kind name)."""
    assert list(kinds.HUB) == [(entry.resource.group, entry.kind) for entry in kinds.HUB.values()]
    assert len(kinds.WORKLOADS) == len(kinds.HUB), "two API groups share a kind name"


#: the suite's tiers (tests/conftest.py marks each test by its folder)
TEST_TIERS = ("unit", "emulated", "real")


def test_the_benches_and_the_docs_import_the_test_kit_never_a_test_module():
    """``bench/`` and ``docs/generate.py`` share the suite's kit (the API emulator, the real
    clusters, the chart's rendering), never a test module: running a bench collects no test."""
    users = sorted((ROOT / "bench").rglob("*.py")) + [ROOT / "docs" / "generate.py"]
    for path in users:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                parts = name.split(".")
                assert not (parts[0] == "tests" and len(parts) > 1 and (parts[1] in TEST_TIERS or
                                                                        parts[1].startswith("test_"))), \
                    f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"


def test_every_test_module_is_in_a_tier_folder():
    loose = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert not loose, f"tests/{loose[0]}: move it into tests/{{{','.join(TEST_TIERS)}}}/"
    for tier in TEST_TIERS:
        assert list((ROOT / "tests" / tier).glob("test_*.py")), tier
