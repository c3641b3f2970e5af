"""`make deploy-check`: the Kubernetes manifests rendered and validated offline, the image linted.

Every exception is written down.

1. Each overlay of `deploy/kubernetes/overlays/` is rendered with `kubectl kustomize`.
2. Each object is validated: Kubernetes' own kinds against the Kubernetes API's schemas
   (`kubernetes-validate`, strict: an unknown field is an error), the RayCluster against the
   OpenAPI schema of KubeRay's CRD (`deploy/kubernetes/crds/`, from KubeRay's release), strictly
   too: a field the CRD does not have would be dropped by the API server without a word.
3. The rendered manifests, with the pods KubeRay will make of the RayCluster, are scanned by
   checkov (policy), its skipped checks listed with why in `deploy/kubernetes/.checkov.yaml`.
4. The Dockerfile is linted by hadolint (its exceptions, if any, in `.hadolint.yaml`).

Runs in `.venv-deploy` (deploy/tools.lock): checkov's pins cannot share Baton's environment.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES = ROOT / "deploy" / "kubernetes"
CRDS = KUBERNETES / "crds"
# The Kubernetes version whose API the manifests are checked against (KubeRay 1.7 supports it).
KUBERNETES_VERSION = "1.33.0"


def render(overlay: Path) -> list[dict[str, Any]]:
    """The overlay's objects, as `kubectl kustomize` renders them."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        sys.exit("kubectl is needed to render the manifests (kubectl kustomize): install kubectl")
    done = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"{overlay}: kubectl kustomize failed:\n{done.stderr}")
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the OpenAPI schema of each CRD kept in `crds/`."""
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schema = version["schema"]["openAPIV3Schema"]
                schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Fields of `value` its structural schema does not have (the API server would drop them)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                yield from unknown_fields(item, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                yield from unknown_fields(item, extra, f"{path}.{key}")
            elif properties is not None and key not in ("apiVersion", "kind", "metadata"):
                yield f"{path}.{key}"
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], f"{path}[{i}]")


def validate(obj: dict[str, Any], crds: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """What is wrong with one rendered object (nothing: an empty list)."""
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    schema = crds.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if schema is not None:
        problems = [
            f"{name}: {'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in jsonschema.Draft7Validator(schema).iter_errors(obj)
        ]
        problems += [f"{name}: unknown field {f}" for f in unknown_fields(obj, schema)]
        return problems
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{name}: {'.'.join(map(str, exc.path)) or '(root)'}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{name}: no schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    return []


def ray_pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods KubeRay makes of a RayCluster (its head's and each worker group's template).

    checkov knows Kubernetes' own workloads, not KubeRay's: it scans these in their place.
    """
    if obj.get("kind") != "RayCluster":
        return []
    spec, cluster = obj["spec"], obj["metadata"]["name"]
    groups = [("head", spec["headGroupSpec"])]
    groups += [(g["groupName"], g) for g in spec.get("workerGroupSpecs", [])]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{cluster}-{group}",
                "namespace": obj["metadata"].get("namespace", "default"),
                **(g["template"].get("metadata") or {}),
            },
            "spec": g["template"]["spec"],
        }
        for group, g in groups
    ]


def checkov(rendered: Path) -> bool:
    """Checkov's Kubernetes policies over the rendered manifests (its config lists the skips)."""
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "checkov"),
            "--config-file", str(KUBERNETES / ".checkov.yaml"),
            "--directory", str(rendered),
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    print(done.stdout[-4000:] if done.returncode else done.stdout.strip().splitlines()[-1:][0])
    return done.returncode == 0


def hadolint() -> bool:
    """The Dockerfile, linted."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "hadolint"), str(ROOT / "Dockerfile")],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    print(f"hadolint Dockerfile: {'ok' if done.returncode == 0 else 'failed'}")
    if done.returncode:
        print(done.stdout + done.stderr)
    return done.returncode == 0


def main() -> int:
    """Check every overlay and the Dockerfile; 1 if anything failed."""
    crds = crd_schemas()
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        for overlay in sorted((KUBERNETES / "overlays").iterdir()):
            objects = render(overlay)
            problems = [p for obj in objects for p in validate(obj, crds)]
            kinds = ", ".join(sorted({o["kind"] for o in objects}))
            print(f"{overlay.relative_to(ROOT)}: {len(objects)} objects ({kinds})")
            for problem in problems:
                print(f"  ✗ {problem}")
            failed |= bool(problems)
            scanned = objects + [pod for obj in objects for pod in ray_pods(obj)]
            (Path(folder) / f"{overlay.name}.yaml").write_text(yaml.safe_dump_all(scanned))
        failed |= not checkov(Path(folder))
    failed |= not hadolint()
    print("deploy-check: failed" if failed else "deploy-check: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
