#!/bin/bash
# The Redis sidecar's entry point: runs stunnel (configuration $1) and sends
# it SIGHUP when the pod's certificate ($2) changes, so that a renewed
# certificate (cert-manager; the kubelet swaps the Secret's files) is
# presented without a restart. SIGTERM goes on to stunnel.
# Usage: redis-tunnel.sh CONF CERT   (REDIS_TUNNEL_CHECK_SECONDS, default 30)
set -u
conf="$1" cert="$2" every="${REDIS_TUNNEL_CHECK_SECONDS:-30}"
stamp() { stat -L -c '%i:%Y:%s' "${cert}" 2>/dev/null || echo missing; }
seen="$(stamp)"
/usr/bin/stunnel4 "${conf}" &
pid=$!
trap 'kill -TERM "${pid}" 2>/dev/null' TERM INT
while kill -0 "${pid}" 2>/dev/null; do
  sleep "${every}" &
  wait $! 2>/dev/null
  now="$(stamp)"
  if [[ "${now}" != "${seen}" ]]; then
    echo "redis-tunnel: ${cert} changed; reloading stunnel" >&2
    kill -HUP "${pid}" 2>/dev/null
    seen="${now}"
  fi
done
wait "${pid}"
