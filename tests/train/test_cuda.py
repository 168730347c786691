"""The CUDA path: bf16 autocast tracks the fp32 CPU run, and runs packed onto one GPU keep their results.

Skipped without a CUDA device (CI has none); `bash bench/gpu/run.sh` runs them on a lent GPU
(`pytest -m cuda`). A micro run is a few seconds there.
"""

import dataclasses

import pytest
import torch

from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.train.loop import train_run
from tests.conftest import MICRO, micro_config
from tests.train.test_train import data, make_spec  # noqa: F401  (data: the module's fixture)

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def on(device: str):
    spec = make_spec()
    return dataclasses.replace(spec, train=spec.train.model_copy(update={"device": device,
                                                                         "threads": 1 if device == "cpu" else None}))


def test_bf16_run_on_cuda_tracks_fp32_on_cpu(data, tmp_path):  # noqa: F811
    # bf16 autocast rounds every matmul's inputs to 8 bits of mantissa: the run is not the CPU's
    # bit for bit, but its curve must stay within a few tenths of a percent of it.
    cpu = train_run(on("cpu"), data, tmp_path / "cpu")
    cuda = train_run(on("cuda"), data, tmp_path / "cuda")
    assert cuda["status"] == cpu["status"] == "finished"
    assert cuda["device"].startswith("cuda")
    assert cuda["final_val_loss"] < 0.8 * store.read_jsonl(tmp_path / "cuda" / store.METRICS)[0]["train_loss"]
    assert cuda["final_val_loss"] == pytest.approx(cpu["final_val_loss"], rel=0.01)
    curve = {r["step"]: r["val_loss"] for r in store.read_jsonl(tmp_path / "cuda" / store.METRICS) if "val_loss" in r}
    reference = {r["step"]: r["val_loss"] for r in store.read_jsonl(tmp_path / "cpu" / store.METRICS)
                 if "val_loss" in r}
    assert curve.keys() == reference.keys()
    for step, loss in curve.items():
        assert loss == pytest.approx(reference[step], rel=0.02), step


def test_runs_packed_onto_one_gpu_match_one_at_a_time(tmp_path, cache_dir):
    # Three runs share the GPU, each in its own process and CUDA context (executor.runs_per_gpu):
    # no run may see another's state. GPU kernels with atomic adds (attention's backward) are not
    # bitwise repeatable, so the losses agree to 1e-3, not to the bit.
    cuda = {**MICRO["train"], "device": "cuda"}
    one = run_sweep(micro_config(train=cuda, executor={"workers": 1}), tmp_path / "one", cache_dir)
    packed = run_sweep(micro_config(train=cuda, executor={"workers": 3, "runs_per_gpu": 3}), tmp_path / "packed",
                       cache_dir)
    got = store.read_runs(packed.sweep_dir).set_index("run_id")
    want = store.read_runs(one.sweep_dir).set_index("run_id")
    assert (got.status == "finished").all() and len(got) == len(want)
    assert all(store.read_summary(d)["device"].startswith("cuda") for d in store.run_dirs(packed.sweep_dir))
    for run_id, loss in want.final_val_loss.items():
        assert got.final_val_loss[run_id] == pytest.approx(loss, rel=1e-3), run_id
