#!/usr/bin/env bash
# The Redis link exactly as the manifests configure it, run for real on
# loopback: redis.conf (ConfigMap redis-config) and the services' stunnel
# sidecar configuration (ConfigMap redis-tunnel) are taken from the rendered
# dev overlay, only their paths, ports and the Service name's address
# rewritten; the ACL file is made by ulticode-bootstrap as the Redis pod's
# init container makes it; certificates come from scripts/k8s-dev-secrets.sh.
# Then: Auth's user writes its own stream through the sidecar and nothing
# else; plaintext and certificate-less TLS clients are refused.
# BIN_DIR: the build tree (ulticode-bootstrap). ctest label: deploy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
bin_dir="${1:?usage: k8s_redis_tls_test.sh BIN_DIR}"
command -v kubectl >/dev/null || { echo "k8s_redis_tls_test: kubectl is not installed" >&2; exit 1; }
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf -- "${tmp}"
}
trap cleanup EXIT

cp -a "${root}/deploy/k8s" "${tmp}/k8s"
rm -rf -- "${tmp}/k8s/overlays/dev/secrets"
secrets="${tmp}/k8s/overlays/dev/secrets"
"${root}/scripts/k8s-dev-secrets.sh" "${secrets}" 2>/dev/null
kubectl kustomize "${tmp}/k8s/overlays/dev" >"${tmp}/dev.yaml"

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tls_port="$(free_port)" tunnel_port="$(free_port)"
mkdir -p "${tmp}/data"
# Render both files with the pod paths mapped onto this directory.
/usr/bin/python3 - "${tmp}" "${secrets}" "${tls_port}" "${tunnel_port}" <<'PY'
import sys, yaml
tmp, secrets, tls_port, tunnel_port = sys.argv[1:]
conf = {d["metadata"]["name"].rsplit("-", 1)[0]: d["data"]
        for d in yaml.safe_load_all(open(f"{tmp}/dev.yaml")) if d and d["kind"] == "ConfigMap"}
tls = f"{secrets}/tls"
redis = conf["redis-config"]["redis.conf"]
for old, new in (("/etc/redis/tls/tls.crt", f"{tls}/redis.pem"),
                 ("/etc/redis/tls/tls.key", f"{tls}/redis.key"),
                 ("/etc/redis/tls/ca.crt", f"{tls}/ca.pem"),
                 ("/acl/users.acl", f"{tmp}/users.acl"), ("dir /data", f"dir {tmp}/data"),
                 ("tls-port 6380", f"tls-port {tls_port}"),
                 ("bind 0.0.0.0 -::*", "bind 127.0.0.1")):
    assert old in redis, f"redis.conf no longer has {old!r}: update this test"
    redis = redis.replace(old, new)
open(f"{tmp}/redis.conf", "w").write(redis)
tunnel = conf["redis-tunnel"]["stunnel.conf"]
for old, new in (("/etc/ulticode/tls/ca.crt", f"{tls}/ca.pem"),
                 ("/etc/ulticode/tls/tls.crt", f"{tls}/auth.pem"),
                 ("/etc/ulticode/tls/tls.key", f"{tls}/auth.key"),
                 ("accept = 127.0.0.1:6379", f"accept = 127.0.0.1:{tunnel_port}"),
                 ("connect = redis:6380", f"connect = 127.0.0.1:{tls_port}")):
    assert old in tunnel, f"stunnel.conf no longer has {old!r}: update this test"
    tunnel = tunnel.replace(old, new)
open(f"{tmp}/stunnel.conf", "w").write(tunnel)
PY
# The Redis pod's init container: the ACL file from the users' passwords.
"${bin_dir}/tools/bootstrap/ulticode-bootstrap" --secrets-dir="${secrets}" \
  --redis-acl-file="${tmp}/users.acl"

redis-server "${tmp}/redis.conf" >"${tmp}/redis.log" 2>&1 &
pids+=($!)
stunnel4 "${tmp}/stunnel.conf" >"${tmp}/stunnel.log" 2>&1 &
pids+=($!)

as_auth() {  # through the sidecar, as ACL user auth (password via the environment)
  REDISCLI_AUTH="$(cat "${secrets}/redis-auth.password")" \
    redis-cli -h 127.0.0.1 -p "${tunnel_port}" --user auth --no-auth-warning "$@" 2>&1
}
for _ in $(seq 100); do
  [[ "$(as_auth PING)" == PONG ]] && break
  sleep 0.1
done
fail() { echo "FAIL: $*"; echo "--- redis"; cat "${tmp}/redis.log"; echo "--- stunnel"; cat "${tmp}/stunnel.log"; exit 1; }
[[ "$(as_auth PING)" == PONG ]] || fail "no PONG through the sidecar: $(as_auth PING)"
id="$(as_auth XADD audit:auth '*' k v)"
[[ "${id}" =~ ^[0-9]+-[0-9]+$ ]] || fail "XADD audit:auth through the sidecar: ${id}"
echo "auth -> sidecar -> Redis (mutual TLS): XADD audit:auth ${id}"
out="$(as_auth XADD audit:app '*' k v)"
[[ "${out}" == *NOPERM* ]] || fail "auth wrote audit:app: ${out}"
echo "auth -> audit:app: ${out}"
out="$(redis-cli -h 127.0.0.1 -p "${tls_port}" PING 2>&1 || true)"
[[ "${out}" != PONG ]] || fail "plaintext to the TLS port answered"
echo "plaintext to the TLS port: refused (${out:-no answer})"
# With Auth's valid login, only the missing client certificate can refuse it.
out="$(REDISCLI_AUTH="$(cat "${secrets}/redis-auth.password")" redis-cli -h 127.0.0.1 \
  -p "${tls_port}" --tls --cacert "${secrets}/tls/ca.pem" --user auth --no-auth-warning PING 2>&1 || true)"
[[ "${out}" != PONG ]] || fail "TLS without a client certificate answered"
echo "TLS without a client certificate: refused (${out:-no answer})"
out="$(redis-cli -h 127.0.0.1 -p "${tls_port}" --tls --cacert "${secrets}/tls/ca.pem" \
  --cert "${secrets}/tls/admin.pem" --key "${secrets}/tls/admin.key" PING 2>&1 || true)"
[[ "${out}" == *NOAUTH* ]] || fail "a client certificate without an ACL login got: ${out}"
echo "client certificate but no ACL login: ${out}"
