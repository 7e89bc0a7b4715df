"""deploy/ and the Dockerfile, validated.

- Kubernetes manifests against the Kubernetes JSON schemas that the kubernetes-validate package
  ships (strict: unknown fields fail), with the network blocked; the ServiceMonitor (a CRD,
  not in those schemas) structurally.
- The systemd unit with `systemd-analyze verify` and `security --offline`, Prometheus rules and
  the dashboard's queries with `promtool`: where those binaries are installed, else skipped
  (under CI=true, which installs them, missing binaries fail).
- Always: the files parse, agree with each other and with the daemon's contract (metric names,
  port, paths, grace period, non-root user), and carry no credentials.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
SYSTEMD = DEPLOY / "systemd"
ALERTS = DEPLOY / "prometheus" / "paimond-alerts.yaml"
ALERT_TESTS = DEPLOY / "prometheus" / "paimond-alerts.test.yaml"
DASHBOARD = DEPLOY / "grafana" / "paimond-dashboard.json"

# The daemon's metrics (daemon/metrics.py): the only names deploy/ may query.
COUNTERS = {
    "paimond_jobs_started_total", "paimond_jobs_finished_total", "paimond_read_bytes_total",
    "paimond_written_bytes_total", "paimond_read_rows_total", "paimond_written_rows_total",
    "paimond_job_failures_total", "paimond_commit_conflicts_total", "paimond_commit_retries_total",
    "paimond_dv_rows_superseded_total", "paimond_lookup_cache_files_total",
    "paimond_job_seconds_total",
}
HISTOGRAMS = {"paimond_job_duration_seconds"}
GAUGES = {
    "paimond_quarantined_tables", "paimond_table_quarantined", "paimond_table_level0_files",
    "paimond_table_max_sorted_runs", "paimond_table_compaction_trigger",
    "paimond_table_stop_trigger", "paimond_table_compaction_debt_bytes", "paimond_table_snapshots",
    "paimond_table_manifest_files", "paimond_table_dv_cardinality",
    "paimond_seconds_since_last_success", "paimond_last_success_timestamp_seconds",
    "paimond_up", "paimond_table_small_files",
    "paimond_table_health", "paimond_table_stale_index_files",
    "paimond_table_buckets_missing_vectors", "paimond_table_level0_lag_seconds",
    "paimond_table_changelog_latency_seconds", "paimond_table_deleted_row_ratio",
    "paimond_table_postpone_rows", "paimond_table_postpone_age_seconds",
}
METRICS = COUNTERS | HISTOGRAMS | GAUGES
SERIES = METRICS | {h + suffix for h in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")}
METRIC_NAME = re.compile(r"paimond_[a-z0-9_]+")
PORT = 9181
CONTRACT_SECTIONS = ("warehouses", "tables", "jobs", "limits", "http", "log", "lease", "shutdown")
JOBS = ("rebuild_dv", "compact", "rewrite_index", "expire_partitions", "tags", "expire_consumers",
        "expire", "merge_manifests", "remove_orphans")


def metric_names(expr: str) -> set[str]:
    return set(METRIC_NAME.findall(expr))


def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def k8s_docs() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, doc) for p in sorted(K8S.glob("*.yaml")) if p.name != "kustomization.yaml"
            for doc in load_yaml_docs(p)]


def k8s_object(kind: str) -> dict[str, Any]:
    (found,) = [doc for _, doc in k8s_docs() if doc["kind"] == kind]
    return found


def configmap_toml() -> str:
    return str(k8s_object("ConfigMap")["data"]["paimond.toml"])


def systemd_toml() -> str:
    return (SYSTEMD / "paimond.toml").read_text()


def configmap_settings() -> dict[str, Any]:
    return tomllib.loads(configmap_toml())


def systemd_settings() -> dict[str, Any]:
    return tomllib.loads(systemd_toml())


EXAMPLE_CONFIGS = pytest.mark.parametrize("example", [configmap_toml, systemd_toml],
                                          ids=["kubernetes", "systemd"])


def pod_spec() -> dict[str, Any]:
    return k8s_object("Deployment")["spec"]["template"]["spec"]


def container() -> dict[str, Any]:
    (only,) = pod_spec()["containers"]
    return only


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema validation must need no network: any outbound connection fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


# --- Kubernetes ---------------------------------------------------------------------------

def test_kustomization_lists_every_manifest_but_the_example_secrets() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secrets.example.yaml"}
    assert sorted(kustomization["resources"]) == sorted(manifests)
    kinds = {doc["kind"] for name, doc in k8s_docs() if name in manifests}
    assert kinds == {"ConfigMap", "Deployment", "Service", "ServiceMonitor", "PodDisruptionBudget"}


def test_manifests_are_namespace_agnostic() -> None:
    assert "namespace" not in yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for name, doc in k8s_docs():
        assert "namespace" not in doc["metadata"], name
        assert "namespaceSelector" not in doc.get("spec", {}), name


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("version", ["1.28", "latest"])
def test_manifests_validate_against_kubernetes_schemas(version: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    target = kubernetes_validate.latest_version() if version == "latest" else version
    validated = []
    for _, doc in k8s_docs():
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: checked by test_servicemonitor_structure
        kubernetes_validate.validate(doc, target, strict=True)
        validated.append(doc["kind"])
    assert sorted(validated) == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Secret",
                                 "Service"]


@pytest.mark.usefixtures("no_network")
def test_schema_validation_rejects_unknown_fields_and_wrong_types() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    from kubernetes_validate.utils import ValidationError

    typo = k8s_object("Deployment")
    typo["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(typo, "1.28", strict=True)
    wrong_type = k8s_object("Deployment")
    wrong_type["spec"]["replicas"] = "two"
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(wrong_type, "1.28", strict=True)


def test_servicemonitor_structure() -> None:
    monitor = k8s_object("ServiceMonitor")
    service = k8s_object("Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(monitor["spec"]) <= {"selector", "endpoints", "jobLabel", "targetLabels", "podTargetLabels",
                                    "sampleLimit"}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert set(endpoint) <= {"port", "path", "scheme", "interval", "scrapeTimeout", "honorLabels",
                             "relabelings", "metricRelabelings"}
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    duration = re.compile(r"^[0-9]+(ms|s|m|h)$")
    assert duration.match(endpoint["interval"]) and duration.match(endpoint["scrapeTimeout"])


def test_deployment_runs_the_daemon_hardened() -> None:
    spec, main = pod_spec(), container()
    assert main["image"] == f"paimond:{project_version()}"
    assert main["args"] == ["run", "--config", "/etc/paimond/paimond.toml"]
    pod_security, security = spec["securityContext"], main["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] != 0
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"] and "add" not in security["capabilities"]
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    # PAIMOND_* variables are config overrides: no service links such as PAIMOND_SERVICE_HOST.
    assert spec["enableServiceLinks"] is False
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(main["resources"][kind]), kind
    assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert 1 <= k8s_object("Deployment")["spec"]["replicas"] <= 2


def test_deployment_writes_only_to_emptydirs_tmp_and_the_lookup_cache() -> None:
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    mounts = {m["mountPath"]: m for m in container()["volumeMounts"]}
    writable = {path for path, m in mounts.items() if not m.get("readOnly")}
    assert writable == {"/tmp", "/var/cache/paimond"}
    for path in writable:
        assert "emptyDir" in volumes[mounts[path]["name"]]
    env = {e["name"]: e for e in container()["env"]}
    assert env["TMPDIR"]["value"] == "/tmp"
    cache = configmap_settings()["lookup_cache"]
    assert cache["directory"].startswith("/var/cache/paimond/")
    limit = volumes[mounts["/var/cache/paimond"]["name"]]["emptyDir"]["sizeLimit"]
    assert cache["max_size_mb"] < int(limit.removesuffix("Gi")) * 1024


def test_deployment_takes_secrets_from_secret_references_only() -> None:
    env = {e["name"]: e for e in container()["env"]}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[name]["valueFrom"]["secretKeyRef"]["key"] == name
    for name, entry in env.items():
        if re.search(r"KEY|SECRET|TOKEN|PASSWORD", name):
            assert "value" not in entry, name
    settings = configmap_settings()
    token_path = PurePosixPath(settings["http"]["trigger_token_file"])
    (mount,) = [m for m in container()["volumeMounts"] if m["mountPath"] == str(token_path.parent)]
    volume = {v["name"]: v for v in pod_spec()["volumes"]}[mount["name"]]
    assert mount["readOnly"] is True
    assert token_path.name in {item["path"] for item in volume["secret"]["items"]}


def test_deployment_agrees_with_its_config_and_service() -> None:
    settings = configmap_settings()
    spec, main = pod_spec(), container()
    # SIGKILL comes terminationGracePeriodSeconds after SIGTERM: leave room past grace_s.
    assert spec["terminationGracePeriodSeconds"] >= settings["shutdown"]["grace_s"] + 15
    assert settings["http"]["port"] == PORT
    (port,) = main["ports"]
    assert (port["name"], port["containerPort"]) == ("http-metrics", PORT)
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"]["port"] == "http-metrics"
    config_mount = next(m for m in main["volumeMounts"] if m["mountPath"] == "/etc/paimond")
    volume = {v["name"]: v for v in spec["volumes"]}[config_mount["name"]]
    assert volume["configMap"]["name"] == k8s_object("ConfigMap")["metadata"]["name"]
    for v in spec["volumes"]:
        if "secret" in v:
            assert v["secret"]["secretName"] in {d["metadata"]["name"] for d in load_yaml_docs(
                K8S / "secrets.example.yaml")}
    service = k8s_object("Service")
    (service_port,) = service["spec"]["ports"]
    assert (service_port["name"], service_port["port"], service_port["targetPort"]) == (
        "http-metrics", PORT, "http-metrics")
    pod_labels = k8s_object("Deployment")["spec"]["template"]["metadata"]["labels"].items()
    assert k8s_object("Deployment")["spec"]["selector"]["matchLabels"].items() <= pod_labels
    assert service["spec"]["selector"].items() <= pod_labels
    assert k8s_object("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= pod_labels


@EXAMPLE_CONFIGS
def test_example_configs_follow_the_contract_without_credentials(example: Any) -> None:
    config = tomllib.loads(example())
    assert set(CONTRACT_SECTIONS) <= set(config)
    assert set(config["jobs"]) == set(JOBS)
    assert config["warehouses"] and all("uri" in w for w in config["warehouses"])

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                assert key == "trigger_token_file" or not re.search(
                    r"secret|password|access_key|session_token|token", key, re.I), f"{path}.{key}"
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")
        else:
            assert not re.search(r"AKIA[0-9A-Z]{12}", str(node)), path

    walk(config, "")


@EXAMPLE_CONFIGS
def test_example_configs_load_with_the_daemons_loader(example: Any, tmp_path: Path) -> None:
    from paimond.config.settings import load_settings
    from paimond.maintenance.jobs import ROUTINE

    path = tmp_path / "paimond.toml"
    path.write_text(example())
    config = tomllib.loads(example())
    # The token file exists only where deployed; the token's environment variable stands in.
    loaded = load_settings(str(path), env={"PAIMOND_TRIGGER_TOKEN": "t"}, jobs=ROUTINE)
    assert loaded.http_port == config["http"]["port"] == PORT
    assert loaded.grace_s == config["shutdown"]["grace_s"]
    assert [w.uri for w in loaded.warehouses] == [w["uri"] for w in config["warehouses"]]
    assert all(loaded.job(name).enabled for name in JOBS)


def test_deploy_metric_names_are_the_daemons() -> None:
    from prometheus_client import CollectorRegistry

    from paimond.daemon.metrics import Metrics

    registry = CollectorRegistry()
    Metrics(registry)
    exported = {f.name + "_total" if f.type == "counter" else f.name for f in registry.collect()}
    # A metric added to or renamed in daemon/metrics.py belongs in the alerts, the dashboard,
    # deploy/README.md and the lists above.
    assert exported == METRICS, {"new in the daemon": exported - METRICS, "gone": METRICS - exported}


# --- systemd ------------------------------------------------------------------------------

def systemd_unit() -> dict[str, list[tuple[str, str]]]:
    """Sections of paimond.service as (key, value) lists: systemd keys may repeat."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in (SYSTEMD / "paimond.service").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
        else:
            key, _, value = line.partition("=")
            assert current is not None, line
            current.append((key.strip(), value.strip()))
    return sections


