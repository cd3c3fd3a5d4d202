"""The cluster recipes under cluster/ are files that work: the SLURM and PBS batch
scripts run here with stand-ins for ``srun`` and ``pbsdsh`` (real ``dask scheduler`` and
``dask worker`` processes on 127.0.0.1, over the job's own TLS certificate) and train
the model the embedded cluster trains; the Kubernetes manifest parses and carries the
settings cluster/README.md names."""

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from saspa_dask import jobs, load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.jobs.cluster import WORKER_MALLOC

ROOT = Path(__file__).resolve().parents[1]
HPC = ROOT / "cluster" / "hpc"
BIN = Path(sys.executable).parent

# one copy of the command per task, as srun --ntasks=N and pbsdsh (one per PBS_NODEFILE
# line) start them; a signal stops the copies
LAUNCHER = """#!/usr/bin/env bash
n={n}
while [ $# -gt 0 ]; do case "$1" in --ntasks=*) n="${{1#*=}}"; shift ;;
  --) shift; break ;; --*|-u) shift ;; *) break ;; esac; done
trap 'kill $(jobs -p) 2>/dev/null' TERM
for _ in $(seq "$n"); do "$@" & done
wait
"""

TRAIN = ["train", "d.zarr", "--out", "m.zarr", "--task", "classification",
         "--n-bases", "8"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recipes")
    X, y = synthetic_two_class(3000, 3, 0)
    np.save(folder / "d.npy", np.column_stack([X, y]))
    jobs.ingest(str(folder / "d.npy"), str(folder / "d.zarr"), chunk_rows=500)
    jobs.train(str(folder / "d.zarr"), str(folder / "embedded.zarr"),
               task="classification", n_bases=8)
    return folder, X


def _launcher(folder, name, n):
    path = folder / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(LAUNCHER.format(n=n))
    path.chmod(0o755)
    return path.parent


def _run(script, folder, env, *args):
    env = {**os.environ, **env, "SASPA_HOST": "127.0.0.1",
           "SASPA_JOB_DIR": str(folder / "job"), "SASPA_WORKER_MEMORY": "2GB",
           "PATH": f"{folder / 'bin'}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(script), *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=240)


def _workers_of(address):
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines() if address in line]


def _check_run(res, folder, X):
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("saspa-batch.sh: job"))
    address = line.split("scheduler ")[1].split(",")[0]
    assert address.startswith("tls://127.0.0.1:"), line
    assert "2 worker(s)" in line
    # the job's certificate folder is gone and its processes end
    assert not (folder / "job").exists()
    for _ in range(100):
        if not _workers_of(address):
            break
        time.sleep(0.1)
    assert not _workers_of(address)
    trained, embedded = load_model(folder / "m.zarr"), load_model(folder / "embedded.zarr")
    np.testing.assert_allclose(trained.predict_proba(X), embedded.predict_proba(X),
                               rtol=0, atol=1e-8)


def test_the_slurm_script_trains_what_the_embedded_cluster_trains(data):
    folder, X = data
    _launcher(folder, "srun", 1)
    res = _run(HPC / "slurm.sbatch", folder,
               {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2", "SLURM_CPUS_PER_TASK": "1",
                "SLURM_SUBMIT_DIR": str(ROOT)}, *TRAIN, "--overwrite")
    _check_run(res, folder, X)


def test_the_pbs_script_trains_what_the_embedded_cluster_trains(data):
    folder, X = data
    _launcher(folder, "pbsdsh", 2)
    nodes = folder / "nodefile"
    nodes.write_text("node1\nnode1\n")
    res = _run(HPC / "pbs.pbs", folder,
               {"PBS_JOBID": "99.server", "PBS_NODEFILE": str(nodes), "NCPUS": "1",
                "PBS_O_WORKDIR": str(ROOT), "SASPA_ARGS": " ".join(TRAIN + ["--overwrite"])})
    _check_run(res, folder, X)


def test_a_job_without_its_workers_ends_with_one_line(tmp_path):
    """A launcher that starts nothing: the script says how many workers joined, within
    SASPA_WAIT seconds, and leaves no certificate behind."""
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "srun"
    fake.write_text("#!/usr/bin/env bash\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    res = _run(HPC / "saspa-batch.sh", tmp_path,
               {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "SASPA_WAIT": "3"}, *TRAIN)
    assert res.returncode == 1
    assert "0 of 2 workers joined in 3s" in res.stderr
    assert not (tmp_path / "job").exists()


def test_the_kubernetes_manifest_has_the_settings_the_notes_name():
    import yaml
    from dask.utils import parse_bytes

    docs = list(yaml.safe_load_all((ROOT / "cluster" / "kubernetes" /
                                    "saspa-cluster.yaml").read_text()))
    cluster = next(d for d in docs if d["kind"] == "DaskCluster")
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    worker = cluster["spec"]["worker"]["spec"]["containers"][0]
    scheduler = cluster["spec"]["scheduler"]["spec"]["containers"][0]
    args = [str(a) for a in worker["args"]]
    assert args[:2] == ["dask", "worker"] and "--no-dashboard" in args
    threads = int(args[args.index("--nthreads") + 1])
    limit = parse_bytes(args[args.index("--memory-limit") + 1])
    # Dask's limit under the container's, so that Dask spills or pauses before the
    # kubelet kills the pod; a CPU per thread
    assert limit < parse_bytes(worker["resources"]["limits"]["memory"].replace("Gi", "GiB"))
    assert int(worker["resources"]["limits"]["cpu"]) == threads
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert {k: int(env[k]) for k in WORKER_MALLOC} == WORKER_MALLOC
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
    assert worker["image"] == scheduler["image"]
    assert "--no-dashboard" in scheduler["args"]
    assert cluster["spec"]["scheduler"]["service"]["type"] == "ClusterIP"
    mounts = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    claim = cluster["spec"]["worker"]["spec"]["volumes"][0]
    assert mounts[claim["name"]] == "/shared" and "persistentVolumeClaim" in claim
    # only the cluster's own pods and labelled clients reach it
    name = cluster["metadata"]["name"]
    assert policy["spec"]["podSelector"]["matchLabels"] == {"dask.org/cluster-name": name}
    sources = [s["podSelector"]["matchLabels"] for s in policy["spec"]["ingress"][0]["from"]]
    assert sources == [{"dask.org/cluster-name": name}, {"saspa/client": "true"}]
