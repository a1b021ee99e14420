#!/usr/bin/python3
"""Policy for a rendered overlay (a JSON array of Kubernetes objects).

  k8s_policy.py OVERLAY RENDERED.json BIN_DIR PROVIDED.txt

Every rule names the object and what is wrong. The rules:
  - every container (init ones too) has CPU and memory requests, a memory
    limit, and the restricted securityContext (non-root, no privilege
    escalation, all capabilities dropped, RuntimeDefault seccomp, read-only
    root filesystem); no image is untagged or tagged "latest";
  - every long-running container has startup, readiness and liveness probes;
    the services' are native gRPC probes on the port of ULTICODE_HEALTH_LISTEN;
  - no pod mounts a service-account token; every namespace enforces Pod
    Security "restricted" and has a default-deny NetworkPolicy (ingress and
    egress), and every workload has a NetworkPolicy of its own;
  - every Deployment has a PodDisruptionBudget and spreads over zones and hosts;
  - every ULTICODE_* variable is a flag of the binary the container runs
    (its --help), and every *_FILE it reads (the init step: only its
    password) and the DSN's sslrootcert are under one of its mounts;
  - every mounted file a container names (command, args, exec probes, the
    configuration files it mounts: stunnel.conf, redis.conf) is under its
    mounts and in the volume;
  - a pod mounting Secrets sets an fsGroup; Redis has maxmemory at most 80 %
    of its memory limit;
  - every CloudNativePG Cluster with standbys replicates synchronously (at
    least one standby confirms each commit; docs/guarantees.md, "Topologies");
  - every Secret and ConfigMap a pod uses is rendered, or is in PROVIDED.txt
    (what deploy/k8s/README.md tells the deployer to create); the prod
    overlay renders no Secret at all.
"""
import json
import re
import subprocess
import sys

overlay, rendered, bin_dir, provided_file = sys.argv[1:5]
objects = json.load(open(rendered))
provided = {line.split("#")[0].strip() for line in open(provided_file)} - {""}
problems = []


def problem(obj, text):
    problems.append(f"{overlay}: {obj['kind']}/{obj['metadata']['name']}: {text}")


WORKLOADS = ("Deployment", "StatefulSet", "Job")
workloads = [o for o in objects if o["kind"] in WORKLOADS]
by_kind = {}
for o in objects:
    by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
configmaps = by_kind.get("ConfigMap", {})
secrets = by_kind.get("Secret", {})


def pod_of(w):
    return w["spec"]["template"]


def selects(selector, labels):
    if "matchLabels" in selector and any(labels.get(k) != v
                                         for k, v in selector["matchLabels"].items()):
        return False
    for e in selector.get("matchExpressions", []):
        value = labels.get(e["key"])
        ok = {"In": lambda: value in e["values"],
              "NotIn": lambda: value not in e.get("values", []),
              "Exists": lambda: value is not None,
              "DoesNotExist": lambda: value is None}[e["operator"]]()
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- containers

HELP = {}


def flags_of(binary):
    if binary not in HELP:
        name = binary.rsplit("/", 1)[-1]
        path = {"ulticode-auth": "auth", "ulticode-app": "app",
                "ulticode-admin": "admin", "ulticode-forward": "forward"}.get(name)
        HELP[binary] = None
        if path:
            out = subprocess.run([f"{bin_dir}/{path}/{name}", "--help"], capture_output=True,
                                 text=True).stdout
            HELP[binary] = set(re.findall(r"\((ULTICODE_[A-Z0-9_]+)\)", out))
    return HELP[binary]


def env_of(container):
    env = {}
    for src in container.get("envFrom", []):
        name = src.get("configMapRef", {}).get("name")
        if name in configmaps:
            env.update(configmaps[name].get("data", {}))
    for e in container.get("env", []):
        env[e["name"]] = e.get("value", "")
    return env


