"""`make image-check`: prove the image recipe without a Docker engine.

1. Reads the Dockerfile and checks it: multi-stage, the builder's Python minor equals the runtime
   image's, every COPY source exists in the build context (and .dockerignore lets it through),
   COPY --from names a stage, the runtime stage runs no commands (no package manager, no compiler)
   and runs as a numeric non-root user, the exec-form ENTRYPOINT is the venv's karmada-agent, the
   OCI source/version labels are set and VERSION matches agent/version.py and pyproject.toml, and
   the path the deploy/ Deployment starts is one the image provides.
2. Replays the build from exactly the context Docker would send (the files .dockerignore lets
   through, tests/dockercontext.py): every stage's WORKDIR, COPY and RUN in order, each stage in a
   directory standing for its root (apt-get steps aside: the local Python stands for the base
   image's), failing on any COPY source the context or an earlier stage lacks and on any failing
   RUN. Then checks the final stage: the venv's karmada-agent runs `version` and `--help`, also
   as the copy at /bin/karmada-agent; no pip, compiler, tests or the API server emulator; the
   deploy manifests that `karmada-bootstrap register` renders are inside.

3. Reports the size of what the runtime stage adds to its base image (the files of the replayed
   final stage) and fails above RUNTIME_BUDGET_MB; the base image's published size is noted in
   the Dockerfile. The default image must not carry the `kubernetes` package (the exec-auth
   extra), and an exec-plugin kubeconfig there must be refused naming that extra.
4. Proves the image build never compiles: every runtime dependency of the built wheel, with and
   without the exec-auth extra, resolves to a binary wheel for manylinux x86_64 and aarch64
   on the runtime's Python (`pip download --only-binary=:all: --platform ...`; needs PyPI).

    python -m tests.image_check [--build-arg NAME=VALUE ...]

replays the build with those build arguments (e.g. EXTRAS=exec-auth, the variant image).

Exits 0 when everything holds; otherwise prints every failure and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests import dockercontext

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
DEPLOYMENT = REPO / "deploy" / "base" / "deployment.yaml"
VENV_PATH = "/opt/venv"
# Python minor of each Debian release, for matching distroless/debian base images.
DEBIAN_PYTHON = {"11": "3.9", "12": "3.11", "13": "3.13"}
COMMAND_TIMEOUT = 120
# What the runtime stage may add to the base image (distroless python3-debian12, about 53 MB),
# by EXTRAS: the default image's venv measures 35.4 MB (docs/benchmarks.md; the ceiling asked
# of it is 100 MB beyond the base); the opt-in exec-auth variant carries the kubernetes
# package, 187 MB.
RUNTIME_BUDGET_MB = {"": 50, "exec-auth": 200}
# The platforms the image is built for (the Dockerfile's header), as wheel platform tags: the
# manylinux tags up to Debian 12's glibc 2.36 (pip takes each as given, so each is listed).
WHEEL_PLATFORMS = {
    "linux/amd64": "x86_64",
    "linux/arm64": "aarch64",
}
MANYLINUX_TAGS = ("manylinux2014", "manylinux_2_17", "manylinux_2_28", "manylinux_2_34",
                  "manylinux_2_36")  # fmt: skip
EXTRAS_CHECKED = ("", "exec-auth")


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str
    line: int
    instructions: list[Instruction] = field(default_factory=list)


class Failures:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.messages.append(message)


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with continuation lines joined."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    logical: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        logical.append((start, buffer + stripped))
        buffer = ""
    for number, line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        args = args.strip()
        if keyword == "FROM":
            words = args.split()
            words = [w for w in words if not w.startswith("--platform")]
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else ""
            stages.append(Stage(base=words[0], name=name, line=number))
        elif not stages and keyword == "ARG":
            key, _, default = args.partition("=")
            global_args[key.strip()] = default.strip().strip('"')
        elif stages:
            stages[-1].instructions.append(Instruction(keyword, args, number))
    return global_args, stages


def python_minor_of_image(image: str) -> str | None:
    match = re.search(r"debian(\d+)", image)
    if match:
        return DEBIAN_PYTHON.get(match.group(1))
    match = re.search(r"python:?(\d+\.\d+)", image)
    return match.group(1) if match else None


def check_dockerfile(failures: Failures, expected_version: str) -> None:
    global_args, stages = parse_dockerfile(DOCKERFILE.read_text())
    failures.check(len(stages) >= 2, "Dockerfile: not multi-stage (needs a builder and a runtime)")
    if len(stages) < 2:
        return
    runtime, builders = stages[-1], stages[:-1]
    stage_names = {stage.name for stage in builders if stage.name}

    failures.check(
        global_args.get("VERSION") == expected_version,
        f"Dockerfile: ARG VERSION={global_args.get('VERSION')!r}, agent/version.py says "
        f"{expected_version!r}",
    )

    # Same Python minor in the builder (the venv's interpreter) and the runtime.
    runtime_minor = python_minor_of_image(runtime.base)
    builder_text = " ".join(i.args for stage in builders for i in stage.instructions)
    builder_minors = set(re.findall(r"python(3\.\d+)", builder_text))
    failures.check(
        runtime_minor is not None, f"Dockerfile: cannot tell the Python of {runtime.base}"
    )
    failures.check(
        builder_minors == {runtime_minor},
        f"Dockerfile: builder uses Python {sorted(builder_minors)}, runtime {runtime_minor}",
    )
    for stage in builders:
        base_minor = python_minor_of_image(stage.base)
        failures.check(
            base_minor in (None, runtime_minor),
            f"Dockerfile: builder base {stage.base} has Python {base_minor}, runtime {runtime_minor}",
        )

    ignore = dockercontext.parse(DOCKERIGNORE.read_text()) if DOCKERIGNORE.exists() else []
    failures.check(DOCKERIGNORE.exists(), ".dockerignore is missing")

    for stage in stages:
        for instruction in stage.instructions:
            if instruction.keyword not in ("COPY", "ADD"):
                continue
            words = shlex.split(instruction.args)
            flags = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            sources = paths[:-1]
            source_stage = next(
                (f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None
            )
            where = f"Dockerfile:{instruction.line}"
            if source_stage is not None:
                failures.check(
                    source_stage in stage_names,
                    f"{where}: COPY --from={source_stage} names no earlier stage",
                )
                continue
            for source in sources:
                failures.check((REPO / source).exists(), f"{where}: COPY source {source} missing")
                failures.check(
                    not dockercontext.excluded(source.rstrip("/"), ignore),
                    f"{where}: COPY source {source} is excluded by .dockerignore",
                )

    keywords = [i.keyword for i in runtime.instructions]
    failures.check(
        "RUN" not in keywords,
        "Dockerfile: the runtime stage must not RUN anything (no shell, no package manager)",
    )

    users = [i.args for i in runtime.instructions if i.keyword == "USER"]
    failures.check(bool(users), "Dockerfile: runtime stage sets no USER")
    if users:
        user, _, group = users[-1].partition(":")
        failures.check(
            user.isdigit() and int(user) != 0 and (not group or (group.isdigit())),
            f"Dockerfile: USER {users[-1]!r} must be numeric and non-root (like 65532:65532)",
        )

    entrypoints = [i.args for i in runtime.instructions if i.keyword == "ENTRYPOINT"]
    failures.check(bool(entrypoints), "Dockerfile: runtime stage has no ENTRYPOINT")
    if entrypoints:
        try:
            entry = json.loads(entrypoints[-1])
        except json.JSONDecodeError:
            entry = None
        failures.check(
            isinstance(entry, list) and entry[:1] == [f"{VENV_PATH}/bin/karmada-agent"],
            f"Dockerfile: ENTRYPOINT {entrypoints[-1]} must be the exec form "
            f'["{VENV_PATH}/bin/karmada-agent", ...]',
        )

    labels = " ".join(i.args for i in runtime.instructions if i.keyword == "LABEL")
    for key in ("org.opencontainers.image.source", "org.opencontainers.image.version"):
        failures.check(key in labels, f"Dockerfile: runtime stage lacks LABEL {key}")

    # Paths the image provides: the venv and whatever is copied to an absolute destination.
    provided = {f"{VENV_PATH}/bin/karmada-agent"}
    for instruction in runtime.instructions:
        if instruction.keyword == "COPY":
            provided.add(shlex.split(instruction.args)[-1])
    command = deployment_command()
    failures.check(
        bool(command) and command[0] in provided,
        f"deploy/base/deployment.yaml starts {command[:1]}, which the image does not provide "
        f"({sorted(provided)})",
    )


def deployment_command() -> list[str]:
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    containers = deployment["spec"]["template"]["spec"]["containers"]
    agent = next(c for c in containers if c["name"] == "karmada-agent")
    return list(agent.get("command") or [])


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )


_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib64", "etc", "dev", "proc", "sys", "tmp", "var")


def rooted_command(command: str, rootfs: Path, interpreters: dict[str, str]) -> str:
    """A RUN command with the image's own absolute paths moved under `rootfs` and
    `python3.X` replaced by a local interpreter of that version."""

    def move(match: re.Match[str]) -> str:
        first = match.group(2)
        if first in _SYSTEM_DIRS:
            return match.group(0)
        return f"{match.group(1)}{rootfs}/{first}"

    command = re.sub(r"(^|[\s=])/([A-Za-z0-9_.-]+)", move, command)
    for name, path in interpreters.items():
        command = re.sub(rf"(?<![\w/.-]){re.escape(name)}(?![\w.])", path, command)
    return command


def local_interpreters(command: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in set(re.findall(r"(?<![\w/.-])(python3\.\d+)(?![\w.])", command)):
        here = f"python{sys.version_info.major}.{sys.version_info.minor}"
        found[name] = sys.executable if name == here else (shutil.which(name) or name)
    return found


def copy_into(source: Path, destination: Path) -> None:
    """COPY semantics: a directory's contents go into the destination directory."""
    if source.is_dir():
        shutil.copytree(source, destination, symlinks=True, dirs_exist_ok=True)
    else:
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination, follow_symlinks=False)


