"""The official OpenLineage Python client (openlineage-python 1.54.0), in its own cached venv,
posting one run event through its HTTP transport (POST {url}/api/v1/lineage, Bearer api key)."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tether.demo.thirdparty import CACHE

REQUIREMENT = "openlineage-python==1.54.0"
SCRIPT = r'''
import json, sys
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import schema_dataset
SchemaDatasetFacet = schema_dataset.SchemaDatasetFacet
SchemaDatasetFacetFields = schema_dataset.SchemaDatasetFacetFields
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

url, key, raw = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

def dataset(cls, d):
    facets = {}
    if "schema" in d.get("facets", {}):
        facets["schema"] = SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=f["name"],
            type=f.get("type")) for f in d["facets"]["schema"]["fields"]])
    return cls(namespace=d["namespace"], name=d["name"], facets=facets)

event = RunEvent(eventType=RunState.COMPLETE, eventTime=raw["eventTime"],
                 run=Run(runId=raw["run"]["runId"]),
                 job=Job(namespace=raw["job"]["namespace"], name=raw["job"]["name"]),
                 producer=raw["producer"],
                 inputs=[dataset(InputDataset, d) for d in raw["inputs"]],
                 outputs=[dataset(OutputDataset, d) for d in raw["outputs"]])
config = HttpConfig(url=url, auth=ApiKeyTokenProvider({"apiKey": key}),
                    retry={"total": 0})
OpenLineageClient(transport=HttpTransport(config)).emit(event)
print("sent")
'''


def client_python() -> Path:
    venv = CACHE / "openlineage-python-1.54.0"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".openlineage.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".ok").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True,
                           capture_output=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                            "--disable-pip-version-check", REQUIREMENT], check=True,
                           capture_output=True)
            (venv / ".ok").touch()
    return venv / "bin" / "python"


def post_with_openlineage_client(url: str, api_key: str, event: dict[str, Any]) -> None:
    res = subprocess.run([str(client_python()), "-c", SCRIPT, url, api_key, json.dumps(event)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "sent" in res.stdout, res.stderr[-2000:]
