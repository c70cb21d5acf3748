"""Deployment files, validated offline: systemd-analyze, YAML structure, the Containerfile."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakestats.notify import daemon_url
from lakestatsd.config import load_service_config as load_config

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
UNIT = DEPLOY / "systemd" / "lakestatsd.service"


def unit_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here"
)
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    # verify checks that ExecStart exists: point it at a stand-in executable
    exe = tmp_path / "lakestatsd"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    unit = tmp_path / "lakestatsd.service"
    unit.write_text(UNIT.read_text().replace("/opt/lakestats/bin/lakestatsd", str(exe)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    # unknown keys are only warnings for systemd: treat any remark about our unit as failure
    remarks = [line for line in result.stderr.splitlines() if "lakestatsd.service" in line]
    assert not remarks, remarks


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here"
)
def test_systemd_unit_verifies_as_shipped(tmp_path: Path) -> None:
    """Issue 13: the unit must verify before the package is installed (no stand-in)."""
    unit = tmp_path / "lakestatsd.service"
    unit.write_text(UNIT.read_text())
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert not [line for line in result.stderr.splitlines() if "lakestatsd.service" in line]
    s = unit_settings()
    assert s["ExecStart"] == ["/usr/bin/env /opt/lakestats/bin/lakestatsd"]


def test_operations_install_steps_create_the_config_dir() -> None:
    """Issue 13: `install … /etc/lakestats/lakestatsd.toml` needs the directory first."""
    text = (REPO / "docs" / "operations.md").read_text()
    steps = text[text.index("useradd --system") :]
    assert steps.index("mkdir -p /etc/lakestats") < steps.index("/etc/lakestats/lakestatsd.toml")


def test_systemd_unit_is_hardened() -> None:
    s = unit_settings()
    assert s["Type"] == ["notify"]
    assert s["User"] == ["lakestats"] and s["Group"] == ["lakestats"]
    assert s["ProtectSystem"] == ["strict"]
    assert s["ReadWritePaths"] == ["/var/lib/lakestats"]
    assert s["StateDirectory"] == ["lakestats"]
    for key in ("NoNewPrivileges", "PrivateTmp", "PrivateDevices", "ProtectHome"):
        assert s[key] == ["yes"], key
    assert s["CapabilityBoundingSet"] == [""]
    assert "WatchdogSec" in s
    assert s["RestartPreventExitStatus"] == ["2"]  # a bad config does not flap
    # glibc arenas: measured in docs/operations.md, "Memory"
    assert "MALLOC_ARENA_MAX=2" in s["Environment"]


def load_yaml(name: str) -> list[dict[str, Any]]:
    with (DEPLOY / "kubernetes" / name).open() as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def test_kubernetes_manifests_structure(tmp_path: Path) -> None:
    deployment = next(d for d in load_yaml("deployment.yaml") if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"requests", "limits"} <= container["resources"].keys()
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert "persistentVolumeClaim" in volumes[mounts["/var/lib/lakestats"]]
    assert volumes[mounts["/etc/lakestats"]]["configMap"]["name"] == "lakestatsd-config"
    port = container["ports"][0]["containerPort"]

    (configmap,) = load_yaml("configmap.yaml")
    config_text = configmap["data"]["lakestatsd.toml"]
    toml_path = tmp_path / "lakestatsd.toml"
    toml_path.write_text(config_text)
    config = load_config(toml_path, env={})  # the shipped config must be valid
    assert config.state_dir == "/var/lib/lakestats" and config.http.port == port
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > (
        config.daemon.shutdown_timeout_s
    )

    (service,) = load_yaml("service.yaml")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] in ("http", port)
    (kustomization,) = load_yaml("kustomization.yaml")
    for resource in kustomization["resources"]:
        assert (DEPLOY / "kubernetes" / resource).is_file()


def test_containerfile() -> None:
    text = (DEPLOY / "Containerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11-slim" in text
    assert "openjdk-17-jre-headless" in text
    assert "\nUSER 10001" in text
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "lakestatsd"]' in text
    assert re.search(r"^\s+MALLOC_ARENA_MAX=2$", text, re.MULTILINE)  # ENV, as the unit
    # the image reads every format and keeps a store on S3: every extra but the developers'
    # (and iceberg's, a core dependency today)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (install,) = re.findall(r'pip install "\.\[([a-z0-9,]+)\]"', text)
    assert set(install.split(",")) == set(extras) - {"test", "bench", "iceberg"}


@pytest.mark.parametrize("name", ["local.toml", "production.toml"])
def test_example_configs_are_valid(name: str) -> None:
    path = REPO / "config" / name
    tomllib.loads(path.read_text())
    config = load_config(path, env={})
    assert config.table


def test_kubernetes_cluster_overlay(tmp_path: Path) -> None:
    """The cluster variant: a valid config pointing at a spark:// master, the driver
    advertising the pod IP on fixed ports that a headless Service exposes."""
    folder = DEPLOY / "kubernetes" / "cluster"
    with (folder / "kustomization.yaml").open() as handle:
        kustomization = yaml.safe_load(handle)
    for resource in kustomization["resources"]:
        assert (folder / resource).exists()
    for patch in kustomization["patches"]:
        assert (folder / patch["path"]).is_file()
    with (folder / "configmap.yaml").open() as handle:
        configmap = yaml.safe_load(handle)
    toml_path = tmp_path / "lakestatsd.toml"
    toml_path.write_text(configmap["data"]["lakestatsd.toml"])
    env = {"LAKESTATS_SPARK__CONF__spark_driver_host": "10.1.2.3"}
    config = load_config(toml_path, env=env)
    assert config.spark.master.startswith("spark://")
    assert config.spark.conf["spark.driver.host"] == "10.1.2.3"
    assert config.spark.conf["spark.driver.bindAddress"] == "0.0.0.0"  # noqa: S104 - in a pod
    with (folder / "deployment.yaml").open() as handle:
        deployment = yaml.safe_load(handle)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["spark-driver"] == int(config.spark.conf["spark.driver.port"])
    assert ports["spark-blockmgr"] == int(config.spark.conf["spark.blockManager.port"])
    env_names = {e["name"]: e for e in container["env"]}
    assert env_names["LAKESTATS_SPARK__CONF__spark_driver_host"]["value"] == "$(POD_IP)"
    with (folder / "driver-service.yaml").open() as handle:
        service = yaml.safe_load(handle)
    assert service["spec"]["clusterIP"] == "None"
    assert {p["targetPort"] for p in service["spec"]["ports"]} == {"spark-driver", "spark-blockmgr"}


def test_kubernetes_sharded_statefulset(tmp_path: Path) -> None:
    """The sharded variant: every pod, given its name as LAKESTATS_SHARDS__INDEX, is a
    distinct shard of the configured count, every table is kept by exactly one pod, and
    http.url names that pod's DNS name under the headless Service."""
    folder = DEPLOY / "kubernetes" / "sharded"
    with (folder / "kustomization.yaml").open() as handle:
        kustomization = yaml.safe_load(handle)
    docs = {}
    for resource in kustomization["resources"]:
        with (folder / resource).open() as handle:
            (doc,) = [d for d in yaml.safe_load_all(handle) if d]
        docs[doc["kind"]] = doc
    statefulset, service, configmap = docs["StatefulSet"], docs["Service"], docs["ConfigMap"]
    spec = statefulset["spec"]
    pod = spec["template"]["spec"]
    assert spec["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    index_env = next(e for e in container["env"] if e["name"] == "LAKESTATS_SHARDS__INDEX")
    assert index_env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/var/lib/lakestats"] in {
        t["metadata"]["name"] for t in spec["volumeClaimTemplates"]
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/lakestats"]]["configMap"]["name"] == configmap["metadata"]["name"]
    assert pod["terminationGracePeriodSeconds"] > 30

    toml_path = tmp_path / "lakestatsd.toml"
    toml_path.write_text(configmap["data"]["lakestatsd.toml"])
    kept: dict[str, int] = {}
    for ordinal in range(spec["replicas"]):
        pod_name = f"{statefulset['metadata']['name']}-{ordinal}"
        config = load_config(toml_path, env={"LAKESTATS_SHARDS__INDEX": pod_name})
        assert config.shards.count == spec["replicas"]
        assert config.shards.index == ordinal
        assert config.http.port == container["ports"][0]["containerPort"]
        for name in config.shard_plan().own:
            assert name not in kept
            kept[name] = ordinal
            # the URL a writer's notify uses for this table names this very pod
            host = daemon_url(config, name).split("//", 1)[1].split(":", 1)[0]
            assert host == f"{pod_name}.{service['metadata']['name']}"
    assert sorted(kept) == sorted(t.name for t in config.table)
