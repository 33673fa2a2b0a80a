"""Serving certificates for the webhook.

  podgang certs generate --out DIR --dns-name NAME… [--ip ADDR…]
      a CA and a serving certificate as files (an existing CA in DIR is kept)
  podgang certs ensure --namespace NS --secret NAME --service SVC
                       --mutating-webhook-config NAME --validating-webhook-config NAME
      the same, kept in a Secret, published as caBundle, rotated before expiry

Every flag can also be given as a PODGANG_* environment variable.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from podgang.api import make_api_client
from podgang.certs.directory import generate
from podgang.certs.kube import EnsureError, ensure
from podgang.certs.pki import CertError
from podgang.options import add_flag


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    commands = parser.add_subparsers(dest="certs_command", metavar="ACTION", parser_class=_OneLineParser)
    commands.required = True

    gen = commands.add_parser(
        "generate",
        help="write ca.crt, ca.key, tls.crt, tls.key into a directory",
        description="Write a CA (kept when DIR already has one) and a fresh serving certificate into DIR.",
    )
    add_flag(gen, "--out", help="directory to write ca.crt, ca.key, tls.crt, tls.key into", metavar="DIR")
    add_flag(gen, "--dns-name", repeat=True, help="DNS subject alternative name (repeatable; the first is the CN)", metavar="NAME")
    add_flag(gen, "--ip", repeat=True, help="IP subject alternative name (repeatable)", metavar="ADDR")
    _validity_flags(gen)
    add_flag(gen, "--key-type", default="ec", choices=("ec", "rsa"), help="key algorithm: ec (P-256) or rsa (2048)")
    gen.set_defaults(_certs_run=_run_generate)

    ens = commands.add_parser(
        "ensure",
        help="keep the CA and serving certificate in a Secret and publish caBundle",
        description=(
            "Create or rotate the webhook's certificates in a kubernetes.io/tls Secret and patch the caBundle "
            "of the named Mutating/ValidatingWebhookConfigurations. Prints one line per action."
        ),
    )
    add_flag(ens, "--namespace", help="namespace of the Secret and the Service", metavar="NS")
    add_flag(ens, "--secret", help="name of the Secret to keep the certificates in", metavar="NAME")
    add_flag(ens, "--service", help="the webhook's Service: the leaf covers SVC.NS.svc and its short forms", metavar="SVC")
    add_webhook_config_flags(ens)
    add_flag(ens, "--kubeconfig", help="kubeconfig file (default: in-cluster config, then $KUBECONFIG or ~/.kube/config)", metavar="PATH")
    add_flag(ens, "--cluster-domain", default="cluster.local", help="cluster DNS domain for SVC.NS.svc.DOMAIN")
    _validity_flags(ens)
    add_flag(ens, "--key-type", default="ec", choices=("ec", "rsa"), help="key algorithm for new keys")
    add_flag(ens, "--request-timeout", default=10.0, type=float, help="seconds per API call")
    ens.set_defaults(_certs_run=_run_ensure)


def add_webhook_config_flags(parser: Any) -> None:
    """The configurations whose caBundle is kept current (``podgang certs ensure`` and
    ``podgang webhook --manage-certs``). Each name is read and patched only as the
    kind it is given as, so RBAC can allow each name on its own kind only."""
    add_flag(parser, "--mutating-webhook-config", default=[], repeat=True, metavar="NAME",
             help="MutatingWebhookConfiguration whose caBundle to keep current (repeatable; "
                  "needs get/patch on mutatingwebhookconfigurations/NAME)")
    add_flag(parser, "--validating-webhook-config", default=[], repeat=True, metavar="NAME",
             help="ValidatingWebhookConfiguration whose caBundle to keep current (repeatable; "
                  "needs get/patch on validatingwebhookconfigurations/NAME)")
    add_flag(parser, "--webhook-config", default=[], repeat=True, metavar="NAME",
             help="a name looked up as both a Mutating- and a ValidatingWebhookConfiguration, either may be "
                  "missing (repeatable; needs get/patch on both kinds: prefer the two flags above)")


def _validity_flags(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--days", default=365, type=int, help="validity of the serving certificate in days")
    add_flag(parser, "--ca-days", default=3650, type=int, help="validity of a new CA in days")


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    print(f"podgang certs {args.certs_command}: error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    return args._certs_run(args)


def _run_generate(args: argparse.Namespace) -> int:
    if not args.out:
        return _fail(args, "--out DIR is required", 2)
    try:
        result = generate(
            args.out, dns_names=args.dns_name, ips=args.ip, days=args.days, ca_days=args.ca_days, key_type=args.key_type
        )
    except CertError as exc:
        return _fail(args, str(exc), 2)
    for line in result.messages:
        print(line)
    return 0


def _run_ensure(args: argparse.Namespace) -> int:
    missing = [flag for flag, value in (("--namespace", args.namespace), ("--secret", args.secret), ("--service", args.service)) if not value]
    if missing:
        return _fail(args, f"{', '.join(missing)} required", 2)
    if args.days < 1 or args.ca_days < 1:
        return _fail(args, "--days and --ca-days must be at least 1", 2)
    if args.key_type not in ("ec", "rsa"):
        return _fail(args, f"--key-type {args.key_type!r}: expected ec or rsa", 2)
    return asyncio.run(_ensure(args))


async def _ensure(args: argparse.Namespace) -> int:
    try:
        api_client = await make_api_client(args.kubeconfig)
    except RuntimeError as exc:
        return _fail(args, str(exc), 1)
    async with api_client:
        try:
            bundle = await ensure(
                api_client,
                namespace=args.namespace,
                secret=args.secret,
                service=args.service,
                webhook_configs=args.webhook_config,
                mutating_configs=args.mutating_webhook_config,
                validating_configs=args.validating_webhook_config,
                days=args.days,
                ca_days=args.ca_days,
                key_type=args.key_type,
                cluster_domain=args.cluster_domain,
                request_timeout=args.request_timeout,
            )
        except EnsureError as exc:
            return _fail(args, str(exc), 1)
    for line in bundle.actions:
        print(line)
    for line in bundle.errors:
        print(f"podgang certs ensure: error: {line}", file=sys.stderr)
    return 1 if bundle.errors else 0