def check_security(w, c, pod_sc):
    sc = c.get("securityContext", {})
    if sc.get("allowPrivilegeEscalation") is not False:
        problem(w, f"container {c['name']}: allowPrivilegeEscalation must be false")
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        problem(w, f"container {c['name']}: capabilities must drop ALL")
    if sc.get("readOnlyRootFilesystem") is not True:
        problem(w, f"container {c['name']}: readOnlyRootFilesystem must be true")
    if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
        problem(w, f"container {c['name']}: runAsNonRoot must be true")
    if sc.get("runAsUser", pod_sc.get("runAsUser")) in (None, 0):
        problem(w, f"container {c['name']}: runAsUser must be a non-zero uid")
    seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
    if seccomp.get("type") != "RuntimeDefault":
        problem(w, f"container {c['name']}: seccompProfile must be RuntimeDefault")


def check_resources(w, c):
    r = c.get("resources", {})
    for what in ("cpu", "memory"):
        if what not in r.get("requests", {}):
            problem(w, f"container {c['name']}: no {what} request")
    if "memory" not in r.get("limits", {}):
        problem(w, f"container {c['name']}: no memory limit")


def check_image(w, c):
    image = c.get("image", "")
    tag = image.rsplit("/", 1)[-1]
    if "@sha256:" not in image and (":" not in tag or tag.endswith(":latest")):
        problem(w, f"container {c['name']}: image {image!r} needs a tag other than latest")


def check_probes(w, c, env):
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe not in c:
            problem(w, f"container {c['name']}: no {probe}")
    health = env.get("ULTICODE_HEALTH_LISTEN")
    if health is None:
        return
    port = int(health.rsplit(":", 1)[1])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if c.get(probe, {}).get("grpc", {}).get("port") != port:
            problem(w, f"container {c['name']}: {probe} must be a gRPC probe on port {port}")


def files_read(env, args):
    """The *_FILE variables the process reads: all, but the init step
    (--migrate=only) reads only the password of the role it migrates as."""
    files = {k for k, v in env.items() if k.endswith("_FILE") and v}
    if "--migrate=only" not in args:
        return files
    return files & {"ULTICODE_PG_MIGRATE_PASSWORD_FILE" if env.get("ULTICODE_PG_MIGRATE_USER")
                    else "ULTICODE_PG_PASSWORD_FILE"}


def under_mount(w, c, name, path):
    if any(path.rstrip("/") == m["mountPath"].rstrip("/") for m in c.get("volumeMounts", [])):
        return  # the mount itself (a directory argument)
    mounts = [m for m in c.get("volumeMounts", [])
              if path.startswith(m["mountPath"].rstrip("/") + "/")]
    if not mounts:
        problem(w, f"container {c['name']}: {name}={path} is under none of its mounts")
        return
    m = max(mounts, key=lambda m: len(m["mountPath"]))  # the innermost mount
    paths = volume_paths(pod_of(w)["spec"], m["name"])
    rel = path[len(m["mountPath"].rstrip("/")) + 1:]
    if paths is not None and rel not in paths:
        problem(w, f"container {c['name']}: {name}={path}: volume {m['name']} has no {rel}")


def source_paths(kind, name, items):
    """Files one Secret or ConfigMap source provides; None if unknown (not
    rendered and not listed item by item). A listed item whose key the
    rendered object lacks provides nothing (the kubelet would fail the pod)."""
    obj = by_kind.get(kind, {}).get(name)
    keys = None if obj is None else set(obj.get("data", {})) | set(obj.get("stringData", {}))
    if items is not None:
        return {i["path"] for i in items if keys is None or i["key"] in keys}
    return keys


