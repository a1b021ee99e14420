#!/usr/bin/env bash
# The Kubernetes manifests (deploy/k8s), offline:
#   - the monitoring manifests are fresh (scripts/k8s-monitoring.py --check);
#   - `kubectl kustomize` renders every overlay (dev with throw-away secrets
#     from scripts/k8s-dev-secrets.sh, in a copy of deploy/k8s);
#   - every rendered object validates against its schema (k8s_validate.js:
#     npm kubernetes-models, prometheus-operator, cloudnative-pg);
#   - the policy holds (k8s_policy.py: probes, resources, restricted
#     securityContext, tags, PDBs, NetworkPolicies, flags, mounts, Secrets).
# BIN_DIR: the build tree (the binaries' --help names every ULTICODE_* variable).
# ctest label: deploy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
bin_dir="${1:?usage: k8s_test.sh BIN_DIR}"
for tool in kubectl node; do
  if ! command -v "${tool}" >/dev/null; then
    echo "k8s_test: ${tool} is not installed (see deploy/k8s/README.md, 'Checks')" >&2
    exit 1
  fi
done
if ! kubectl version --client 2>/dev/null | grep -q '^Kustomize Version: v5'; then
  echo "k8s_test: kubectl must bundle kustomize 5 (kubectl 1.27+): $(kubectl version --client 2>&1 | tr '\n' ' ')" >&2
  exit 1
fi
[[ -d "${root}/node_modules/kubernetes-models" ]] || {
  echo "k8s_test: node_modules missing: run 'npm ci' (scripts/test.sh does)" >&2
  exit 1
}
tmp="$(mktemp -d)"
trap 'rm -rf -- "${tmp}"' EXIT

"${root}/scripts/k8s-monitoring.py" --check
echo "monitoring manifests: fresh"

cp -a "${root}/deploy/k8s" "${tmp}/k8s"
rm -rf -- "${tmp}/k8s/overlays/dev/secrets"
"${root}/scripts/k8s-dev-secrets.sh" "${tmp}/k8s/overlays/dev/secrets" 2>/dev/null
for overlay in dev prod; do
  kubectl kustomize "${tmp}/k8s/overlays/${overlay}" >"${tmp}/${overlay}.yaml"
  /usr/bin/python3 -c '
import json, sys, yaml
json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], open(sys.argv[2], "w"))
' "${tmp}/${overlay}.yaml" "${tmp}/${overlay}.json"
  echo "${overlay}: rendered $(grep -c '^kind:' "${tmp}/${overlay}.yaml") objects"
  (cd "${root}" && node tests/deploy/k8s_validate.js "${tmp}/${overlay}.json")
  provided=/dev/null
  [[ -f "${root}/deploy/k8s/overlays/${overlay}/provided.txt" ]] &&
    provided="${root}/deploy/k8s/overlays/${overlay}/provided.txt"
  /usr/bin/python3 "${root}/tests/deploy/k8s_policy.py" "${overlay}" "${tmp}/${overlay}.json" \
    "${bin_dir}" "${provided}"
done
