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
# shellcheck source=k8s_lib.sh
source "${root}/tests/deploy/k8s_lib.sh"
k8s_require_kustomize5 k8s_test
[[ -d "${root}/node_modules/kubernetes-models" ]] || {
  echo "k8s_test: node_modules missing: run 'npm ci' (scripts/test.sh does)" >&2
  exit 1
}
tmp="$(mktemp -d)"
trap 'rm -rf -- "${tmp}"' EXIT

"${root}/scripts/k8s-monitoring.py" --check
echo "monitoring manifests: fresh"

k8s_copy_with_dev_secrets "${tmp}" >/dev/null
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