def volume_paths(pod_spec, volume_name):
    """Relative file paths a volume provides, or None when that cannot be known."""
    for v in pod_spec.get("volumes", []):
        if v["name"] != volume_name:
            continue
        if "secret" in v:
            return source_paths("Secret", v["secret"]["secretName"], v["secret"].get("items"))
        if "configMap" in v:
            return source_paths("ConfigMap", v["configMap"]["name"], v["configMap"].get("items"))
        if "projected" in v:
            paths = set()
            for s in v["projected"]["sources"]:
                kind = "Secret" if "secret" in s else "ConfigMap"
                src = s.get("secret") or s.get("configMap") or {}
                provided = source_paths(kind, src.get("name"), src.get("items"))
                if provided is None:
                    return None
                paths |= provided
            return paths
        return None
    return set()


def check_env(w, c, env):
    binary = (c.get("command") or [""])[0]
    flags = flags_of(binary)
    if flags is None:
        return
    args = " ".join(c.get("args", []))
    for name in env:
        if name.startswith("ULTICODE_") and name not in flags:
            problem(w, f"container {c['name']}: {name} is not a flag of {binary}")
    for name in sorted(files_read(env, args)):
        under_mount(w, c, name, env[name])
    root_cert = re.search(r"sslrootcert=(\S+)", env.get("ULTICODE_PG_DSN", ""))
    if root_cert:
        under_mount(w, c, "ULTICODE_PG_DSN sslrootcert", root_cert.group(1))


MOUNTED = re.compile(r"(?<![\w.])(/etc/ulticode/[\w./-]+|/etc/redis/[\w./-]+|/acl/[\w./-]+)")


def check_paths(w, c):
    """Every mounted-file path the container names (command, args, exec
    probes, and the configuration files in its mounted ConfigMaps) is under
    one of its mounts, and there when the volume's files are known."""
    texts = list(c.get("command", [])) + list(c.get("args", []))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        texts += c.get(probe, {}).get("exec", {}).get("command", [])
    for m in c.get("volumeMounts", []):
        for v in pod_of(w)["spec"].get("volumes", []):
            if v["name"] == m["name"] and "configMap" in v:
                cm = configmaps.get(v["configMap"]["name"], {})
                texts += list(cm.get("data", {}).values())
    for path in sorted({p.rstrip(".") for t in texts for p in MOUNTED.findall(t)}):
        under_mount(w, c, "path", path)


def memory_bytes(text):
    """Kubernetes quantities (Mi, Gi, M, G) and Redis sizes (mb, gb: powers of 1024)."""
    units = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3,
             "kb": 1024, "mb": 1024**2, "gb": 1024**3}
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", text.strip())
    unit = m.group(2) if m.group(2) in units else m.group(2).lower()
    return int(m.group(1)) * units[unit]


def check_redis_memory(w, c):
    """Redis must refuse writes (noeviction at maxmemory) before its memory
    limit kills it: maxmemory set, at most 80 % of the limit."""
    command = c.get("command", []) + c.get("args", [])
    if "redis-server" not in command:
        return
    maxmemory = None
    for conf in configmaps.values():
        for line in conf.get("data", {}).get("redis.conf", "").splitlines():
            if line.startswith("maxmemory "):
                maxmemory = line.split()[1]
    if "--maxmemory" in command:
        maxmemory = command[command.index("--maxmemory") + 1]
    limit = c.get("resources", {}).get("limits", {}).get("memory")
    if maxmemory is None or limit is None:
        problem(w, f"container {c['name']}: Redis needs maxmemory and a memory limit")
    elif memory_bytes(maxmemory) > 0.8 * memory_bytes(limit):
        problem(w, f"container {c['name']}: maxmemory {maxmemory} is over 80 % of the limit {limit}")


def references(pod_spec):
    """(kind, name) of every Secret and ConfigMap the pod uses."""
    refs = set()
    for v in pod_spec.get("volumes", []):
        if "secret" in v:
            refs.add(("Secret", v["secret"]["secretName"]))
        if "configMap" in v:
            refs.add(("ConfigMap", v["configMap"]["name"]))
        for s in v.get("projected", {}).get("sources", []):
            if "secret" in s:
                refs.add(("Secret", s["secret"]["name"]))
            if "configMap" in s:
                refs.add(("ConfigMap", s["configMap"]["name"]))
    for c in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
        for src in c.get("envFrom", []):
            if "configMapRef" in src:
                refs.add(("ConfigMap", src["configMapRef"]["name"]))
            if "secretRef" in src:
                refs.add(("Secret", src["secretRef"]["name"]))
    return refs


