#!/usr/bin/env bash
# The Redis link exactly as the manifests configure it, run for real on
# loopback: redis.conf (ConfigMap redis-config), Redis's probe command, and
# the services' sidecar (ConfigMap redis-tunnel: run.sh and stunnel.conf)
# are taken from the rendered dev overlay, only their paths, ports and the
# Service name's address rewritten; the ACL file is made by
# ulticode-bootstrap as the Redis pod's init container makes it;
# certificates come from scripts/k8s-dev-secrets.sh. Then:
#   - Redis has no plaintext port (port 0) and its probe passes;
#   - Auth's user writes its own stream through the sidecar and nothing else;
#   - plaintext and certificate-less TLS clients are refused;
#   - a renewed pod certificate makes the sidecar reload, and it still works.
# BIN_DIR: the build tree (ulticode-bootstrap). ctest label: deploy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
bin_dir="${1:?usage: k8s_redis_tls_test.sh BIN_DIR}"
# shellcheck source=k8s_lib.sh
source "${root}/tests/deploy/k8s_lib.sh"
# shellcheck source=../../scripts/lib/servers.sh
source "${root}/scripts/lib/servers.sh"
k8s_require_kustomize5 k8s_redis_tls_test
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf -- "${tmp}"
}
trap cleanup EXIT

secrets="$(k8s_copy_with_dev_secrets "${tmp}")"
kubectl kustomize "${tmp}/k8s/overlays/dev" >"${tmp}/dev.yaml"

tls_port="$(ulticode_free_port)" tunnel_port="$(ulticode_free_port)"
mkdir -p "${tmp}/data"
# Render both files with the pod paths mapped onto this directory.
/usr/bin/python3 - "${tmp}" "${secrets}" "${tls_port}" "${tunnel_port}" <<'PY'
import sys, yaml
tmp, secrets, tls_port, tunnel_port = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(f"{tmp}/dev.yaml")) if d]
conf = {d["metadata"]["name"].rsplit("-", 1)[0]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
tls = f"{secrets}/tls"
redis = conf["redis-config"]["redis.conf"]
ports = [l.split()[1] for l in redis.splitlines() if l.startswith("port ")]
assert ports == ["0"], f"redis.conf must have no plaintext port (port 0), has {ports}"
sts = next(d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "redis")
probe = sts["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"][-1]
for old, new in (("/etc/redis/tls/", f"{tls}/"), ("-p 6380", f"-p {tls_port}")):
    assert old in probe, f"the probe no longer has {old!r}: update this test"
    probe = probe.replace(old, new)
probe = probe.replace(f"{tls}/tls.crt", f"{tls}/redis.pem").replace(f"{tls}/tls.key", f"{tls}/redis.key")
probe = probe.replace(f"{tls}/ca.crt", f"{tls}/ca.pem")
open(f"{tmp}/probe.sh", "w").write(probe + "\n")
open(f"{tmp}/run.sh", "w").write(conf["redis-tunnel"]["run.sh"])
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
# The sidecar as the pods run it (run.sh), checking the certificate every second.
REDIS_TUNNEL_CHECK_SECONDS=1 bash "${tmp}/run.sh" "${tmp}/stunnel.conf" "${secrets}/tls/auth.pem" \
  >"${tmp}/stunnel.log" 2>&1 &
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
bash "${tmp}/probe.sh" || fail "Redis's readiness probe (from the StatefulSet) did not pass"
echo "Redis's probe: passes; redis.conf: port 0 (TLS only)"
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
# cert-manager renews the pod's certificate: the sidecar reloads and goes on.
# To see that stunnel really re-read its files, its listening port moves too
# (a reload is the only way it can start listening there).
moved_port="$(ulticode_free_port)"
sed -i "s/^accept = 127.0.0.1:${tunnel_port}$/accept = 127.0.0.1:${moved_port}/" "${tmp}/stunnel.conf"
ulticode_tls_cert "${secrets}/tls" auth "DNS:auth,IP:127.0.0.1"
tunnel_port="${moved_port}"
for _ in $(seq 100); do [[ "$(as_auth PING)" == PONG ]] && break; sleep 0.1; done
[[ "$(as_auth PING)" == PONG ]] || fail "the sidecar did not reload after the certificate changed"
id="$(as_auth XADD audit:auth '*' k v)"
[[ "${id}" =~ ^[0-9]+-[0-9]+$ ]] || fail "XADD after the certificate was renewed: ${id}"
echo "renewed certificate: the sidecar reloaded (now on its new port); XADD audit:auth ${id}"
