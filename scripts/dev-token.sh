#!/usr/bin/env bash
# Prints a bearer token that the mesh started by scripts/run-local.sh accepts:
# EdDSA-signed with the dev key run-local keeps in its state directory, issuer
# "ulticode-dev", valid for one hour, for the services its roles are for (each
# service accepts only tokens whose "aud" names it: auth.* roles give
# ulticode-auth, app.* ulticode-app, audit.reader and audit.operator all
# three: Admin's log and the owners' witness views, or their operations).
#
# Usage: scripts/dev-token.sh SUBJECT [ROLE...]
#   e.g. scripts/dev-token.sh alice auth.admin auth.reader
# Roles: auth.admin auth.reader app.editor app.reader audit.reader audit.operator
#        privacy.officer
#
# Environment: ULTICODE_STATE_DIR (default: <repo>/.state), as for run-local;
# ULTICODE_DEV_TOKEN_TTL: seconds the token is valid (default 3600).
set -euo pipefail

if (($# < 1)) || [[ "$1" == -h || "$1" == --help ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
state="$(realpath -m -- "${ULTICODE_STATE_DIR:-${repo}/.state}")"
key="${state}/secrets/jwt-ed25519.key"
if [[ ! -r "${key}" ]]; then
  echo "dev-token.sh: ${key} not found: start the mesh once with scripts/run-local.sh" >&2
  exit 1
fi
subject="$1"
shift
if [[ ! "${subject}" =~ ^[A-Za-z0-9_.:@-]{1,128}$ ]]; then
  echo "dev-token.sh: SUBJECT must be 1..128 characters of [A-Za-z0-9_.:@-]" >&2
  exit 2
fi
roles=""
declare -A audiences=()
for role in "$@"; do
  if [[ ! "${role}" =~ ^[a-z]+\.[a-z]+$ ]]; then
    echo "dev-token.sh: role \"${role}\" is not like auth.admin" >&2
    exit 2
  fi
  roles+="${roles:+,}\"${role}\""
  case "${role}" in
    auth.*) audiences[ulticode-auth]=1 ;;
    app.*) audiences[ulticode-app]=1 ;;
    # audit.reader reads Admin's log and asks the owners what they witnessed
    # (LogWitness); audit.operator runs Admin's and the owners' operations.
    # privacy.officer erases at Admin and at the owners.
    audit.operator | audit.reader | privacy.officer) audiences[ulticode-admin]=1 audiences[ulticode-auth]=1 audiences[ulticode-app]=1 ;;
    audit.*) audiences[ulticode-admin]=1 ;;
  esac
done
aud=""
for a in ulticode-auth ulticode-app ulticode-admin; do
  if [[ -n "${audiences[${a}]:-}" ]]; then aud+="${aud:+,}\"${a}\""; fi
done

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
kid="$(cat "${state}/secrets/jwt.kid")"
now="$(date +%s)"
ttl="${ULTICODE_DEV_TOKEN_TTL:-3600}"
if [[ ! "${ttl}" =~ ^[1-9][0-9]{0,8}$ ]]; then
  echo "dev-token.sh: ULTICODE_DEV_TOKEN_TTL must be a number of seconds" >&2
  exit 2
fi
header="$(printf '{"alg":"EdDSA","typ":"JWT","kid":"%s"}' "${kid}" | b64url)"
payload="$(printf '{"iss":"ulticode-dev","aud":[%s],"sub":"%s","iat":%d,"exp":%d,"roles":[%s]}' \
  "${aud}" "${subject}" "${now}" "$((now + ttl))" "${roles}" | b64url)"
tmp="$(mktemp)"
trap 'rm -f -- "${tmp}"' EXIT
printf '%s.%s' "${header}" "${payload}" >"${tmp}"
signature="$(openssl pkeyutl -sign -inkey "${key}" -rawin -in "${tmp}" | b64url)"
printf '%s.%s.%s\n' "${header}" "${payload}" "${signature}"