for w in workloads:
    spec = pod_of(w)["spec"]
    pod_sc = spec.get("securityContext", {})
    if spec.get("automountServiceAccountToken") is not False:
        problem(w, "automountServiceAccountToken must be false")
    mounts_secrets = any("secret" in v or "projected" in v for v in spec.get("volumes", []))
    if mounts_secrets and "fsGroup" not in pod_sc:
        problem(w, "mounts Secrets but sets no fsGroup (the files would be root's alone)")
    for c in spec.get("initContainers", []) + spec["containers"]:
        # Native sidecars (init containers that keep running) are long-lived.
        runs_once = c in spec.get("initContainers", []) and c.get("restartPolicy") != "Always"
        env = env_of(c)
        check_security(w, c, pod_sc)
        check_resources(w, c)
        check_image(w, c)
        check_env(w, c, env)
        check_redis_memory(w, c)
        check_paths(w, c)
        if not runs_once and w["kind"] != "Job":
            check_probes(w, c, env)
    for kind, name in references(spec):
        if name not in by_kind.get(kind, {}) and name not in provided:
            problem(w, f"uses {kind} {name}, which is neither rendered nor in {provided_file}")

if overlay == "prod" and secrets:
    problems.append(f"prod: renders Secrets {sorted(secrets)}: secrets never live in the repository")

# ---------------------------------------------------------------- pods, policies

for d in by_kind.get("Deployment", {}).values():
    labels = pod_of(d)["metadata"]["labels"]
    if not any(selects(p["spec"]["selector"], labels)
               for p in by_kind.get("PodDisruptionBudget", {}).values()):
        problem(d, "no PodDisruptionBudget selects its pods")
    keys = {t["topologyKey"] for t in pod_of(d)["spec"].get("topologySpreadConstraints", [])}
    if not {"topology.kubernetes.io/zone", "kubernetes.io/hostname"} <= keys:
        problem(d, "topologySpreadConstraints must cover zones and hosts")

for c in by_kind.get("Cluster", {}).values():
    if c.get("apiVersion", "").startswith("postgresql.cnpg.io/") and c["spec"].get("instances", 1) > 1:
        sync = c["spec"].get("postgresql", {}).get("synchronous", {})
        if sync.get("number", 0) < 1:
            problem(c, "has standbys but no synchronous replication (spec.postgresql.synchronous."
                       "number >= 1): a failover would lose acknowledged commits")

policies = list(by_kind.get("NetworkPolicy", {}).values())
for ns in by_kind.get("Namespace", {}).values():
    labels = ns["metadata"].get("labels", {})
    if labels.get("pod-security.kubernetes.io/enforce") != "restricted":
        problem(ns, "must enforce Pod Security restricted")
namespaces = {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"}
for ns in sorted(n for n in namespaces if n):
    deny = [p for p in policies if p["metadata"].get("namespace") == ns
            and p["spec"]["podSelector"] == {}
            and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
            and not p["spec"].get("ingress") and not p["spec"].get("egress")]
    if not deny:
        problems.append(f"{overlay}: namespace {ns} has no default-deny NetworkPolicy")
for w in workloads:
    labels = pod_of(w)["metadata"]["labels"]
    own = [p for p in policies if p["spec"]["podSelector"] and selects(p["spec"]["podSelector"],
                                                                     labels)]
    if not own:
        problem(w, "no NetworkPolicy of its own (only the namespace-wide ones)")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{overlay}: {len(workloads)} workloads, {len(policies)} network policies: policy holds")
