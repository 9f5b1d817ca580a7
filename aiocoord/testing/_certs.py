"""Client certificates for TLS servers that require them (``tls_client_auth=True``).

One client CA per test process, made with the ``openssl`` command on first use in
a temp dir the kit removes at exit; every kit server with client authentication
trusts it, so a certificate made here opens any of them, under the identity
``x509:<subject>``.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import anyio

__all__ = ["ClientCertificate", "client_ca_file", "make_client_certificate"]

_ORGANIZATION = "aiocoord-test"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_lock = threading.Lock()
_ca_dir: Path | None = None


@dataclass(frozen=True)
class ClientCertificate:
    """A client certificate signed by the kit's client CA, with its key (PEM files)."""

    subject: str
    """The subject DN as ZooKeeper records it (``CN=alice,OU=clients,O=aiocoord-test``):
    the id of ``x509`` ACL entries for this client."""
    certificate_file: Path
    key_file: Path

    def load_into(self, context: ssl.SSLContext) -> None:
        """Make ``context`` present this certificate."""
        context.load_cert_chain(self.certificate_file, self.key_file)


def _openssl(*args: str, cwd: Path) -> str:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError(
            "no `openssl` on PATH (needed for client certificates: tls_client_auth=True); "
            "install it (Debian: apt-get install openssl)"
        )
    result = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"openssl {args[0]} failed (status {result.returncode}): "
            + (result.stdout + result.stderr).strip()
        )
    return result.stdout


def _remove(directory: Path, owner: int) -> None:
    if os.getpid() == owner:  # not from a forked child
        shutil.rmtree(directory, ignore_errors=True)


def _ec_key() -> list[str]:
    return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _ca() -> Path:
    """The CA's dir, made once per process (callers hold ``_lock``)."""
    global _ca_dir
    if _ca_dir is not None and (_ca_dir / "client-ca.pem").is_file():
        return _ca_dir
    directory = Path(tempfile.mkdtemp(prefix="aiocoord-client-ca-"))
    atexit.register(_remove, directory, os.getpid())
    subject = f"/O={_ORGANIZATION}/CN=aiocoord test client CA {os.getpid()}"
    _openssl(
        "req", "-x509", *_ec_key(), "-keyout", "ca-key.pem", "-out", "client-ca.pem",
        "-subj", subject, "-days", "30",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    _ca_dir = directory
    return directory


def _make(name: str) -> ClientCertificate:
    with _lock:
        ca = _ca()
        cert, key = ca / f"{name}-cert.pem", ca / f"{name}-key.pem"
        if not cert.is_file():
            (ca / "client.ext").write_text(
                "basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=clientAuth\n"
            )
            subject = f"/O={_ORGANIZATION}/OU=clients/CN={name}"
            _openssl(
                "req", "-new", *_ec_key(), "-keyout", key.name, "-out", f"{name}.csr",
                "-subj", subject,
                cwd=ca,
            )  # fmt: skip
            _openssl(
                "x509", "-req", "-in", f"{name}.csr", "-CA", "client-ca.pem",
                "-CAkey", "ca-key.pem", "-CAcreateserial", "-days", "30",
                "-extfile", "client.ext", "-out", cert.name,
                cwd=ca,
            )  # fmt: skip
        printed = _openssl(
            "x509", "-in", cert.name, "-noout", "-subject", "-nameopt", "RFC2253", cwd=ca
        )
        return ClientCertificate(printed.strip().removeprefix("subject="), cert, key)


async def client_ca_file() -> Path:
    """The kit's client CA certificate (PEM), made on first use."""

    def made() -> Path:
        with _lock:
            return _ca() / "client-ca.pem"

    return await anyio.to_thread.run_sync(made)


async def make_client_certificate(name: str) -> ClientCertificate:
    """A certificate for ``CN=<name>,OU=clients,O=aiocoord-test`` (made once per name
    and process), signed by the CA every ``tls_client_auth=True`` server trusts."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"certificate name {name!r}: letters, digits, '.', '_' and '-' only")
    return await anyio.to_thread.run_sync(_make, name)
