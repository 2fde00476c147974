"""Throwaway certificates for TLS tests, made at test time (``cryptography``).

:func:`make_pki` writes a CA, a server certificate for ``localhost`` and
``127.0.0.1`` signed by it, a client certificate signed by it, and a client
certificate signed by another CA the node does not know, each as PEM files.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pki:
    """The PEM files of a test's certificates."""

    ca: Path  # the CA that signs the server's and the client's certificates
    server_cert: Path
    server_key: Path
    client_cert: Path  # signed by ``ca``
    client_key: Path
    stranger_cert: Path  # a client certificate signed by another CA
    stranger_key: Path

    def client_context(self, *, cert: bool = False, stranger: bool = False):
        """A client context that verifies the node against :attr:`ca`,
        presenting the client certificate (``cert``) or the stranger's."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert:
            context.load_cert_chain(self.client_cert, self.client_key)
        elif stranger:
            context.load_cert_chain(self.stranger_cert, self.stranger_key)
        return context


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _builder(subject: str, issuer: x509.Name, key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
    )


def _ca(common: str):
    key = _key()
    cert = (
        _builder(common, _name(common), key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(common: str, ca_cert, ca_key, *, server: bool):
    key = _key()
    builder = _builder(common, ca_cert.subject, key).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), True
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def _write(directory: Path, name: str, cert, key=None) -> tuple[Path, Path | None]:
    cert_path = directory / f"{name}.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is None:
        return cert_path, None
    key_path = directory / f"{name}.key"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def make_pki(directory: Path) -> Pki:
    """Make the certificates under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _ca("narad test CA")
    server_cert, server_key = _leaf("localhost", ca_cert, ca_key, server=True)
    client_cert, client_key = _leaf("client", ca_cert, ca_key, server=False)
    other_cert, other_key = _ca("another CA")
    stranger_cert, stranger_key = _leaf("stranger", other_cert, other_key, server=False)
    ca, _ = _write(directory, "ca", ca_cert)
    server = _write(directory, "server", server_cert, server_key)
    client = _write(directory, "client", client_cert, client_key)
    stranger = _write(directory, "stranger", stranger_cert, stranger_key)
    return Pki(ca, *server, *client, *stranger)  # type: ignore[arg-type]
