#!/usr/bin/env python3
"""Checks sdcprobe's node-problem-detector plugin config against NPD's custom plugin monitor schema.

The schema is NPD's Go structs and checks (kubernetes/node-problem-detector at 6632ca67,
pkg/custompluginmonitor/types/config.go and types.go, pkg/types/types.go): CustomPluginConfig,
pluginGlobalConfig, CustomRule and Condition with their json tags and types; ApplyConfiguration()
(Go durations) and Validate() (plugin "custom", positive intervals, a rule timeout within the global
one, a default condition for every permanent rule). Go's encoding/json ignores unknown keys, so a
misspelt key would silently fall back to a default: here it is an error. Then the rule runs as NPD
runs it: the built binary with the rule's args, stdout trimmed and cut at max_output_length.

Usage: npd_config_test.py SDCPROBE DEPLOY_DIR
"""

import json
import re
import subprocess
import sys
import unittest

import yaml

SDCPROBE, DEPLOY = sys.argv[1], sys.argv[2]

# json tag -> accepted Python type(s); the Go field types in comments.
GLOBAL_CONFIG = {
    "invoke_interval": str,  # *string, a Go duration
    "timeout": str,  # *string, a Go duration
    "max_output_length": int,  # *int
    "concurrency": int,  # *int
    "enable_message_change_based_condition_update": bool,  # *bool
    "skip_initial_status": bool,  # *bool
}
PLUGIN_CONFIG = {
    "plugin": str,
    "pluginConfig": dict,
    "source": str,
    "conditions": list,  # []types.Condition
    "rules": list,  # []*CustomRule
    "metricsReporting": bool,  # *bool
}
CONDITION = {"type": str, "status": str, "transition": str, "reason": str, "message": str}
RULE = {
    "type": str,  # types.Type: "temporary" or "permanent"
    "condition": str,
    "reason": str,
    "path": str,
    "args": list,  # []string
    "timeout": str,  # *string, a Go duration
    "invoke_interval": str,  # *string, a Go duration
}
GO_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def go_duration(text):
    """Seconds, as Go's time.ParseDuration reads text; raises ValueError where Go returns an error."""
    if text == "0":
        return 0.0
    m = re.fullmatch(r"([-+]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)", text)
    if not m:
        raise ValueError("not a Go duration: %r" % text)
    total = sum(float(n) * GO_UNITS[u] for n, u in re.findall(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)", m.group(2)))
    return -total if m.group(1) == "-" else total


def check_fields(obj, schema, where):
    """Errors for unknown keys and wrong JSON types (bool is not an int, as in Go)."""
    if not isinstance(obj, dict):
        return ["%s: an object expected" % where]
    errors = []
    for key, value in obj.items():
        if key not in schema:
            errors.append("%s: unknown key %r (NPD would ignore it)" % (where, key))
        elif schema[key] is int and (isinstance(value, bool) or not isinstance(value, int)):
            errors.append("%s.%s: an integer expected" % (where, key))
        elif not isinstance(value, schema[key]):
            errors.append("%s.%s: %s expected" % (where, key, schema[key].__name__))
    return errors


def validate(config):
    """NPD's unmarshalling, ApplyConfiguration() and Validate(), less the rule path's existence."""
    errors = check_fields(config, PLUGIN_CONFIG, "config")
    if errors:
        return errors
    glob = config.get("pluginConfig", {})
    errors += check_fields(glob, GLOBAL_CONFIG, "pluginConfig")
    for i, c in enumerate(config.get("conditions", [])):
        errors += check_fields(c, CONDITION, "conditions[%d]" % i)
    for i, r in enumerate(config.get("rules", [])):
        errors += check_fields(r, RULE, "rules[%d]" % i)
        if not all(isinstance(a, str) for a in r.get("args", [])):
            errors.append("rules[%d].args: strings expected" % i)
    if errors:
        return errors
    try:
        timeout = go_duration(glob.get("timeout", "5s"))
        interval = go_duration(glob.get("invoke_interval", "30s"))
        rule_times = [(go_duration(r.get("timeout", "0")), go_duration(r.get("invoke_interval", "1s")))
                      for r in config["rules"]]
    except ValueError as e:
        return [str(e)]
    if config.get("plugin") != "custom":
        errors.append('plugin: NPD supports only "custom"')
    if interval <= 0:
        errors.append("pluginConfig.invoke_interval must be greater than zero")
    condition_types = {c.get("type") for c in config.get("conditions", [])}
    for i, (r, (rule_timeout, rule_interval)) in enumerate(zip(config["rules"], rule_times)):
        if r.get("type") not in ("temporary", "permanent"):
            errors.append("rules[%d].type: temporary or permanent" % i)
        if rule_interval <= 0:
            errors.append("rules[%d].invoke_interval must be greater than zero" % i)
        if rule_timeout > timeout:
            errors.append("rules[%d].timeout is greater than the global timeout" % i)
        if r.get("type") == "permanent" and r.get("condition") not in condition_types:
            errors.append("rules[%d]: permanent problem %s has no default condition" % (i, r.get("condition")))
    return errors


def manifest():
    with open(DEPLOY + "/kubernetes/sdcprobe.yaml") as f:
        return [d for d in yaml.safe_load_all(f) if d]


class NpdPluginConfigTest(unittest.TestCase):
    def setUp(self):
        with open(DEPLOY + "/kubernetes/npd-sdcprobe-plugin.json") as f:
            self.config = json.load(f)
        self.docs = manifest()

    def test_the_plugin_config_fits_npds_schema(self):
        self.assertEqual(validate(self.config), [])

    def test_the_configmap_holds_the_same_config(self):
        maps = [d for d in self.docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "sdcprobe-npd-config"]
        self.assertEqual(len(maps), 1)
        embedded = json.loads(maps[0]["data"]["sdcprobe-plugin.json"])
        self.assertEqual(validate(embedded), [])
        self.assertEqual(embedded, self.config)

    def test_the_schema_check_rejects_what_npd_would_reject_or_ignore(self):
        def broken(change):
            c = json.loads(json.dumps(self.config))
            change(c)
            return validate(c)

        self.assertTrue(broken(lambda c: c["pluginConfig"].update(timeout="90 s")))
        self.assertTrue(broken(lambda c: c["pluginConfig"].update(max_output_length="80")))
        self.assertTrue(broken(lambda c: c["pluginConfig"].update(invokeInterval="1h")))
        self.assertTrue(broken(lambda c: c["rules"][0].update(timeout="2m")))
        self.assertTrue(broken(lambda c: c["rules"][0].update(type="perm")))
        self.assertTrue(broken(lambda c: c["rules"][0].update(condition="Other")))
        self.assertTrue(broken(lambda c: c.update(plugin="filelog")))
        self.assertTrue(broken(lambda c: c.update(metricsReporting="true")))
        self.assertEqual(go_duration("1h30m"), 5400)
        self.assertEqual(go_duration("1.5s"), 1.5)

    def test_the_daemonset_mounts_the_config_runs_the_packaged_binary_and_has_its_service_account(self):
        ds = next(d for d in self.docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "node-problem-detector-sdcprobe")
        pod = ds["spec"]["template"]["spec"]
        container = pod["containers"][0]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        flag = next(a for a in container["args"] if a.startswith("--config.custom-plugin-monitor="))
        self.assertEqual(flag.split("=", 1)[1], mounts["config"] + "/sdcprobe-plugin.json")
        # The image is the package's (deploy/kubernetes/Dockerfile, target npd): the binary at /usr/bin.
        self.assertEqual(self.config["rules"][0]["path"], "/usr/bin/sdcprobe")
        self.assertIn("/sdcprobe-npd:", container["image"])
        self.assertNotIn("hostPath", json.dumps(pod))
        account = pod["serviceAccountName"]
        self.assertTrue(any(d["kind"] == "ServiceAccount" and d["metadata"]["name"] == account for d in self.docs))
        bindings = [d for d in self.docs if d["kind"] == "ClusterRoleBinding"]
        self.assertTrue(any(b["roleRef"]["name"] == "system:node-problem-detector"
                            and {"kind": "ServiceAccount", "name": account, "namespace": "kube-system"} in b["subjects"]
                            for b in bindings))

    def test_npd_sees_the_verdict_alone(self):
        # NPD: the whole stdout, strings.TrimSpace, cut at max_output_length bytes; exit 1 is NonOK.
        rule = self.config["rules"][0]
        # The rule's arguments, on the CPU here instead of CUDA.
        rule_args = list(rule["args"])
        rule_args[rule_args.index("--backend") + 1] = "cpu"
        args = [SDCPROBE] + rule_args + ["--cpu-devices", "2", "--inject", "device=1,probe=alu.fma32,model=bitflip,bit=7"]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=600)
        message = p.stdout.decode().strip()[: self.config["pluginConfig"]["max_output_length"]]
        self.assertEqual(p.returncode, 1)
        self.assertRegex(message, r"^SDC: CPU-[0-9a-f-]+ alu\.fma32$")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
