"""compose.yaml, Dockerfile and hatchet.yaml: the Docker stack names every service and variable ki needs.

Neither Docker nor the images can run here; these checks parse the files (PyYAML) and hold them
to ki's own settings, so a renamed variable or a bumped engine pin cannot silently diverge.
Spec: insertion-pipeline.md "Orchestration" (Hatchet provider, concurrency and sweeper variables);
issue 7 item 1.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from ki.config.loader import ProcessSettings
from ki.config.settings import KiConfig

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"postgres", "hatchet-lite", "hatchet-token", "opensearch", "ki-worker", "ki"}
#: What a ki worker on Hatchet cannot run without, and the spec's orchestration variables.
KI_WORKER_VARIABLES = {
    "KI_DATABASE_URL", "KI_DATA_DIR", "KI_COMPONENTS__ORCHESTRATOR_PROVIDER", "KI_COMPONENTS__OPENSEARCH_URL",
    "KI_WORKER_SLOTS", "KI_HATCHET_DOCUMENT_CONCURRENCY", "KI_RELATE_MODEL_CONCURRENCY",
    "KI_HATCHET_SYNC_CONCURRENCY", "KI_RUN_SWEEP_SECONDS", "KI_RUN_SILENT_MINUTES", "KI_RUN_ABANDONED_HOURS",
    "KI_LLM_BASE_URL", "KI_LLM_API_KEY", "KI_LLM_MODEL",
    "HATCHET_CLIENT_HOST_PORT", "HATCHET_CLIENT_SERVER_URL", "HATCHET_CLIENT_TLS_STRATEGY", "HATCHET_CLIENT_TOKEN",
    "HATCHET_CLIENT_TOKEN_FILE",
}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _default(value: str) -> str:
    """``${VAR:-default}`` → default; anything else unchanged."""
    m = re.fullmatch(r"\$\{[A-Z0-9_]+:-(.*)\}", value)
    return m.group(1) if m else value


def _versions() -> dict[str, str]:
    out = {}
    for line in (ROOT / ".ci" / "hatchet-versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def test_compose_names_every_service(compose):
    assert SERVICES <= set(compose["services"])
    assert "pgvector" in compose["services"]["postgres"]["image"]
    assert compose["services"]["opensearch"]["image"].endswith(":2.19.1")


def test_engine_image_is_the_pinned_release(compose):
    engine = _versions()["ENGINE_VERSION"]
    for name in ("hatchet-lite", "hatchet-token"):
        assert compose["services"][name]["image"].endswith(f"hatchet-lite:{engine}")
    assert _env(compose["services"]["hatchet-lite"])["SERVER_VERSION_OVERRIDE"] == engine


def test_worker_has_every_variable_ki_needs(compose):
    for name in ("ki-worker", "ki"):
        env = _env(compose["services"][name])
        missing = KI_WORKER_VARIABLES - set(env)
        assert not missing, f"{name} lacks {sorted(missing)}"
        assert env["KI_COMPONENTS__ORCHESTRATOR_PROVIDER"] == "hatchet"
    worker = compose["services"]["ki-worker"]
    assert worker["command"] == ["worker"] and worker["build"] == "."
    assert {"postgres", "opensearch", "hatchet-token"} <= set(worker["depends_on"])


def test_every_ki_variable_is_a_real_setting_with_the_same_default(compose):
    """A typo (KI_HATCHET_DOC_CONCURRENCY) would be ignored by ki at run time; here it fails."""
    env = _env(compose["services"]["ki-worker"])
    fields = ProcessSettings.variables()
    defaults = ProcessSettings(data_dir=Path("/data"))
    for key, value in env.items():
        if not key.startswith("KI_"):
            continue
        name = key[3:].lower()
        if "__" in name:  # a pinned KiConfig field
            section, *path = name.split("__")
            model = KiConfig.model_fields[section].annotation
            for part in path[:-1]:
                model = model.model_fields[part].annotation
            assert path[-1] in model.model_fields, key
            continue
        assert key in fields, f"{key} is not a ki process setting"
        default = _default(value)
        if default != value and default:
            assert str(defaults.value(fields[key])) in (default, f"{default}.0"), (key, default)


def test_databases_and_addresses_line_up(compose):
    services = compose["services"]
    worker = _env(services["ki-worker"])
    ki_db = urlsplit(worker["KI_DATABASE_URL"])
    assert ki_db.hostname == "postgres" and ki_db.path == "/ki"
    engine = _env(services["hatchet-lite"])
    hatchet_db = urlsplit(engine["DATABASE_URL"])
    assert hatchet_db.hostname == "postgres" and hatchet_db.path == "/hatchet"
    init = compose["configs"]["pg-init"]["content"]
    assert "CREATE DATABASE hatchet" in init and "timezone TO 'UTC'" in init  # Hatchet refuses non-UTC
    assert engine["SERVER_MSGQUEUE_KIND"] == "postgres"
    # the token embeds the broadcast address; the worker dials the same host:port
    assert engine["SERVER_GRPC_BROADCAST_ADDRESS"] == worker["HATCHET_CLIENT_HOST_PORT"]
    assert urlsplit(worker["HATCHET_CLIENT_SERVER_URL"]).hostname == "hatchet-lite"
    assert urlsplit(worker["KI_COMPONENTS__OPENSEARCH_URL"]).hostname == "opensearch"
    declared = set(compose["volumes"])
    for service in services.values():
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0]
            if not source.startswith(("$", ".", "/")):
                assert source in declared, source


def test_dockerfile_and_hatchet_yaml():
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"pip install \"\.\[hatchet", dockerfile)
    assert 'ENTRYPOINT ["ki-entrypoint"]' in dockerfile and "HATCHET_CLIENT_TOKEN_FILE" in dockerfile
    dev = yaml.safe_load((ROOT / "hatchet.yaml").read_text(encoding="utf-8"))
    assert "ki worker" in dev["dev"]["runCmd"] and dev["dev"]["reload"] is True
    assert any("ki/" in pattern for pattern in dev["dev"]["files"])