def test_systemd_unit_is_sandboxed_and_agrees_with_its_config() -> None:
    service = systemd_unit()["Service"]
    values = dict(service)  # last value wins, as in systemd for these single-valued keys
    settings = systemd_settings()
    assert values["Type"] == "simple"
    assert values["User"] == "paimond"
    assert shlex.split(values["ExecStart"])[1:] == ["run", "--config", "/etc/paimond/paimond.toml"]
    assert values["KillSignal"] == "SIGTERM"
    assert values["Restart"] == "on-failure"
    assert int(values["TimeoutStopSec"]) >= settings["shutdown"]["grace_s"] + 15
    expected = {"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                "NoNewPrivileges": "yes", "CapabilityBoundingSet": ""}
    assert {k: values.get(k) for k in expected} == expected
    assert "MemoryMax" in values and "EnvironmentFile" in values
    assert set(values["RestrictAddressFamilies"].split()) <= {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert "@system-service" in [v for k, v in service if k == "SystemCallFilter"]
    # A local warehouse must be writable through ProtectSystem=strict.
    writable = values["ReadWritePaths"].split()
    for warehouse in settings["warehouses"]:
        if warehouse["uri"].startswith("file://"):
            assert warehouse["uri"].removeprefix("file://") in writable
    # The trigger token comes in as a systemd credential.
    name, _, _source = values["LoadCredential"].partition(":")
    assert settings["http"]["trigger_token_file"] == f"/run/credentials/paimond.service/{name}"
    # The example environment file sets nothing: every line is a comment.
    lines = (SYSTEMD / "paimond.env").read_text().splitlines()
    assert all(line.startswith("#") for line in lines if line.strip())


def verifiable_unit(tmp_path: Path) -> Path:
    """The unit with its ExecStart binary swapped for a stub: verify checks that it exists."""
    stub = tmp_path / "paimond"
    stub.write_text("#!/bin/sh\n")
    stub.chmod(0o755)
    text = re.sub(r"^ExecStart=\S+", f"ExecStart={stub}", (SYSTEMD / "paimond.service").read_text(),
                  flags=re.M)
    unit = tmp_path / "paimond.service"
    unit.write_text(text)
    return unit


def required_tool(name: str, package: str) -> str:
    """The tool's path; missing, the test skips, except under CI=true (.ci/run installs it
    with apt), where it fails."""
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed (Debian package {package})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    required_tool("systemd-analyze", "systemd")
    unit = verifiable_unit(tmp_path)
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                            capture_output=True, text=True, timeout=60)
    # Unknown or malformed keys are only warnings with exit code 0: fail on any word about us.
    ours = [line for line in (result.stdout + result.stderr).splitlines() if "paimond" in line]
    assert result.returncode == 0 and ours == [], result.stdout + result.stderr


def test_systemd_security_exposure_is_low(tmp_path: Path) -> None:
    required_tool("systemd-analyze", "systemd")
    unit = verifiable_unit(tmp_path)
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
                            capture_output=True, text=True, timeout=60)
    found = re.search(r"Overall exposure level for paimond\.service: ([0-9.]+)", result.stdout)
    if result.returncode != 0 and found is None:
        pytest.skip(f"systemd-analyze security --offline unsupported: {result.stderr.strip()}")
    assert found is not None, result.stdout
    assert float(found.group(1)) <= 2.0, result.stdout


