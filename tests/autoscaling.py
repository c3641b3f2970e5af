"""A Ray cluster whose own autoscaler adds and removes nodes on this machine (Ray's fake
multi-node provider: each node it launches is a real raylet with the resources of its type).

Run as a process of its own (`python -m tests.autoscaling PORT WORKER_CPUS MAX_WORKERS LOG`),
beside the session's cluster: it prints the cluster's address, then writes the number of alive
nodes to LOG as it changes, until its stdin closes; then it stops its head and every node its
autoscaler launched.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

# Read by the autoscaler (in the head's monitor process, which inherits this environment).
os.environ["RAY_FAKE_CLUSTER"] = "1"
os.environ["AUTOSCALER_UPDATE_INTERVAL_S"] = "1"

import psutil
import ray
from ray.cluster_utils import Cluster


def _config(address: str, worker_cpus: int, max_workers: int) -> dict[str, object]:
    """The autoscaler's cluster config: one worker type of `worker_cpus` CPUs."""
    return {
        "cluster_name": "baton-autoscaling",
        "max_workers": max_workers,
        "provider": {
            "type": "fake_multinode",
            "gcs_address": address,
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
        },
        "available_node_types": {
            "ray.head.default": {"resources": {}, "node_config": {}, "max_workers": 0},
            "ray.worker.cpu": {
                "resources": {"CPU": worker_cpus, "object_store_memory": 100 * 1024 * 1024},
                "node_config": {},
                "min_workers": 0,
                "max_workers": max_workers,
            },
        },
        "head_node_type": "ray.head.default",
        "auth": {},
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": 0.1,  # a node idle for 6 s is removed
        "docker": {},
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
    }


def _stop_launched(address: str) -> None:
    """Stop the processes of the nodes the autoscaler launched (they outlive the head)."""
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(address in part for part in process.info["cmdline"] or []):
                process.kill()


def main() -> None:
    port, worker_cpus, max_workers, log = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        Path(sys.argv[4]),
    )
    address = f"{ray.util.get_node_ip_address()}:{port}"  # type: ignore[no-untyped-call]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(_config(address, worker_cpus, max_workers), file)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,  # one replica of a one-CPU agent; the others need nodes
            "gcs_server_port": port,
            "include_dashboard": False,
            "autoscaling_config": file.name,
        },
    )
    try:
        print(cluster.address, flush=True)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        closed = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
        seen = -1
        while not closed.wait(0.5):
            alive = sum(1 for node in ray.nodes() if node["Alive"])
            if alive != seen:
                seen = alive
                with log.open("a") as out:
                    out.write(f"{time.time():.3f} {alive}\n")
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        cluster.shutdown()
        _stop_launched(address)


if __name__ == "__main__":
    main()
