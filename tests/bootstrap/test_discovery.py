import base64
import hashlib
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bootstrap import csr, discovery, tokens
from emulator.controllers.bootstrap_signer import detached_jws


def make_ca(cn: str = "karmada") -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def test_token_format_and_secret() -> None:
    token = tokens.generate()
    assert tokens.TOKEN_PATTERN.match(str(token))
    assert tokens.parse(str(token)) == token
    assert token.secret not in repr(token)
    with pytest.raises(tokens.TokenFormatError):
        tokens.parse("abcdef.short")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    secret = tokens.secret_manifest(token, ttl=timedelta(hours=24), now=now)
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert secret["metadata"] == {"name": f"bootstrap-token-{token.id}", "namespace": "kube-system"}
    assert secret["type"] == "bootstrap.kubernetes.io/token"
    assert data == {
        "token-id": token.id,
        "token-secret": token.secret,
        "expiration": "2026-01-02T00:00:00Z",
        "usage-bootstrap-signing": "true",
        "usage-bootstrap-authentication": "true",
        "auth-extra-groups": "system:bootstrappers:karmada:default-cluster-token",
    }
    never = tokens.secret_manifest(token, ttl=timedelta(0), now=now)
    assert "expiration" not in never["data"]
    with pytest.raises(tokens.TokenFormatError, match="system:bootstrappers"):
        tokens.secret_manifest(token, ttl=None, groups=("admins",), now=now)


def test_detached_jws_round_trip_and_tamper() -> None:
    token = tokens.parse("abcdef.0123456789abcdef")
    content = "apiVersion: v1\nclusters: []\n"
    # Signed by the emulator's bootstrap signer, an independent implementation.
    jws = detached_jws(content, token.id, token.secret)
    header_b64, payload, _sig = jws.split(".")
    assert payload == ""
    assert base64.urlsafe_b64decode(header_b64 + "==") == b'{"alg":"HS256","kid":"abcdef"}'
    discovery.verify_detached(content, jws, token)
    with pytest.raises(discovery.DiscoveryError, match="tampered"):
        discovery.verify_detached(content + " ", jws, token)
    with pytest.raises(discovery.DiscoveryError, match="tampered"):
        discovery.verify_detached(content, jws, tokens.parse("abcdef.0123456789abcdee"))
    with pytest.raises(discovery.DiscoveryError, match="another token"):
        discovery.verify_detached(content, jws, tokens.parse("zzzzzz.0123456789abcdef"))


def test_ca_pinning() -> None:
    ca, other = make_ca("a"), make_ca("b")
    cert = x509.load_pem_x509_certificate(ca)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pin = "sha256:" + hashlib.sha256(spki).hexdigest()
    assert discovery.spki_pin(ca) == pin
    assert discovery.check_pins(other + ca, {pin}) == ca
    with pytest.raises(discovery.DiscoveryError, match="matches"):
        discovery.check_pins(other, {pin})
    assert discovery.parse_pins([f"{pin.upper().replace('SHA256', 'sha256')},{pin}"]) == {pin}
    with pytest.raises(discovery.DiscoveryError, match="64 hex"):
        discovery.parse_pins(["sha256:abc"])


def test_cluster_info_kubeconfig_parsing() -> None:
    ca = make_ca()
    text = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "",
                    "cluster": {
                        "server": "https://1.2.3.4:5443",
                        "certificate-authority-data": base64.b64encode(ca).decode(),
                    },
                }
            ],
        }
    )
    info = discovery.parse_cluster_info_kubeconfig(text)
    assert info.server == "https://1.2.3.4:5443"
    assert info.ca_pem == ca
    with pytest.raises(discovery.DiscoveryError, match="exactly one cluster"):
        discovery.parse_cluster_info_kubeconfig("clusters: []")


def test_csr_subject_and_private_key_file(tmp_path: Path) -> None:
    key = csr.new_private_key()
    request = x509.load_pem_x509_csr(
        csr.certificate_request(
            key, csr.Subject("system:karmada:agent:m1", ("system:karmada:agents",))
        )
    )
    assert request.is_signature_valid
    assert (
        request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        == "system:karmada:agent:m1"
    )
    assert [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:karmada:agents"
    ]
    path = tmp_path / "key.pem"
    csr.write_private(path, key)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == key
