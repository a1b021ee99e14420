#!/usr/bin/env bash
# Makes the local files the dev overlay turns into Secrets
# (deploy/k8s/overlays/dev/secrets, git-ignored, 0700/0600), keeping those
# that exist, so it is safe to run again:
#   pg-*.password, redis-*.password   PostgreSQL roles and Redis ACL users
#   {auth,app,admin}-ed25519.key      audit event signing keys
#   log-ed25519.key, log.vkey         the transparency log's key and verifier key
#   public-keys.txt                   the key directory all services verify with
#   jwt-ed25519.key, jwks.json        the dev token issuer (scripts/dev-token.sh)
#   tls/                              a dev CA, a certificate per service (gRPC
#                                     server, and Redis client through stunnel)
#                                     and Redis's
#
# Usage: scripts/k8s-dev-secrets.sh [DIR]   (default: deploy/k8s/overlays/dev/secrets)
# Then: kubectl apply -k deploy/k8s/overlays/dev
# Tokens: ULTICODE_STATE_DIR=deploy/k8s/overlays/dev scripts/dev-token.sh alice auth.admin
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
ULTICODE_REPO_ROOT="${repo}"
# shellcheck source=lib/servers.sh
source "${repo}/scripts/lib/servers.sh"
dir="$(realpath -m -- "${1:-${repo}/deploy/k8s/overlays/dev/secrets}")"
(umask 077 && mkdir -p -- "${dir}/tls")
chmod 700 -- "${dir}" "${dir}/tls"

password() {  # 32 hex characters, no newline (Secrets keep bytes as they are)
  [[ -s "${dir}/$1" ]] || (umask 077 && openssl rand -hex 16 | tr -d '\n' >"${dir}/$1")
}
password pg-postgres.password
for svc in auth app admin; do
  password "pg-${svc}_migrator.password"
  password "pg-${svc}_runtime.password"
done
for user in auth app admin ops; do password "redis-${user}.password"; done

ulticode_dev_signing_keys "${dir}" scripts/k8s-dev-secrets.sh
# The transparency log's key and verifier key (ulticode-verify, built first).
ulticode_log_key "${dir}" ulticode.example/audit \
  "${ULTICODE_BUILD_DIR:-${repo}/build}/tools/verify/ulticode-verify"
ulticode_dev_jwt_issuer "${dir}"
# Admin's token for the owners' ErasePersonalData (docs/personal-data.md):
# role privacy.officer only, valid 30 days; run this script again to renew.
(umask 077 && ULTICODE_STATE_DIR="${dir%/secrets}" ULTICODE_DEV_TOKEN_TTL=2592000 \
  "${repo}/scripts/dev-token.sh" admin privacy.officer >"${dir}/admin-owner.token")

# Servers are reached in the cluster by Service name and, through
# `kubectl port-forward`, on localhost.
ulticode_tls_ca "${dir}/tls"
for svc in auth app admin redis; do
  [[ -s "${dir}/tls/${svc}.pem" ]] && continue
  ulticode_tls_cert "${dir}/tls" "${svc}" \
    "DNS:${svc},DNS:${svc}.ulticode,DNS:${svc}.ulticode.svc,DNS:${svc}.ulticode.svc.cluster.local,DNS:localhost,IP:127.0.0.1"
done
echo "dev secrets in ${dir#"${repo}/"} (CA for clients: ${dir#"${repo}/"}/tls/ca.pem)" >&2
