# shellcheck shell=bash
# Shared by the Kubernetes checks (tests/deploy/k8s_*.sh); source it.
#
#   k8s_require_kustomize5 NAME   exit 1 (naming NAME) unless kubectl bundles kustomize 5
#   k8s_copy_with_dev_secrets DIR copy deploy/k8s to DIR/k8s with throw-away dev
#                                 secrets (scripts/k8s-dev-secrets.sh); prints the
#                                 secrets directory
k8s_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"

k8s_require_kustomize5() {
  if ! command -v kubectl >/dev/null ||
    ! kubectl version --client 2>/dev/null | grep -q '^Kustomize Version: v5'; then
    echo "$1: needs kubectl with kustomize 5 (kubectl 1.27+; deploy/k8s/README.md, 'Checks')" >&2
    exit 1
  fi
}

k8s_copy_with_dev_secrets() {
  cp -a "${k8s_repo}/deploy/k8s" "$1/k8s"
  rm -rf -- "$1/k8s/overlays/dev/secrets"
  "${k8s_repo}/scripts/k8s-dev-secrets.sh" "$1/k8s/overlays/dev/secrets" 2>/dev/null
  printf '%s\n' "$1/k8s/overlays/dev/secrets"
}
