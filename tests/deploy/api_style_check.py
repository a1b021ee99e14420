#!/usr/bin/env python3
"""The API style rules buf lint cannot express (docs/api.md), checked on the
contract's descriptors (`buf build -o image.json`).

  - AIP-158: a request with page_size has page_token, its response
    next_page_token; no other cursor fields (after_*, next_* but
    next_page_token, first_size, start, count, *_cursor).
  - AIP-155: every mutation (an RPC not named Get*, List*, Query*, Watch*,
    Export*) takes `string request_id = 15`.
  - AIP-142: no number that is a duration (`*_seconds`, `*_ms`, ...): a
    google.protobuf.Duration.
  - AIP-140: no field named for a reserved word of a common language
    (`from`, `class`, ...).
  - AIP-203: every field of a request message carries a field behavior,
    except oneof members (the oneof says which one is required).
  - One owner type: every field named `owner` is ulticode.audit.v1.Owner.

Exit status 1 lists every violation, one a line.
"""
import json
import re
import sys

RESERVED = {
    "and", "as", "assert", "async", "await", "break", "case", "catch", "class", "const",
    "continue", "def", "default", "del", "delete", "do", "elif", "else", "enum", "except",
    "export", "extends", "false", "finally", "for", "from", "func", "function", "global",
    "go", "goto", "if", "import", "in", "interface", "is", "lambda", "let", "new", "nil",
    "none", "nonlocal", "not", "null", "or", "package", "pass", "private", "protected",
    "public", "raise", "return", "select", "static", "struct", "super", "switch", "this",
    "throw", "true", "try", "type", "typeof", "var", "void", "while", "with", "yield",
}
DURATION_NUMBER = re.compile(r".*_(seconds|secs|ms|millis|milliseconds|minutes|hours|days)$")
CURSOR = re.compile(r"^(after_.*|next_(?!page_token$).*|first_size|start|count|.*_cursor)$")
NUMBER_TYPES = {"TYPE_INT32", "TYPE_INT64", "TYPE_UINT32", "TYPE_UINT64", "TYPE_SINT32",
                "TYPE_SINT64", "TYPE_FIXED32", "TYPE_FIXED64", "TYPE_DOUBLE", "TYPE_FLOAT"}
READS = ("Get", "List", "Query", "Watch", "Export")


def messages(image):
    """Every message by full name, nested ones included."""
    out = {}

    def walk(prefix, msgs):
        for m in msgs:
            name = f"{prefix}.{m['name']}"
            out[name] = m
            walk(name, m.get("nestedType", []))

    for f in image["file"]:
        walk("." + f["package"], f.get("messageType", []))
    return out


def fields(msg):
    return {f["name"]: f for f in msg.get("field", [])}


def has_behavior(field):
    return bool(field.get("options", {}).get("[google.api.field_behavior]"))


def check(image):
    bad = []
    msgs = messages(image)
    for name, m in msgs.items():
        for f in m.get("field", []):
            where = f"{name[1:]}.{f['name']}"
            if f["name"] in RESERVED:
                bad.append(f"{where}: a reserved word of a common language (AIP-140)")
            if f["type"] in NUMBER_TYPES and DURATION_NUMBER.match(f["name"]):
                bad.append(f"{where}: a duration as a number; use google.protobuf.Duration (AIP-142)")
            if f["name"] == "owner" and f.get("typeName") != ".ulticode.audit.v1.Owner":
                bad.append(f"{where}: an owner that is not ulticode.audit.v1.Owner")
    for f in image["file"]:
        for service in f.get("service", []):
            for method in service.get("method", []):
                rpc = f"{service['name']}.{method['name']}"
                req, resp = msgs[method["inputType"]], msgs[method["outputType"]]
                rf, pf = fields(req), fields(resp)
                for field in req.get("field", []):
                    if CURSOR.match(field["name"]):
                        bad.append(f"{rpc}: request field {field['name']} is a cursor; "
                                   "use page_size/page_token (AIP-158)")
                    if "oneofIndex" not in field or field.get("proto3Optional"):
                        if not has_behavior(field):
                            bad.append(f"{rpc}: request field {field['name']} has no "
                                       "google.api.field_behavior (AIP-203)")
                for field in resp.get("field", []):
                    if CURSOR.match(field["name"]):
                        bad.append(f"{rpc}: response field {field['name']} is a cursor; "
                                   "use next_page_token (AIP-158)")
                if "page_size" in rf and ("page_token" not in rf or "next_page_token" not in pf):
                    bad.append(f"{rpc}: page_size without page_token/next_page_token (AIP-158)")
                if method["name"].startswith("List") and "page_size" not in rf:
                    bad.append(f"{rpc}: a List method without page_size (AIP-132)")
                if not method["name"].startswith(READS):
                    rid = rf.get("request_id")
                    if not rid or rid["number"] != 15 or rid["type"] != "TYPE_STRING":
                        bad.append(f"{rpc}: a mutation without string request_id = 15 (AIP-155)")
    return bad


def main():
    with open(sys.argv[1]) as f:
        image = json.load(f)
    # Ours only: Google's protos are in the workspace, not in the contract.
    image["file"] = [f for f in image["file"] if f["package"].startswith("ulticode.")]
    bad = check(image)
    for line in bad:
        print(f"api style: {line}")
    if bad:
        sys.exit(1)
    print(f"api style: ok ({len(messages(image))} messages)")


if __name__ == "__main__":
    main()