# --- Prometheus ---------------------------------------------------------------------------

def alert_rules() -> list[dict[str, Any]]:
    (doc,) = load_yaml_docs(ALERTS)
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_alert_rules_structure_and_metric_names() -> None:
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert re.fullmatch(r"[0-9]+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        used = metric_names(rule["expr"])
        assert used and used <= METRICS, (rule["alert"], used - METRICS)


def test_alert_rules_cover_the_required_conditions() -> None:
    by_name = {rule["alert"]: rule["expr"] for rule in alert_rules()}
    required = {
        "PaimondDown": {"paimond_up"},
        "PaimondSortedRunsNearStopTrigger": {"paimond_table_max_sorted_runs", "paimond_table_stop_trigger"},
        # a timestamp, not a duration: a cron job's textfile keeps it meaningful
        "PaimondCompactionStale": {"paimond_last_success_timestamp_seconds"},
        "PaimondTableQuarantined": {"paimond_table_quarantined"},
        "PaimondJobFailureRatioHigh": {"paimond_jobs_finished_total"},
        "PaimondCommitConflictsSpiking": {"paimond_commit_conflicts_total"},
    }
    for name, metrics in required.items():
        assert metrics <= metric_names(by_name[name]), name
    assert "absent(paimond_up)" in by_name["PaimondDown"]
    assert 'job="compact"' in by_name["PaimondCompactionStale"]


def promtool() -> str:
    return required_tool("promtool", "prometheus")


def test_promtool_check_rules() -> None:
    result = subprocess.run([promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_alert_unit_tests() -> None:
    result = subprocess.run([promtool(), "test", "rules", ALERT_TESTS.name], cwd=ALERT_TESTS.parent,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


# --- Grafana ------------------------------------------------------------------------------

def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def all_panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for panel in panels for p in [panel, *all_panels(panel.get("panels", []))]]


def dashboard_exprs() -> list[tuple[str, str]]:
    board = dashboard()
    exprs = [(p["title"], t["expr"]) for p in all_panels(board["panels"]) for t in p.get("targets", [])]
    exprs += [(v["name"], v["definition"]) for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_dashboard_structure() -> None:
    board = dashboard()
    assert 36 <= board["schemaVersion"] <= 41
    assert board["uid"] and board["title"]
    panels = all_panels(board["panels"])
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in board["templating"]["list"]}
    occupied: set[tuple[int, int]] = set()
    for panel in board["panels"]:  # top level: children of a collapsed row are laid out on expand
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] >= 1 and pos["x"] + pos["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                 for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & occupied, f"{panel['title']} overlaps another panel"
        occupied |= cells
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]
        if "repeat" in panel:
            assert panel["repeat"] in variables
    for where, expr in dashboard_exprs():
        for var in re.findall(r"\$\{?([A-Za-z_]+)", expr):
            assert var in variables or var.startswith("__"), (where, var)


def test_dashboard_queries_only_and_all_known_metrics() -> None:
    used: set[str] = set()
    for where, expr in dashboard_exprs():
        names = metric_names(expr)
        assert names and names <= SERIES, (where, names - SERIES)
        used |= names
    histogram_series = {h + s for h in HISTOGRAMS for s in ("_bucket", "_sum", "_count")}
    assert METRICS - HISTOGRAMS <= used
    assert histogram_series & used


def test_dashboard_queries_parse_with_promtool(tmp_path: Path) -> None:
    """promtool has no expression checker: each query becomes a recording rule it parses."""
    tool = promtool()
    substitutions = {"$__rate_interval": "5m", "${datasource}": "x", "$table": "db.t", "$job": "compact"}
    rules = []
    for i, (_, expr) in enumerate(dashboard_exprs()):
        if expr.startswith("label_values("):
            expr = re.sub(r"^label_values\(([a-z_]+), *[a-z_]+\)$", r"\1", expr)
        for variable, value in substitutions.items():
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    rule_file = tmp_path / "dashboard-queries.yaml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([tool, "check", "rules", str(rule_file)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# --- Dockerfile ---------------------------------------------------------------------------

def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """Instructions per stage as (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), args.strip()))
    return stages


def final_stage(instruction: str) -> list[str]:
    return [args for name, args in dockerfile_stages()[-1] if name == instruction]


def test_dockerfile_runs_as_the_deployments_non_root_user() -> None:
    (user,) = final_stage("USER")
    uid, _, gid = user.partition(":")
    assert uid not in {"root", "0"} and gid not in {"root", "0"}
    pod_security = pod_spec()["securityContext"]
    assert (uid, gid) == (str(pod_security["runAsUser"]), str(pod_security["runAsGroup"]))
    (base,) = final_stage("FROM")
    assert base.startswith("python:") and "slim" in base


def test_dockerfile_suits_a_read_only_root_filesystem() -> None:
    env = dict(token.split("=", 1) for args in final_stage("ENV") for token in shlex.split(args))
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["TMPDIR"] == "/tmp" and env["HOME"] == "/tmp"
    assert final_stage("EXPOSE") == [str(PORT)]
    assert json.loads(final_stage("ENTRYPOINT")[0]) == ["paimond"]
    assert json.loads(final_stage("CMD")[0]) == container()["args"]
    for stage in dockerfile_stages():
        for name, args in stage:
            if name == "RUN" and "apt-get" in args:
                assert "--no-install-recommends" in args and "rm -rf /var/lib/apt/lists" in args, args


def test_dockerfile_installs_the_built_wheel_with_the_locked_versions() -> None:
    build_steps = dockerfile_stages()[0]
    assert ("COPY", ". .") in build_steps  # the whole tree: no hand-kept list of folders
    (install,) = [args for name, args in build_steps if name == "RUN" and "uv build" in args]
    assert "uv export --frozen --no-dev" in install and "--constraint" in install
    assert "paimond-*.whl" in install
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    shipped = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert shipped and not shipped & ignored
    assert {".venv", ".git", "tests"} <= ignored


def healthcheck_command() -> list[str]:
    (healthcheck,) = final_stage("HEALTHCHECK")
    _, _, command = healthcheck.partition("CMD ")
    argv = json.loads(command)
    assert "curl" not in healthcheck and "wget" not in healthcheck
    assert argv[0] == "python" and "/healthz" in argv[-1]
    return [sys.executable, *argv[1:]]


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False), (None, False)])
def test_dockerfile_healthcheck_command(status: int | None, healthy: bool) -> None:
    """The HEALTHCHECK's own Python line, run against a local /healthz that answers `status`."""
    handler = type("Health", (_Health,), {"status": status or 200})
    server = HTTPServer(("127.0.0.1", 0), handler)
    port = server.server_address[1]
    if status is None:
        server.server_close()  # nothing listens: connection refused
    else:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = subprocess.run(healthcheck_command(), env={"PAIMOND_HTTP_PORT": str(port)},
                                capture_output=True, timeout=30)
    finally:
        if status is not None:
            server.shutdown()
            server.server_close()
    assert (result.returncode == 0) is healthy, result.stderr
