#!/usr/bin/env python3
"""A webhook receiver for the forwarder's tests (docs/forwarding.md): checks
each request's signature (X-Ulticode-Signature over X-Ulticode-Timestamp "."
body, HMAC-SHA256 with the shared secret) and its timestamp (within 300 s),
and that X-Ulticode-Log-Indexes names the rows' idempotency keys (their log
indexes: "log_index", or OCSF's metadata.sequence); then appends every row
of an accepted request to --out as it came, one a line. --control names a
file read per request: empty or absent, accept; "503", answer 503; "400 N",
answer 400 to a request holding log index N; "400" alone, answer 400 to
every request (a receiver that refuses the sink's format). Writes its port to --port-file
once listening.
"""
import argparse
import hashlib
import hmac
import http.server
import json
import os
import time


def key(row):
    """A row's idempotency key: its log index, in either schema."""
    return int(row["log_index"] if "log_index" in row else row["metadata"]["sequence"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--secret-file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--control", required=True)
    a = p.parse_args()
    secret = open(a.secret_file, "rb").read()
    # As the forwarder reads every secret file: one trailing newline dropped.
    secret = secret[:-1] if secret.endswith(b"\n") else secret

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def reply(self, code):
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ts = self.headers.get("X-Ulticode-Timestamp", "")
            want = "v1=" + hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(want, self.headers.get("X-Ulticode-Signature", "")):
                return self.reply(401)
            if not ts.isdigit() or abs(time.time() - int(ts)) > 300:
                return self.reply(401)
            lines = body.decode().splitlines()
            indexes = [key(json.loads(line)) for line in lines]
            if self.headers.get("X-Ulticode-Log-Indexes") != f"{indexes[0]}-{indexes[-1]}":
                return self.reply(422)
            control = open(a.control).read().split() if os.path.exists(a.control) else []
            if control[:1] == ["503"]:
                return self.reply(503)
            if control == ["400"] or (control[:1] == ["400"] and int(control[1]) in indexes):
                return self.reply(400)
            with open(a.out, "a") as f:
                f.write("".join(line + "\n" for line in lines))
                f.flush()
                os.fsync(f.fileno())
            self.reply(204)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
