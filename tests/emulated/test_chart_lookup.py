"""The chart's NetworkPolicy, rendered cluster-aware as `helm install` and `helm upgrade` do
(Helm's own engine, its `lookup` answered by the API emulator): the webhook's HTTPS port admits
the addresses of the default/kubernetes EndpointSlices — the API server's — and no other
EndpointSlice's; `helm template` (no cluster) is tests/unit/test_chart_trust.py."""

from __future__ import annotations

import asyncio

import helm_python as helm
import yaml

from tests.chart_support import HELM_CHART, NAMESPACE, RELEASE
from tests.emulator import KubeEmulator, ResourceType

ENDPOINT_SLICES = ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")


def endpoint_slice(name: str, service: str, family: str, *addresses: str) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": family,
            "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": service}},
            "endpoints": [{"addresses": [a]} for a in addresses], "ports": [{"name": "https", "port": 6443}]}


async def render_against(emu, values: dict, tmp_path) -> dict:
    kubeconfig = tmp_path / "kubeconfig"
    emu.write_kubeconfig(str(kubeconfig))
    config = helm.Config(kubeconfig_path=str(kubeconfig), namespace=NAMESPACE)
    files = await asyncio.to_thread(config.render, HELM_CHART, values, name=RELEASE, namespace=NAMESPACE,
                                    is_install=True)
    text = files["podgang/templates/networkpolicy.yaml"]
    policy = next(d for d in yaml.safe_load_all(text) if d and d["metadata"]["name"] == f"{RELEASE}-webhook")
    return {"text": text, "https": policy["spec"]["ingress"][0]}


async def test_install_admits_the_api_servers_addresses_looked_up(tmp_path):
    async with KubeEmulator() as emu:
        emu.register(ENDPOINT_SLICES)
        emu.put(endpoint_slice("kubernetes", "kubernetes", "IPv4", "192.0.2.7", "192.0.2.8"))
        emu.put(endpoint_slice("kubernetes-v6", "kubernetes", "IPv6", "2001:db8::7"))
        emu.put(endpoint_slice("web-x1", "web", "IPv4", "10.244.0.9"))  # a Service of default that is not the API
        rendered = await render_against(emu, {"networkPolicy": {"apiserver": {"cidrs": ["198.51.100.0/24"]}}},
                                        tmp_path)
    assert rendered["https"]["from"] == [{"ipBlock": {"cidr": c}} for c in (
        "198.51.100.0/24", "192.0.2.7/32", "192.0.2.8/32", "2001:db8::7/128")]
    assert "NONE WAS KNOWN" not in rendered["text"]


async def test_lookup_turned_off_reads_nothing(tmp_path):
    async with KubeEmulator() as emu:
        emu.register(ENDPOINT_SLICES)
        emu.put(endpoint_slice("kubernetes", "kubernetes", "IPv4", "192.0.2.7"))
        rendered = await render_against(emu, {"networkPolicy": {"apiserver": {"lookup": False}}}, tmp_path)
    assert "from" not in rendered["https"] and "NONE WAS KNOWN" in rendered["text"]
