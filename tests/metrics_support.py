"""What the processes really export, read from their metric registries (not from a
hand-made list), for the metrics and dashboard tests."""

from __future__ import annotations

from podgang.metrics import GrouperMetrics, ProcessMetrics, WebhookMetrics


def exported_series(metrics: ProcessMetrics) -> dict[str, frozenset[str]]:
    """Every series name ``metrics`` exports -> its label names. A labelled metric
    shows no series until it has a child, so each one gets a child first."""
    for collector in list(metrics.registry._collector_to_names):  # the registry's metric objects
        labelnames = getattr(collector, "_labelnames", ())
        if labelnames:
            collector.labels(*("x" for _ in labelnames))
    series: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in series.items()}


def all_exported_series() -> dict[str, frozenset[str]]:
    """The union over both processes (a name both export has the same labels: test_metrics)."""
    return {**exported_series(WebhookMetrics()), **exported_series(GrouperMetrics())}
