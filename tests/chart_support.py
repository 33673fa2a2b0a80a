"""The chart as Helm renders it, for the suite and ``docs/generate.py``: Helm v4's own engine
as a library (helm-python-sdk, no helm binary), so the manifests are the ones
``helm template`` prints, loaded refusing a key given twice."""

from __future__ import annotations

import collections

import helm_python as helm
import kubernetes_validate
import yaml

from tests.paths import ROOT

CHART = ROOT / "charts" / "podgang"
RELEASE = "podgang"
NAMESPACE = "gang-system"
K8S_VERSION = kubernetes_validate.latest_version()
CRD_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}

HELM_CHART = helm.Chart.load(CHART)
NOTES = "podgang/templates/NOTES.txt"
DEFAULT_VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


class ManifestLoader(yaml.SafeLoader):
    """YAML loading that refuses a key given twice in one mapping.

    Helm renders and lints such a manifest without a word, PyYAML keeps the last value,
    and which one a cluster sees depends on the parser: the tests treat it as a bug."""

    def construct_mapping(self, node, deep=False):
        counts = collections.Counter(self.construct_object(key, deep=True) for key, _ in node.value)
        duplicates = sorted(str(key) for key, n in counts.items() if n > 1)
        if duplicates:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {duplicates}", node.start_mark)
        return super().construct_mapping(node, deep)


def render_files(values: dict | None = None, release: str = RELEASE, namespace: str = NAMESPACE) -> dict[str, str]:
    """Helm's rendering of every template, as `helm template` does it: path -> text.

    Helm validates the values against values.schema.json first (HelmValuesError)."""
    return HELM_CHART.render(values or {}, name=release, namespace=namespace, is_install=True)


def render(values: dict | None = None, release: str = RELEASE, namespace: str = NAMESPACE) -> list[dict]:
    """The rendered Kubernetes objects (NOTES.txt left out)."""
    docs = []
    for path, text in sorted(render_files(values, release, namespace).items()):
        if path == NOTES:
            continue
        try:
            docs += [doc for doc in yaml.load_all(text, Loader=ManifestLoader) if doc is not None]
        except yaml.YAMLError as error:
            raise ValueError(f"{path} is not valid YAML: {error}") from error
    return docs


def lint(values: dict) -> dict:
    """`helm lint --strict` of the chart with these values, against the Kubernetes version
    kubernetes_validate checks."""
    return helm.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version=f"v{K8S_VERSION}")
