"""A small Lightning run with GoodputCallback: the recorder, the inline probe (an injected fault
makes it fail at some step, and on_sdc="stop" then ends the fit with SDCStop, which a real job would
let end the process with status 75) and the ledger over the merged files.

    python3 train_lightning.py --sdcprobe /path/to/sdcprobe --out DIR [--steps 200] [--inject SPEC]
                               [--ckpt-dir DIR] [--devices N]

With --devices N > 1 it runs DDP on N GPUs, and each rank's probe must have run on a GPU of its own
(the probe is made on the rank's device, not on GPU 0 for every rank).

Exit 0: the run logged what the callback promises and `sdcprobe goodput` read it; 1: a check
failed; 2: Lightning or torch is not importable (the GPU lease kit reports "could not run")."""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
except ImportError as e:
    print("kit: Lightning not importable: %s" % e)
    sys.exit(2)

from sdcprobe import SDC_EXIT_STATUS, GoodputCallback, SDCStop  # noqa: E402


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))

    def training_step(self, batch, batch_idx):
        x, = batch
        return torch.nn.functional.mse_loss(self.net(x), x)

    def validation_step(self, batch, batch_idx):
        x, = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), x))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def loader(n):
    data = torch.utils.data.TensorDataset(torch.randn(n, 256))
    return torch.utils.data.DataLoader(data, batch_size=32)


def probed_gpus(out, devices, timeout_s=60):
    """The GPU each rank's probe ran on (from probe_gpu.rank*.json, which every rank writes once its
    fit is over), in rank order; None for a rank whose file did not come."""
    deadline = time.monotonic() + timeout_s
    gpus = [None] * devices
    while None in gpus and time.monotonic() < deadline:
        for rank in range(devices):
            try:
                with open(os.path.join(out, "probe_gpu.rank%d.json" % rank)) as f:
                    gpus[rank] = json.load(f)["probe_gpu"]
            except (OSError, ValueError):
                pass
        if None in gpus:
            time.sleep(0.2)
    return gpus


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sdcprobe", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--inject", default=None)
    parser.add_argument("--ckpt-dir", default=None, help="where checkpoints go (default: --out)")
    parser.add_argument("--devices", type=int, default=1, help="GPUs, one DDP rank each")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # A new run of this example: its logs from an earlier run would be read as the same job's. Only
    # the first process: Lightning starts the other ranks by running this script again.
    if os.environ.get("LOCAL_RANK", "0") == "0":
        for old in glob.glob(os.path.join(args.out, "events.rank*.jsonl")) + \
                glob.glob(os.path.join(args.out, "probe_gpu.rank*.json")):
            os.remove(old)
    ckpt_dir = args.ckpt_dir or args.out
    probe = {"every": 25}  # its log: events.rank{rank}.inline.jsonl
    if args.inject:
        probe["inject"] = args.inject
    callback = GoodputCallback(os.path.join(args.out, "events.rank{rank}.jsonl"), probe=probe, on_sdc="stop")
    ranks = {"devices": args.devices, "strategy": "ddp"} if args.devices > 1 else {"devices": 1}
    trainer = pl.Trainer(max_steps=args.steps, accelerator="auto", logger=False, **ranks,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         val_check_interval=50, limit_val_batches=4, default_root_dir=ckpt_dir,
                         callbacks=[callback, pl.callbacks.ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=50,
                                                                           save_top_k=-1)])
    try:
        trainer.fit(Model(), loader(32 * args.steps * args.devices), loader(128))  # each rank its share
        status = 0
    except SDCStop as e:  # on_sdc="stop": a real job would exit with e.code, for its launcher to requeue it
        status = e.code
    if args.devices > 1:
        # Each rank's probe must test that rank's GPU: made before Lightning set the device, every
        # rank's would take GPU 0.
        record = {"rank": trainer.global_rank, "probe_gpu": callback.probe.verdict["device"]}
        if torch.cuda.is_available():
            record["rank_gpu"] = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        path = os.path.join(args.out, "probe_gpu.rank%d.json" % trainer.global_rank)
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)
    if trainer.global_rank != 0:
        return 0 if status in (0, SDC_EXIT_STATUS) else 1
    with open(os.path.join(args.out, "events.rank0.jsonl")) as f:
        events = [json.loads(line) for line in f]
    kinds = [e["event"] for e in events]
    stopped = trainer.global_step < args.steps
    checks = {
        "process_start first": kinds[0] == "process_start",
        "a step per optimizer step": kinds.count("step_end") == trainer.global_step,
        "saves committed": kinds.count("ckpt_commit") == kinds.count("ckpt_end") >= (0 if stopped else 1),
        "evals": kinds.count("eval_begin") == kinds.count("eval_end") >= (0 if stopped else 1),
        # Stopped for SDC: the fit ends in a fault named SDCStop and the job's status is 75.
        "job_end last, or the stop's fault": (kinds[-1], events[-1].get("kind"), status) ==
                                              (("fault_detected", "SDCStop", SDC_EXIT_STATUS) if stopped else
                                               ("job_end", None, 0)),
        "stopped only with a fault": stopped == bool(args.inject),
    }
    if args.devices > 1:
        gpus = probed_gpus(args.out, args.devices)
        print("kit: the ranks' probes ran on %s" % ", ".join(map(str, gpus)))
        checks["each rank's probe on a GPU of its own"] = None not in gpus and len(set(gpus)) == args.devices
    files = sorted(glob.glob(os.path.join(args.out, "events.rank*.jsonl")))
    out = subprocess.run([args.sdcprobe, "goodput", "--json", *files], capture_output=True, text=True)
    checks["sdcprobe goodput reads the merged files"] = out.returncode == 0
    report = json.loads(out.stdout) if out.returncode == 0 else {"stderr": out.stderr}
    if args.inject and out.returncode == 0:
        # The inline probe runs on its own thread: its time overlaps training.
        checks["probe time overlapped"] = report["diagnostics"]["overlapped_probe_ns"] > 0
    print(json.dumps({"global_step": trainer.global_step, "checks": checks, "goodput": report}, indent=1))
    failed = [name for name, ok in checks.items() if not ok]
    print("kit: lightning %s steps, ETTR %s%s" % (trainer.global_step, report.get("ettr"),
                                                  "; failed: " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