def local_platform() -> str:
    machine = platform.machine().lower()
    return "linux/arm64" if machine in ("aarch64", "arm64") else "linux/amd64"


def replay(
    failures: Failures, workdir: Path, build_args: dict[str, str] | None = None
) -> Path | None:
    """Build what Docker would build: the context .dockerignore lets through, then every stage's
    WORKDIR, COPY and RUN in order, each stage in a directory of its own standing for its root.
    Steps that install system packages (apt-get) are not replayed: the local Python stands for
    the base image's. A stage's ARGs reach its RUNs as environment variables, as Docker passes
    them: `build_args` overrides their defaults, and TARGETPLATFORM is this machine's.
    Returns the final stage's root, or None when the build failed."""
    given = {"TARGETPLATFORM": local_platform(), **(build_args or {})}
    patterns = dockercontext.parse(DOCKERIGNORE.read_text()) if DOCKERIGNORE.exists() else []
    context = workdir / "context"
    for relative in dockercontext.context_files(REPO, patterns):
        copy_into(REPO / relative, context / relative)
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    roots: dict[str, Path] = {}
    root = workdir
    for index, stage in enumerate(stages):
        root = workdir / f"stage-{index}"
        root.mkdir()
        cwd = "/"
        arguments: dict[str, str] = {}
        for instruction in stage.instructions:
            where = f"Dockerfile:{instruction.line}"
            if instruction.keyword == "ARG":
                key, has_default, default = instruction.args.partition("=")
                key = key.strip()
                value = default.strip().strip('"') if has_default else ""
                arguments[key] = given.get(key, value)
            elif instruction.keyword == "WORKDIR":
                cwd = posixpath.join(cwd, instruction.args)
                (root / cwd.lstrip("/")).mkdir(parents=True, exist_ok=True)
            elif instruction.keyword in ("COPY", "ADD"):
                words = shlex.split(instruction.args)
                flags = [w for w in words if w.startswith("--")]
                *sources, target = [w for w in words if not w.startswith("--")]
                source_stage = next(
                    (f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None
                )
                origin = roots.get(source_stage) if source_stage is not None else context
                if origin is None:
                    failures.check(False, f"{where}: COPY --from={source_stage}: no such stage")
                    return None
                destination = root / posixpath.join(cwd, target).lstrip("/")
                for source in sources:
                    found = origin / source.lstrip("/")
                    if not found.exists():
                        why = (
                            f"not built by stage {source_stage}"
                            if source_stage is not None
                            else "excluded by .dockerignore"
                            if (REPO / source).exists()
                            else "no such file"
                        )
                        failures.check(
                            False, f"{where}: COPY {source}: not in the build context ({why})"
                        )
                        return None
                    into = (
                        destination / found.name
                        if (target.endswith("/") and not found.is_dir())
                        else destination
                    )
                    copy_into(found, into)
            elif instruction.keyword == "RUN":
                if "apt-get" in instruction.args:
                    continue
                command = rooted_command(
                    instruction.args, root, local_interpreters(instruction.args)
                )
                done = subprocess.run(
                    ["sh", "-ec", command],
                    cwd=root / cwd.lstrip("/"),
                    capture_output=True,
                    text=True,
                    timeout=COMMAND_TIMEOUT * 3,
                    check=False,
                    env={**os.environ, **arguments, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                )
                if done.returncode != 0:
                    failures.check(
                        False,
                        f"{where}: RUN failed ({done.returncode}):\n{done.stderr[-3000:]}",
                    )
                    return None
        if stage.name:
            roots[stage.name] = root
    return root


LUA_PROBE = """
from agent.interpreter import Interpreter
job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
       "spec": {}, "status": {"state": {"phase": "Failed"}}}
print(Interpreter().interpret_health(job))
"""


EXEC_PLUGIN_PROBE = """
import asyncio, sys
from agent.kube.config import ConfigError, load_kubeconfig_dict
kubeconfig = {
    "current-context": "c",
    "clusters": [{"name": "c", "cluster": {"server": "https://api:6443"}}],
    "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                              "command": "true", "interactiveMode": "Never"}}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
}
try:
    asyncio.run(load_kubeconfig_dict(kubeconfig))
except ConfigError as exc:
    print(exc)
"""


def tree_bytes(root: Path) -> int:
    """The bytes of every file under root (symlinks count as links, as a layer stores them)."""
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            total += os.lstat(os.path.join(directory, name)).st_size
    return total


def check_size(failures: Failures, root: Path, extras: str) -> str:
    """What the runtime stage adds to its base image, against its RUNTIME_BUDGET_MB."""
    budget = RUNTIME_BUDGET_MB.get(extras)
    failures.check(budget is not None, f"no size budget for EXTRAS={extras!r}")
    budget = budget or 0
    added = tree_bytes(root) / 1e6
    venv = tree_bytes(root / VENV_PATH.lstrip("/")) / 1e6
    site = next((root / VENV_PATH.lstrip("/")).glob("lib/python3.*/site-packages"), None)
    largest = []
    if site is not None:
        sizes = sorted(
            ((tree_bytes(p) if p.is_dir() else p.stat().st_size, p.name) for p in site.iterdir()),
            reverse=True,
        )
        largest = [f"{name} {size / 1e6:.1f}" for size, name in sizes[:6]]
    failures.check(
        added <= budget,
        f"the runtime stage adds {added:.1f} MB to its base image, over the {budget} MB budget "
        f"of EXTRAS={extras!r} (largest in site-packages, MB: {', '.join(largest)})",
    )
    return (
        f"runtime stage adds {added:.1f} MB to the base image (venv {venv:.1f} MB; budget "
        f"{budget} MB for EXTRAS={extras!r}); largest, MB: {', '.join(largest)}"
    )


def check_extras(failures: Failures, root: Path, extras: str, workdir: Path) -> None:
    """The default image leaves out the exec-auth extra and names it when a kubeconfig needs it;
    the variant carries it."""
    venv = root / VENV_PATH.lstrip("/")
    site = next(venv.glob("lib/python3.*/site-packages"), None)
    if site is None:
        return
    variant = "exec-auth" in extras.split(",")
    has_kubernetes = (site / "kubernetes").exists()
    failures.check(
        has_kubernetes == variant,
        f"the image built with EXTRAS={extras!r} "
        + ("lacks" if variant else "carries")
        + " the kubernetes package",
    )
    probe = run([str(venv / "bin" / "python"), "-c", EXEC_PLUGIN_PROBE], cwd=workdir)
    if variant:
        failures.check(
            probe.returncode == 0 and "exec-auth" not in probe.stdout,
            f"an exec-plugin kubeconfig in the exec-auth image: exit {probe.returncode}, "
            f"{probe.stdout.strip()!r} {probe.stderr.strip()[-500:]!r}",
        )
    else:
        failures.check(
            probe.returncode == 0 and "karmada-pull-agent[exec-auth]" in probe.stdout,
            f"an exec-plugin kubeconfig in the default image must be refused naming the "
            f"exec-auth extra: exit {probe.returncode}, {probe.stdout.strip()!r} "
            f"{probe.stderr.strip()[-500:]!r}",
        )


def check_wheels(failures: Failures, wheel: Path, workdir: Path) -> str:
    """Every runtime dependency of `wheel`, with each extra the image may be built with,
    resolves to a binary wheel for every platform the image is built for."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    runtime_minor = python_minor_of_image(stages[-1].base) if stages else None
    python_version = runtime_minor or version
    checked = []
    for target, arch in WHEEL_PLATFORMS.items():
        platforms = [f"--platform={tag}_{arch}" for tag in MANYLINUX_TAGS]
        for extras in EXTRAS_CHECKED:
            requirement = f"{wheel}[{extras}]" if extras else str(wheel)
            destination = workdir / f"wheels-{arch}-{extras or 'default'}"
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                 *platforms, f"--python-version={python_version}", "--implementation=cp",
                 "--dest", str(destination), requirement],
                capture_output=True, text=True, timeout=COMMAND_TIMEOUT * 3, check=False,
                env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            )  # fmt: skip
            errors = [line for line in done.stderr.splitlines() if not line.startswith("WARNING:")]
            failures.check(
                done.returncode == 0,
                f"{target}{' [' + extras + ']' if extras else ''}: not every dependency has a "
                f"wheel for Python {python_version} on manylinux {arch} (the build would "
                f"compile, or fail): {' '.join(errors)[-1500:]}",
            )
            if done.returncode == 0:
                wheels = sorted(destination.glob("*.whl"))
                failures.check(
                    not list(destination.glob("*.tar.gz")) and bool(wheels),
                    f"{target}: pip download left source archives in {destination}",
                )
                checked.append(f"{target}{'[' + extras + ']' if extras else ''} {len(wheels)}")
    return "wheels for " + ", ".join(checked)


def check_image(failures: Failures, expected_version: str, root: Path, workdir: Path) -> None:
    """What the built image holds and does."""
    venv = root / VENV_PATH.lstrip("/")
    script = venv / "bin" / "karmada-agent"
    failures.check(script.exists(), f"the image has no {VENV_PATH}/bin/karmada-agent")
    if not script.exists():
        return
    failures.check(not (venv / "bin" / "pip").exists(), "the runtime venv must not contain pip")
    site = next(venv.glob("lib/python3.*/site-packages"), None)
    failures.check(site is not None, "the runtime venv has no site-packages")
    if site is not None:
        failures.check(
            not (site / "emulator").exists() and not (site / "agent" / "testing").exists(),
            "the image carries the API server emulator",
        )
        failures.check(not (site / "tests").exists(), "the image carries the tests")
        failures.check(
            (site / "bootstrap" / "deploy" / "base" / "deployment.yaml").exists(),
            "the image lacks the deploy manifests `karmada-bootstrap register` renders",
        )
    for compiler in ("gcc", "cc", "pip", "pip3"):
        failures.check(not any(root.glob(f"**/bin/{compiler}")), f"the image carries {compiler}")
    executables = [script]
    for copied in ("bin/karmada-agent",):
        if (root / copied).exists():
            executables.append(root / copied)
    for executable in executables:
        version = run([str(executable), "version"], cwd=workdir)
        failures.check(
            version.returncode == 0 and f'GitVersion:"v{expected_version}"' in version.stdout,
            f"{executable} version: exit {version.returncode}, output "
            f"{version.stdout.strip()!r} {version.stderr.strip()[-500:]!r}",
        )
        shown = run([str(executable), "--help"], cwd=workdir)
        failures.check(
            shown.returncode == 0 and "--cluster-name" in shown.stdout,
            f"{executable} --help: exit {shown.returncode}, {shown.stderr.strip()[-500:]!r}",
        )
    # Lua (lupa's compiled module) and the bundled customizations are in the image.
    lua = run([str(venv / "bin" / "python"), "-c", LUA_PROBE], cwd=workdir)
    failures.check(
        lua.returncode == 0 and lua.stdout.strip() == "Unhealthy",
        f"the bundled Volcano Job customization in the image: exit {lua.returncode}, "
        f"{lua.stdout.strip()!r} {lua.stderr.strip()[-500:]!r}",
    )
    invalid = run([str(script), "--cluster-name=Not_Valid"], cwd=workdir)
    failures.check(
        invalid.returncode == 1 and "--cluster-name" in invalid.stderr,
        f"an invalid flag must exit 1 naming it; got {invalid.returncode} {invalid.stderr!r}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.image_check")
    parser.add_argument(
        "--build-arg", action="append", default=[], metavar="NAME=VALUE",
        help="a build argument for the replayed build (e.g. EXTRAS=exec-auth)",
    )  # fmt: skip
    options = parser.parse_args(argv)
    build_args = dict(arg.partition("=")[::2] for arg in options.build_arg)
    started = time.monotonic()
    sys.path.insert(0, str(REPO))
    from agent.version import VERSION

    failures = Failures()
    project_version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("version")
    failures.check(
        project_version in (None, VERSION),
        f"pyproject.toml version {project_version!r} != agent/version.py {VERSION!r}",
    )
    check_dockerfile(failures, VERSION)
    reports: list[str] = []
    with tempfile.TemporaryDirectory(prefix="image-check-") as tmp:
        root = replay(failures, Path(tmp), build_args)
        if root is not None:
            check_image(failures, VERSION, root, Path(tmp))
            check_extras(failures, root, build_args.get("EXTRAS", ""), Path(tmp))
            reports.append(check_size(failures, root, build_args.get("EXTRAS", "")))
            wheel = next(Path(tmp).glob("stage-*/wheels/karmada_pull_agent-*.whl"), None)
            failures.check(wheel is not None, "the replayed build made no karmada_pull_agent wheel")
            if wheel is not None:
                reports.append(check_wheels(failures, wheel, Path(tmp)))
    for line in reports:
        print(f"image-check: {line}")
    elapsed = time.monotonic() - started
    if failures.messages:
        print(f"image-check: {len(failures.messages)} problem(s):", file=sys.stderr)
        for message in failures.messages:
            print(f"  - {message}", file=sys.stderr)
        return 1
    print(f"image-check: ok (Dockerfile, build replayed from its context, image) in {elapsed:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
