#!/usr/bin/python3
"""What every pod in deploy/kubernetes/ must have on a real GPU cluster: a GPU taint toleration,
requests and limits, a minimal securityContext, no service-account token unless it uses one, and
the GPUs (a request for nvidia.com/gpu, or the documented all-GPU setup). Also the Dockerfile's
shape: built from the package, not from a host bundle.
Usage: kubernetes_policy_test.py DEPLOY_DIR"""
import sys
import unittest

import yaml

DEPLOY = sys.argv[1] if len(sys.argv) > 1 else "deploy"


def pods():
    with open(DEPLOY + "/kubernetes/sdcprobe.yaml") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        if d["kind"] in ("DaemonSet", "Job"):
            yield d["metadata"]["name"], d["spec"]["template"]["spec"]
        elif d["kind"] == "CronJob":
            yield d["metadata"]["name"], d["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def env(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


class PodPolicyTest(unittest.TestCase):
    def test_there_are_pods(self):
        self.assertEqual(len(list(pods())), 3)

    def test_every_pod_tolerates_the_gpu_taint(self):
        for name, pod in pods():
            self.assertIn({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                          pod.get("tolerations", []), name)

    def test_every_container_has_requests_and_limits(self):
        for name, pod in pods():
            for c in pod["containers"]:
                res = c.get("resources", {})
                for kind in ("requests", "limits"):
                    self.assertIn("cpu", res.get(kind, {}), (name, kind))
                    self.assertIn("memory", res.get(kind, {}), (name, kind))

    def test_every_container_runs_with_no_capability_and_a_read_only_root(self):
        for name, pod in pods():
            self.assertEqual(pod.get("securityContext", {}).get("seccompProfile"), {"type": "RuntimeDefault"}, name)
            for c in pod["containers"]:
                sc = c.get("securityContext", {})
                self.assertIs(sc.get("allowPrivilegeEscalation"), False, name)
                self.assertIs(sc.get("readOnlyRootFilesystem"), True, name)
                self.assertEqual(sc.get("capabilities"), {"drop": ["ALL"]}, name)
                self.assertNotIn("privileged", sc, name)
            self.assertFalse(pod.get("hostNetwork") or pod.get("hostIPC"), name)

    def test_pods_beside_jobs_see_their_gpu_processes_and_the_job_holds_its_gpus(self):
        # docs/operating.md, "Busy GPUs": NVML lists other containers' processes only to the host's
        # pid namespace; a pod that requests its GPUs states they are its own instead.
        for name, pod in pods():
            c = pod["containers"][0]
            requested = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            if requested:
                self.assertFalse(pod.get("hostPID"), name)
                self.assertIn("--allocated", c["args"], name)
            else:
                self.assertIs(pod.get("hostPID"), True, name)
                self.assertNotIn("--allocated", c.get("args", []), name)

    def test_no_token_where_none_is_used(self):
        for name, pod in pods():
            if "serviceAccountName" in pod:  # NPD patches the node's status
                continue
            self.assertIs(pod.get("automountServiceAccountToken"), False, name)

    def test_every_pod_gets_the_gpus_and_tests_them_with_cuda(self):
        for name, pod in pods():
            c = pod["containers"][0]
            requested = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            all_gpus = pod.get("runtimeClassName") == "nvidia" and env(c).get("NVIDIA_VISIBLE_DEVICES") == "all"
            self.assertTrue(requested or all_gpus, name)
            if name != "node-problem-detector-sdcprobe":  # its plugin config has the arguments
                self.assertRegex(" ".join(c["args"]), r"--backend[= ]cuda", name)

    def test_no_pod_mounts_a_bundle_from_the_host(self):
        for name, pod in pods():
            for v in pod.get("volumes", []):
                self.assertNotIn("/opt/sdcprobe", v.get("hostPath", {}).get("path", ""), name)

    def test_the_sweep_idle_check_reads_the_gpus(self):
        pod = dict(pods())["sdcprobe-sweep"]
        self.assertIn("--idle-check=/usr/bin/sdcprobe idle", pod["containers"][0]["args"])

    def test_the_images_come_from_the_dockerfile(self):
        with open(DEPLOY + "/kubernetes/Dockerfile") as f:
            dockerfile = f.read()
        self.assertIn("apt-get install -y --no-install-recommends /tmp/sdcprobe_*.deb", dockerfile)
        self.assertIn("FROM sdcprobe AS npd", dockerfile)
        self.assertIn("USER 65534:65534", dockerfile)
        for name, pod in pods():
            image = pod["containers"][0]["image"]
            self.assertRegex(image, r"/sdcprobe(-npd)?:", name)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=1)
