#!/usr/bin/python3
"""grpcurl.py: a grpcurl-compatible command-line client that knows no service
ahead of time and learns every type through gRPC server reflection
(grpc.reflection.v1alpha.ServerReflection, the only version gRPC 1.51 serves).

It exists to prove that the servers work with grpcurl (which cannot be
installed here): same command syntax, same output, same exit codes.

Needs Debian's python3-grpcio and python3-protobuf (hence /usr/bin/python3),
protoc, and reflection.proto from Debian's grpc-proto (/usr/share/grpc-proto,
override with GRPCURL_PY_PROTO_ROOT); protoc compiles reflection.proto into a
descriptor set at run time, so no generated stubs are needed at all.
"""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

PROG = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "grpcurl.py"
VERSION = "grpcurl.py 1.0 (grpcurl-compatible subset)"

EXIT_FAILURE = 1
EXIT_USAGE = 2
STATUS_CODE_OFFSET = 64  # grpcurl exits with 64 + the gRPC status code

USAGE = """Usage:
  {prog} [flags] HOST:PORT list [SERVICE]
  {prog} [flags] HOST:PORT describe [SYMBOL]
  {prog} [flags] HOST:PORT SERVICE/METHOD     (or SERVICE.METHOD)
"""

HELP = USAGE + """
A grpcurl-compatible client that learns everything through server reflection
(grpc.reflection.v1alpha). Flags come before the address (Go flag style: one
or two dashes, "-flag value" or "-flag=value"; booleans as "-flag").

Verbs:
  list               the server's services, one per line, sorted
  list SERVICE       the service's methods (fully qualified), sorted
  describe [SYMBOL]  a service, method, message, enum, field, enum value or
                     one-of in proto syntax (all services when SYMBOL is absent)
  SERVICE/METHOD     invokes the method with the request(s) from -d and prints
                     each response message as JSON (indent 2, lowerCamelCase
                     names, like grpcurl). All four RPC kinds are supported.

Flags:
  -plaintext         use plain-text HTTP/2 (no TLS).
  -cacert FILE       TLS: trust this PEM CA (default: the system's CAs).
  -cert FILE, -key FILE  TLS: present this client certificate (mutual TLS).
  -H 'name: value'   a request header; repeatable. Sent with the RPC and with
                     the reflection requests. "-bin" headers are base64.
  -expand-headers    "${NAME}" in a header is the environment variable NAME
                     (keeps tokens off the command line).
  -rpc-header 'name: value'      a header sent with the RPC only; repeatable.
  -reflect-header 'name: value'  a header sent with reflection only; repeatable.
  -d DATA            request data as JSON. "@" reads it from stdin. Several
                     JSON objects in a row are several messages (client
                     streaming). Absent or empty: one empty message ({{}}).
  -allow-unknown-fields  ignore unknown fields in -d instead of failing.
  -emit-defaults     print fields that have their default value.
  -format json       the only format supported.
  -format-error      print a non-OK status as JSON (code, message, details).
  -max-time SECONDS  deadline for the whole operation (dial, reflection, RPC).
  -connect-timeout SECONDS  how long to wait for the connection (default 10).
  -authority VALUE   the :authority pseudo-header.
  -max-msg-sz BYTES  the largest response message accepted (default 4 MiB).
  -user-agent VALUE  prepended to the user agent.
  -v                 verbose: resolved method, metadata, headers, trailers.
  -help              this text.
  -version           prints the version.

Exit status (grpcurl's conventions):
  0        success
  1        failure: could not connect, symbol not found, bad request data
           (-d that is not valid JSON or does not fit the request message:
           the message names the problem), reflection errors
  2        bad usage (unknown flag, missing or extra arguments)
  64+N     the RPC ended with gRPC status code N, e.g. 76 = Unimplemented,
           67 = InvalidArgument, 69 = NotFound, 68 = DeadlineExceeded.
           The status is printed to stderr as
             ERROR:
               Code: Unimplemented
               Message: ...

Environment:
  GRPCURL_PY_PROTO_ROOT  where grpc/reflection/v1alpha/reflection.proto is
                         (default /usr/share/grpc-proto)
  GRPCURL_PY_PROTOC      the protoc to run (default: protoc on PATH)
"""

# Go's codes.Code names, which grpcurl prints.
CODE_NAMES = {
    0: "OK", 1: "Canceled", 2: "Unknown", 3: "InvalidArgument",
    4: "DeadlineExceeded", 5: "NotFound", 6: "AlreadyExists",
    7: "PermissionDenied", 8: "ResourceExhausted", 9: "FailedPrecondition",
    10: "Aborted", 11: "OutOfRange", 12: "Unimplemented", 13: "Internal",
    14: "Unavailable", 15: "DataLoss", 16: "Unauthenticated",
}

REFLECTION_SERVICE = "grpc.reflection.v1alpha.ServerReflection"
REFLECTION_METHOD = "/" + REFLECTION_SERVICE + "/ServerReflectionInfo"
REFLECTION_PROTO = "grpc/reflection/v1alpha/reflection.proto"


class UsageError(Exception):
    pass


class Failure(Exception):
    """Ends the program with a message on stderr and exit status 1."""


class SymbolNotFound(Failure):
    pass


# --------------------------------------------------------------------------
# Command line (Go flag package semantics, like grpcurl)

BOOL_FLAGS = {"plaintext", "insecure", "emit-defaults", "allow-unknown-fields", "expand-headers",
              "format-error", "v", "vv", "help", "h", "version"}
VALUE_FLAGS = {"H", "rpc-header", "reflect-header", "d", "max-time",
               "connect-timeout", "format", "authority", "max-msg-sz",
               "user-agent", "cacert", "cert", "key"}
REPEATED_FLAGS = {"H", "rpc-header", "reflect-header"}


def parse_bool(name, text):
    t = text.strip()
    if t in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if t in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise UsageError('invalid boolean value "%s" for -%s' % (text, name))


def parse_args(argv):
    opts = {name: [] for name in REPEATED_FLAGS}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if len(arg) < 2 or not arg.startswith("-"):
            break
        name = arg[2:] if arg.startswith("--") else arg[1:]
        value = None
        if "=" in name:
            name, value = name.split("=", 1)
        if name in BOOL_FLAGS:
            opts[name] = True if value is None else parse_bool(name, value)
        elif name in VALUE_FLAGS:
            if value is None:
                i += 1
                if i >= len(argv):
                    raise UsageError("flag needs an argument: -" + name)
                value = argv[i]
            if name in REPEATED_FLAGS:
                opts[name].append(value)
            else:
                opts[name] = value
        else:
            raise UsageError("flag provided but not defined: -" + name)
        i += 1
    return opts, argv[i:]


def parse_seconds(opts, name, default):
    text = opts.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise UsageError('invalid value "%s" for flag -%s: not a number' % (text, name))
    if value < 0:
        raise UsageError("the -%s argument must not be negative" % name)
    return value


def expand_env(raw, flag):
    """grpcurl's -expand-headers: ${NAME} is the environment variable NAME, so
    a secret (a bearer token) never has to appear on the command line."""
    import re

    def value(m):
        if m.group(1) not in os.environ:
            raise UsageError('-%s "%s": environment variable %s is not set'
                             % (flag, raw.split(":")[0], m.group(1)))
        return os.environ[m.group(1)]
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value, raw)


def parse_headers(values, flag, expand=False):
    """grpcurl's MetadataFromHeaders: 'name: value', name lower-cased."""
    md = []
    for raw in values:
        if expand:
            raw = expand_env(raw, flag)
        name, _, value = raw.partition(":")
        name = name.strip().lower()
        value = value.strip()
        if not name:
            raise UsageError('invalid -%s "%s": want "name: value"' % (flag, raw))
        if name.endswith("-bin"):
            md.append((name, decode_binary_header(value)))
        else:
            md.append((name, value))
    return md


def decode_binary_header(value):
    """grpcurl base64-decodes "-bin" header values (std or URL alphabet,
    padded or not); anything else is sent as the raw bytes."""
    padded = value + "=" * (-len(value) % 4)
    for alt in (None, b"-_"):
        try:
            return base64.b64decode(padded.encode(), altchars=alt, validate=True)
        except (ValueError, TypeError):
            continue
    return value.encode()


# --------------------------------------------------------------------------
# Protobuf plumbing

def message_class(factory, descriptor):
    from google.protobuf import message_factory
    get = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get is not None:
        return get(descriptor)
    return factory.GetPrototype(descriptor)


def load_reflection_types():
    """Compiles reflection.proto with protoc and returns its message classes."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    root = os.environ.get("GRPCURL_PY_PROTO_ROOT", "/usr/share/grpc-proto")
    protoc = os.environ.get("GRPCURL_PY_PROTOC") or shutil.which("protoc")
    if not protoc:
        raise Failure("protoc not found on PATH (needed to compile %s)" % REFLECTION_PROTO)
    if not os.path.isfile(os.path.join(root, REFLECTION_PROTO)):
        raise Failure("%s not found under %s (install grpc-proto or set "
                      "GRPCURL_PY_PROTO_ROOT)" % (REFLECTION_PROTO, root))
    with tempfile.TemporaryDirectory(prefix="grpcurl-py-") as tmp:
        out = os.path.join(tmp, "reflection.pb")
        proc = subprocess.run(
            [protoc, "-I" + root, "--include_imports", "--descriptor_set_out=" + out,
             REFLECTION_PROTO], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise Failure("protoc failed on %s: %s" % (
                REFLECTION_PROTO, proc.stderr.decode(errors="replace").strip()))
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fdp in fds.file:
        pool.Add(fdp)
    factory = message_factory.MessageFactory(pool)
    pkg = "grpc.reflection.v1alpha."
    return (message_class(factory, pool.FindMessageTypeByName(pkg + "ServerReflectionRequest")),
            message_class(factory, pool.FindMessageTypeByName(pkg + "ServerReflectionResponse")))


def well_known_file(name):
    """A FileDescriptorProto of a file the Python runtime knows (WKTs)."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    import importlib
    # Importing these registers them in the default pool.
    for module in ("any", "api", "duration", "empty", "field_mask", "source_context",
                   "struct", "timestamp", "type", "wrappers", "descriptor"):
        importlib.import_module("google.protobuf.%s_pb2" % module)
    try:
        fd = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    fdp = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(fdp)
    return fdp


def well_known_file_of_symbol(symbol):
    if not symbol.startswith("google.protobuf."):
        return None
    from google.protobuf import descriptor_pool
    well_known_file("google/protobuf/any.proto")  # registers the well-known types
    try:
        name = descriptor_pool.Default().FindFileContainingSymbol(symbol).name
    except KeyError:
        return None
    return well_known_file(name)


# --------------------------------------------------------------------------
# Reflection client: one bidirectional stream, one request at a time

class ReflectionClient:
    def __init__(self, channel, host, metadata, deadline):
        self._req_cls, self._resp_cls = load_reflection_types()
        self._host = host
        self._channel = channel
        self._metadata = metadata
        self._deadline = deadline
        self._stream = None
        self._queue = None

    def _open(self):
        import queue
        self._queue = queue.Queue()
        q = self._queue

        def requests():
            while True:
                item = q.get()
                if item is None:
                    return
                yield item

        call = self._channel.stream_stream(
            REFLECTION_METHOD,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=self._resp_cls.FromString)
        self._stream = call(requests(), metadata=self._metadata or None,
                            timeout=remaining(self._deadline))

    def close(self):
        if self._stream is not None:
            self._queue.put(None)
            self._stream.cancel()
            self._stream = None

    def _ask(self, **kwargs):
        import grpc
        if self._stream is None:
            self._open()
        self._queue.put(self._req_cls(host=self._host, **kwargs))
        try:
            resp = next(self._stream)
        except StopIteration:
            self._stream = None
            raise Failure("server reflection stream ended unexpectedly")
        except grpc.RpcError as e:
            self._stream = None
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise Failure("server does not support the reflection API (%s): %s" % (
                    REFLECTION_SERVICE, e.details() or "Unimplemented"))
            raise ReflectionRpcError(e)
        kind = resp.WhichOneof("message_response")
        if kind == "error_response":
            err = resp.error_response
            if err.error_code == 5:  # NOT_FOUND
                raise SymbolNotFound(err.error_message)
            raise Failure("reflection error: %s: %s" % (
                CODE_NAMES.get(err.error_code, err.error_code), err.error_message))
        return resp

    def list_services(self):
        resp = self._ask(list_services="")
        return [s.name for s in resp.list_services_response.service]

    def file_containing_symbol(self, symbol):
        resp = self._ask(file_containing_symbol=symbol)
        return list(resp.file_descriptor_response.file_descriptor_proto)

    def file_by_filename(self, name):
        resp = self._ask(file_by_filename=name)
        return list(resp.file_descriptor_response.file_descriptor_proto)


class ReflectionRpcError(Exception):
    def __init__(self, rpc_error):
        super().__init__(str(rpc_error))
        self.rpc_error = rpc_error


# --------------------------------------------------------------------------
# Descriptors learnt from the server, in a fresh pool

class DescriptorSource:
    def __init__(self, reflection):
        from google.protobuf import descriptor_pool, message_factory
        self._refl = reflection
        self._protos = {}   # file name -> FileDescriptorProto
        self._added = set()
        self.pool = descriptor_pool.DescriptorPool()
        self.factory = message_factory.MessageFactory(self.pool)

    def _ingest(self, blobs):
        from google.protobuf import descriptor_pb2
        names = []
        for blob in blobs:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(blob)
            self._protos.setdefault(fdp.name, fdp)
            names.append(fdp.name)
        return names

    def _fetch_file(self, name):
        if name in self._protos:
            return
        try:
            self._ingest(self._refl.file_by_filename(name))
        except SymbolNotFound:
            pass
        if name not in self._protos:
            fdp = well_known_file(name)
            if fdp is None:
                raise Failure('file "%s" not found: the server does not have it' % name)
            self._protos[name] = fdp

    def _add(self, name, visiting=()):
        if name in self._added:
            return
        if name in visiting:
            raise Failure("import cycle through %s" % name)
        self._fetch_file(name)
        fdp = self._protos[name]
        for dep in fdp.dependency:
            self._add(dep, visiting + (name,))
        try:
            self.pool.Add(fdp)
        except Exception as e:  # TypeError from the C++ pool, others from pure Python
            try:
                self.pool.FindFileByName(name)  # already there: fine
            except KeyError:
                raise Failure('could not load "%s" from the server: %s' % (name, str(e).strip()))
        self._added.add(name)

    def load_symbol(self, symbol, nested_ok=True):
        """Fetches the file defining `symbol` (with its imports) into the pool."""
        symbol = symbol.lstrip(".")
        try:
            return self.lookup(symbol)
        except KeyError:
            pass
        try:
            names = self._ingest(self._refl.file_containing_symbol(symbol))
        except SymbolNotFound:
            # pkg.Enum.VALUE (how grpcurl names enum values) is unknown to a
            # C++ server, which scopes values like their enum: load the parent.
            wkt = well_known_file_of_symbol(symbol)
            if wkt is not None:  # a well-known type the server does not link
                self._protos.setdefault(wkt.name, wkt)
                self._add(wkt.name)
                try:
                    return self.lookup(symbol)
                except KeyError:
                    pass
            parent = symbol.rpartition(".")[0]
            if parent and nested_ok:
                try:
                    self.load_symbol(parent, nested_ok=False)
                    return self.lookup(symbol)
                except (SymbolNotFound, KeyError):
                    pass
            raise SymbolNotFound("Symbol not found: " + symbol)
        # The first file is the one with the symbol; the rest are its imports.
        for name in names:
            self._add(name)
        try:
            return self.lookup(symbol)
        except KeyError:
            raise SymbolNotFound("Symbol not found: " + symbol)

    def lookup(self, symbol):
        """(kind, descriptor) of a symbol already in the pool, else KeyError."""
        pool = self.pool
        finders = (("service", pool.FindServiceByName),
                   ("message", pool.FindMessageTypeByName),
                   ("enum", pool.FindEnumTypeByName),
                   ("method", pool.FindMethodByName),
                   ("extension", pool.FindExtensionByName),
                   ("field", pool.FindFieldByName),
                   ("oneof", pool.FindOneofByName))
        for kind, find in finders:
            try:
                return kind, find(symbol)
            except KeyError:
                continue
        parent, _, leaf = symbol.rpartition(".")
        if parent:
            try:
                enum = pool.FindEnumTypeByName(parent)
                if leaf in enum.values_by_name:
                    return "enum value", enum.values_by_name[leaf]
            except KeyError:
                pass
            # Protobuf scopes enum values like their enum: pkg.VALUE for
            # pkg.Enum.VALUE, Msg.VALUE for Msg.Enum.VALUE.
            enums = []
            try:
                enums = list(pool.FindMessageTypeByName(parent).enum_types)
            except KeyError:
                try:
                    fd = pool.FindFileContainingSymbol(symbol)
                    if fd.package == parent:
                        enums = list(fd.enum_types_by_name.values())
                except KeyError:
                    pass
            for enum in enums:
                if leaf in enum.values_by_name:
                    return "enum value", enum.values_by_name[leaf]
        raise KeyError(symbol)

    def message_class(self, descriptor):
        return message_class(self.factory, descriptor)

    # Any resolution (grpcurl resolves google.protobuf.Any through reflection too)

    def resolve_any_in_message(self, msg, depth=0):
        if depth > 64:
            return
        from google.protobuf.descriptor import FieldDescriptor
        for field, value in msg.ListFields():
            if field.type != FieldDescriptor.TYPE_MESSAGE:
                continue
            if field.message_type.GetOptions().map_entry:
                vfield = field.message_type.fields_by_name["value"]
                if vfield.type != FieldDescriptor.TYPE_MESSAGE:
                    continue
                values = list(value.values())
            elif field.label == FieldDescriptor.LABEL_REPEATED:
                values = list(value)
            else:
                values = [value]
            for v in values:
                self._resolve_any_value(v, depth)

    def _resolve_any_value(self, v, depth):
        if v.DESCRIPTOR.full_name == "google.protobuf.Any":
            type_name = v.type_url.rpartition("/")[2]
            if not type_name:
                return
            try:
                _, desc = self.load_symbol(type_name)
                inner = self.message_class(desc)()
                inner.ParseFromString(v.value)
            except Exception:
                return  # MessageToJson will report the unknown type
            self.resolve_any_in_message(inner, depth + 1)
        else:
            self.resolve_any_in_message(v, depth + 1)

    def resolve_any_in_json(self, value, depth=0):
        if depth > 64:
            return
        if isinstance(value, dict):
            t = value.get("@type")
            if isinstance(t, str) and t.rpartition("/")[2]:
                try:
                    self.load_symbol(t.rpartition("/")[2])
                except Failure:
                    pass
            for v in value.values():
                self.resolve_any_in_json(v, depth + 1)
        elif isinstance(value, list):
            for v in value:
                self.resolve_any_in_json(v, depth + 1)


# --------------------------------------------------------------------------
# describe: proto-syntax text, like grpcurl's protoprint

SCALAR_NAMES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
    7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32",
    15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64",
}
TYPE_GROUP, TYPE_MESSAGE, TYPE_ENUM = 10, 11, 14
LABEL_OPTIONAL, LABEL_REQUIRED, LABEL_REPEATED = 1, 2, 3


def to_proto(descriptor, proto_cls_name):
    from google.protobuf import descriptor_pb2
    proto = getattr(descriptor_pb2, proto_cls_name)()
    descriptor.CopyToProto(proto)
    return proto


def default_json_name(name):
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        elif upper:
            out.append(ch.upper())
            upper = False
        else:
            out.append(ch)
    return "".join(out)


def field_type_name(fp):
    if fp.type in (TYPE_MESSAGE, TYPE_ENUM, TYPE_GROUP) or fp.type_name:
        return fp.type_name
    return SCALAR_NAMES.get(fp.type, "?")


def field_options_text(fp):
    opts = []
    if fp.HasField("default_value"):
        dv = fp.default_value
        if fp.type in (9, 12):
            dv = json.dumps(dv)
        opts.append("default = " + dv)
    if fp.json_name and fp.json_name != default_json_name(fp.name):
        opts.append("json_name = " + json.dumps(fp.json_name))
    o = fp.options
    if o.HasField("packed"):
        opts.append("packed = " + ("true" if o.packed else "false"))
    if o.HasField("deprecated") and o.deprecated:
        opts.append("deprecated = true")
    if o.HasField("lazy") and o.lazy:
        opts.append("lazy = true")
    if o.HasField("jstype"):
        opts.append("jstype = " + ["JS_NORMAL", "JS_STRING", "JS_NUMBER"][o.jstype])
    if o.HasField("ctype"):
        opts.append("ctype = " + ["STRING", "CORD", "STRING_PIECE"][o.ctype])
    return " [" + ", ".join(opts) + "]" if opts else ""


def field_text(fp, syntax, map_entries, in_oneof=False):
    if fp.type_name and fp.type_name in map_entries:
        entry = map_entries[fp.type_name]
        key = next(f for f in entry.field if f.number == 1)
        val = next(f for f in entry.field if f.number == 2)
        typ = "map<%s, %s>" % (field_type_name(key), field_type_name(val))
        label = ""
    else:
        typ = field_type_name(fp)
        if fp.label == LABEL_REPEATED:
            label = "repeated "
        elif fp.label == LABEL_REQUIRED:
            label = "required "
        elif in_oneof:
            label = ""
        elif syntax == "proto3":
            label = "optional " if fp.proto3_optional else ""
        else:
            label = "optional "
    return "%s%s %s = %d%s;" % (label, typ, fp.name, fp.number, field_options_text(fp))


def ranges_text(ranges, exclusive_end, max_value):
    parts = []
    for r in ranges:
        end = r.end - 1 if exclusive_end else r.end
        if end >= max_value:
            parts.append("%d to max" % r.start)
        elif end == r.start:
            parts.append(str(r.start))
        else:
            parts.append("%d to %d" % (r.start, end))
    return ", ".join(parts)


def enum_lines(ep, indent=""):
    lines = [indent + "enum %s {" % ep.name]
    if ep.options.allow_alias:
        lines.append(indent + "  option allow_alias = true;")
    for v in ep.value:
        opt = " [deprecated = true]" if v.options.deprecated else ""
        lines.append(indent + "  %s = %d%s;" % (v.name, v.number, opt))
    if ep.reserved_range:
        lines.append(indent + "  reserved %s;" % ranges_text(ep.reserved_range, False, 2**31 - 1))
    if ep.reserved_name:
        lines.append(indent + "  reserved %s;" % ", ".join(json.dumps(n) for n in ep.reserved_name))
    lines.append(indent + "}")
    return lines


def message_lines(dp, syntax, scope, indent=""):
    """dp: DescriptorProto; scope: the message's full name with a leading dot."""
    map_entries = {scope + "." + n.name: n for n in dp.nested_type if n.options.map_entry}
    lines = [indent + "message %s {" % dp.name]
    inner = indent + "  "
    if dp.options.deprecated:
        lines.append(inner + "option deprecated = true;")
    printed_oneofs = set()
    for fp in dp.field:
        real_oneof = fp.HasField("oneof_index") and not fp.proto3_optional
        if real_oneof:
            idx = fp.oneof_index
            if idx in printed_oneofs:
                continue
            printed_oneofs.add(idx)
            lines.append(inner + "oneof %s {" % dp.oneof_decl[idx].name)
            for member in dp.field:
                if member.HasField("oneof_index") and member.oneof_index == idx \
                        and not member.proto3_optional:
                    lines.append(inner + "  " + field_text(member, syntax, map_entries, True))
            lines.append(inner + "}")
        else:
            lines.append(inner + field_text(fp, syntax, map_entries))
    for nested in dp.nested_type:
        if nested.options.map_entry:
            continue
        lines.extend(message_lines(nested, syntax, scope + "." + nested.name, inner))
    for ep in dp.enum_type:
        lines.extend(enum_lines(ep, inner))
    for ext in dp.extension:
        lines.append(inner + "extend %s {" % ext.extendee)
        lines.append(inner + "  " + field_text(ext, syntax, {}))
        lines.append(inner + "}")
    if dp.extension_range:
        lines.append(inner + "extensions %s;" % ranges_text(dp.extension_range, True, 536870911))
    if dp.reserved_range:
        lines.append(inner + "reserved %s;" % ranges_text(dp.reserved_range, True, 536870911))
    if dp.reserved_name:
        lines.append(inner + "reserved %s;" % ", ".join(json.dumps(n) for n in dp.reserved_name))
    lines.append(indent + "}")
    return lines


def method_text(mp):
    opt = " option deprecated = true;" if mp.options.deprecated else ""
    return "rpc %s ( %s%s ) returns ( %s%s );%s" % (
        mp.name, "stream " if mp.client_streaming else "", mp.input_type,
        "stream " if mp.server_streaming else "", mp.output_type, opt)


def service_lines(sp):
    lines = ["service %s {" % sp.name]
    if sp.options.deprecated:
        lines.append("  option deprecated = true;")
    for mp in sp.method:
        lines.append("  " + method_text(mp))
    lines.append("}")
    return lines


def containing_message_proto(descriptor):
    parent = descriptor.containing_type
    return to_proto(parent, "DescriptorProto"), parent


def full_name(kind, d):
    if kind == "enum value":  # named pkg.Enum.VALUE, like grpcurl does
        return d.type.full_name + "." + d.name
    return d.full_name


ARTICLES = {"service": "a service", "method": "a method", "message": "a message",
            "enum": "an enum", "field": "a field", "extension": "an extension",
            "oneof": "a one-of", "enum value": "an enum value"}


def describe_text(kind, d):
    if kind == "service":
        return "\n".join(service_lines(to_proto(d, "ServiceDescriptorProto")))
    if kind == "method":
        sp = to_proto(d.containing_service, "ServiceDescriptorProto")
        return method_text(next(m for m in sp.method if m.name == d.name))
    if kind == "message":
        return "\n".join(message_lines(to_proto(d, "DescriptorProto"), d.file.syntax,
                                       "." + d.full_name))
    if kind == "enum":
        return "\n".join(enum_lines(to_proto(d, "EnumDescriptorProto")))
    if kind == "enum value":
        opt = " [deprecated = true]" if d.GetOptions().deprecated else ""
        return "%s = %d%s;" % (d.name, d.number, opt)
    if kind == "field":
        dp, parent = containing_message_proto(d)
        scope = "." + parent.full_name
        map_entries = {scope + "." + n.name: n for n in dp.nested_type if n.options.map_entry}
        fp = next(f for f in dp.field if f.name == d.name)
        return field_text(fp, parent.file.syntax, map_entries)
    if kind == "extension":
        from google.protobuf import descriptor_pb2
        fp = descriptor_pb2.FieldDescriptorProto()
        # Rebuild from the file so type names are fully qualified.
        fdp = to_proto(d.file, "FileDescriptorProto")
        holder = fdp.extension
        if d.extension_scope is not None:
            holder = to_proto(d.extension_scope, "DescriptorProto").extension
        fp = next(f for f in holder if f.name == d.name)
        return "extend %s {\n  %s\n}" % (fp.extendee, field_text(fp, d.file.syntax, {}))
    if kind == "oneof":
        dp, parent = containing_message_proto(d)
        scope = "." + parent.full_name
        map_entries = {scope + "." + n.name: n for n in dp.nested_type if n.options.map_entry}
        idx = [o.name for o in dp.oneof_decl].index(d.name)
        lines = ["oneof %s {" % d.name]
        for fp in dp.field:
            if fp.HasField("oneof_index") and fp.oneof_index == idx:
                lines.append("  " + field_text(fp, parent.file.syntax, map_entries, True))
        lines.append("}")
        return "\n".join(lines)
    raise Failure("cannot describe a %s" % kind)


# --------------------------------------------------------------------------
# Invocation helpers

def remaining(deadline):
    if deadline is None:
        return None
    return max(deadline - time.monotonic(), 0.001)


def split_method(symbol):
    """SERVICE/METHOD or SERVICE.METHOD -> (service, method)."""
    s = symbol.lstrip("/").lstrip(".")
    if "/" in s:
        svc, _, meth = s.rpartition("/")
    else:
        svc, _, meth = s.rpartition(".")
    if not svc or not meth:
        raise Failure('given method name "%s" is not in expected format: '
                      '"service/method" or "service.method"' % symbol)
    return svc, meth


def split_json_messages(text):
    """A stream of JSON values -> list of their texts (grpcurl's -d format)."""
    decoder = json.JSONDecoder()
    out, i, n = [], 0, len(text)
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            return out
        try:
            _, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise Failure("invalid JSON in request data (message %d): %s" % (len(out) + 1, e))
        out.append(text[i:end])
        i = end


def parse_requests(texts, cls, source, allow_unknown):
    from google.protobuf import json_format
    msgs = []
    for k, text in enumerate(texts, 1):
        value = json.loads(text)
        if not isinstance(value, dict):
            raise Failure("request data (message %d) must be a JSON object, not %s" % (
                k, type(value).__name__ if value is not None else "null"))
        source.resolve_any_in_json(value)
        msg = cls()
        try:
            json_format.Parse(text, msg, ignore_unknown_fields=allow_unknown,
                              descriptor_pool=source.pool)
        except json_format.ParseError as e:
            raise Failure("request data (message %d) does not fit %s: %s" % (
                k, cls.DESCRIPTOR.full_name, e))
        msgs.append(msg)
    return msgs


def to_json(msg, source, emit_defaults):
    from google.protobuf import json_format
    source.resolve_any_in_message(msg)
    obj = json_format.MessageToDict(
        msg, including_default_value_fields=emit_defaults, descriptor_pool=source.pool)
    return json.dumps(go_style_numbers(obj), indent=2, ensure_ascii=False)


def go_style_numbers(value):
    """Go's protojson (grpcurl) prints an integral double as 1, Python as 1.0."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return int(value)
        return value
    if isinstance(value, dict):
        return {k: go_style_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [go_style_numbers(v) for v in value]
    return value


def metadata_text(md):
    if not md:
        return "(empty)"
    lines = []
    for k, v in sorted(md, key=lambda kv: kv[0]):
        if isinstance(v, bytes):
            v = base64.b64encode(v).decode()
        lines.append("%s: %s" % (k, v))
    return "\n".join(lines)


def status_details(trailers, source):
    """google.rpc.Status details from grpc-status-details-bin, as JSON texts."""
    blob = None
    for k, v in trailers or ():
        if k == "grpc-status-details-bin":
            blob = v
    if not blob:
        return []
    try:
        from google.protobuf import any_pb2
        # google.rpc.Status: code=1, message=2, repeated Any details=3.
        details = []
        pos = 0
        data = bytes(blob)
        while pos < len(data):
            key, pos = read_varint(data, pos)
            field, wire = key >> 3, key & 7
            if wire == 0:
                _, pos = read_varint(data, pos)
            elif wire == 2:
                length, pos = read_varint(data, pos)
                chunk = data[pos:pos + length]
                pos += length
                if field == 3:
                    details.append(any_pb2.Any.FromString(chunk))
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                return []
    except Exception:
        return []
    out = []
    for det in details:
        try:
            _, desc = source.load_symbol(det.type_url.rpartition("/")[2])
            inner = source.message_class(desc)()
            inner.ParseFromString(det.value)
            source.resolve_any_in_message(inner)
            from google.protobuf import json_format
            js = go_style_numbers(json_format.MessageToDict(inner, descriptor_pool=source.pool))
            out.append(json.dumps(dict([("@type", det.type_url)] + list(js.items())),
                                  indent=2, ensure_ascii=False))
        except Exception:
            out.append(json.dumps({"@type": det.type_url,
                                   "value": base64.b64encode(det.value).decode()}, indent=2))
    return out


def read_varint(data, pos):
    result, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def print_status(code, message, details, as_json):
    name = CODE_NAMES.get(code, "Code(%d)" % code)
    if as_json:
        obj = {"code": code, "message": message}
        if details:
            obj["details"] = [json.loads(d) for d in details]
        sys.stderr.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
        return
    sys.stderr.write("ERROR:\n  Code: %s\n  Message: %s\n" % (name, message))
    if details:
        sys.stderr.write("  Details:\n")
        for i, d in enumerate(details, 1):
            prefix = "  %d)" % i
            pad = " " * len(prefix) + "\t"
            sys.stderr.write(prefix + "\t" + d.replace("\n", "\n" + pad) + "\n")


# --------------------------------------------------------------------------
# Connection

def read_file(path, flag):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError("cannot read -%s file %s: %s" % (flag, path, e.strerror))


def tls_credentials(opts):
    """TLS like grpcurl: -cacert trusts that CA (default: the system's);
    -cert and -key present a client certificate (mutual TLS)."""
    import grpc
    if bool(opts.get("cert")) != bool(opts.get("key")):
        raise UsageError("-cert and -key go together.")
    root = read_file(opts["cacert"], "cacert") if opts.get("cacert") else None
    key = read_file(opts["key"], "key") if opts.get("key") else None
    chain = read_file(opts["cert"], "cert") if opts.get("cert") else None
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                        certificate_chain=chain)


def dial(target, opts, deadline, connect_timeout):
    import grpc
    options = [("grpc.primary_user_agent",
                ((opts["user-agent"] + " ") if opts.get("user-agent") else "") + "grpcurl.py/1.0")]
    if opts.get("authority"):
        options.append(("grpc.default_authority", opts["authority"]))
    if opts.get("max-msg-sz"):
        try:
            options.append(("grpc.max_receive_message_length", int(opts["max-msg-sz"])))
        except ValueError:
            raise UsageError('invalid value "%s" for flag -max-msg-sz' % opts["max-msg-sz"])
    if opts.get("plaintext"):
        channel = grpc.insecure_channel(target, options=options)
    else:
        channel = grpc.secure_channel(target, tls_credentials(opts), options=options)

    # Like grpcurl's blocking dial: wait for READY, fail fast on a hard error.
    done = threading.Event()
    state = {"last": None, "failures": 0}

    def on_change(connectivity):
        state["last"] = connectivity
        if connectivity == grpc.ChannelConnectivity.READY:
            done.set()
        elif connectivity in (grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                              grpc.ChannelConnectivity.SHUTDOWN):
            done.set()

    channel.subscribe(on_change, try_to_connect=True)
    wait = connect_timeout
    if deadline is not None:
        wait = min(wait, max(deadline - time.monotonic(), 0))
    done.wait(wait)
    channel.unsubscribe(on_change)
    if state["last"] == grpc.ChannelConnectivity.READY:
        return channel
    channel.close()
    if state["last"] in (grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                         grpc.ChannelConnectivity.SHUTDOWN):
        reason = connect_error_reason(target) or "connection failed"
    else:
        reason = "context deadline exceeded"
    raise Failure('Failed to dial target host "%s": %s' % (target, reason))


def connect_error_reason(target):
    """Best-effort 'dial tcp ...: connect: connection refused' for TCP targets."""
    t = target
    for prefix in ("dns:///", "ipv4:", "ipv6:"):
        if t.startswith(prefix):
            t = t[len(prefix):]
    if t.startswith("unix:"):
        return None
    host, sep, port = t.rpartition(":")
    if not sep or not port.isdigit():
        return None
    host = host.strip("[]") or "localhost"
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return None
    except OSError as e:
        text = e.strerror or str(e)
        return "dial tcp %s: connect: %s" % (t, text.lower())


# --------------------------------------------------------------------------
# Main

def usage_fail(message):
    sys.stderr.write(message + "\n" + USAGE.format(prog=PROG)
                     + "Try '%s -help' for more details.\n" % PROG)
    return EXIT_USAGE


def main(argv):
    try:
        opts, args = parse_args(argv)
    except UsageError as e:
        return usage_fail(str(e))
    if opts.get("help") or opts.get("h"):
        sys.stdout.write(HELP.format(prog=PROG))
        return 0
    if opts.get("version"):
        print(VERSION)
        return 0
    try:
        return run(opts, args)
    except UsageError as e:
        return usage_fail(str(e))
    except Failure as e:
        sys.stderr.write("%s\n" % e)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


def run(opts, args):
    if not args:
        raise UsageError("Too few arguments.")
    target = ""
    if args[0] not in ("list", "describe"):
        target, args = args[0], args[1:]
    if not args:
        raise UsageError("Too few arguments.")
    verb = args[0] if args[0] in ("list", "describe") else "invoke"
    if verb != "invoke":
        args = args[1:]
    symbol = ""
    if verb == "invoke":
        symbol, args = args[0], args[1:]
    else:
        if opts.get("d") is not None:
            raise UsageError("The -d argument is not used with 'list' or 'describe' verb.")
        if args:
            symbol, args = args[0], args[1:]
    if args:
        raise UsageError("Too many arguments.")
    if not target:
        raise UsageError("No host:port specified.")
    if opts.get("format", "json") != "json":
        raise UsageError('The -format option must be "json" (text is not supported by %s).' % PROG)
    if opts.get("plaintext") and (opts.get("cacert") or opts.get("cert")):
        raise UsageError("-plaintext contradicts -cacert/-cert.")
    max_time = parse_seconds(opts, "max-time", None)
    connect_timeout = parse_seconds(opts, "connect-timeout", 10.0)
    expand = bool(opts.get("expand-headers"))
    headers = parse_headers(opts["H"], "H", expand)
    rpc_md = headers + parse_headers(opts["rpc-header"], "rpc-header", expand)
    refl_md = headers + parse_headers(opts["reflect-header"], "reflect-header", expand)
    verbose = bool(opts.get("v") or opts.get("vv"))

    # Read request data before dialing so a bad -d fails fast.
    request_texts = None
    if verb == "invoke":
        data = opts.get("d")
        if data == "@":
            data = sys.stdin.read()
        try:
            request_texts = split_json_messages(data or "")
        except Failure as e:
            raise Failure('Error invoking method "%s": error getting request data: %s' % (symbol, e))

    import importlib.util
    if importlib.util.find_spec("grpc") is None:
        raise Failure("the grpc module is missing: run with /usr/bin/python3 "
                      "(Debian's python3-grpcio)")

    deadline = time.monotonic() + max_time if max_time is not None else None
    host_for_reflection = target
    channel = dial(target, opts, deadline, connect_timeout)
    refl = ReflectionClient(channel, host_for_reflection, refl_md, deadline)
    source = DescriptorSource(refl)
    try:
        if verb == "list":
            return do_list(refl, source, symbol)
        if verb == "describe":
            return do_describe(refl, source, symbol)
        return do_invoke(channel, source, symbol, request_texts, rpc_md, opts, deadline, verbose)
    except ReflectionRpcError as e:
        err = e.rpc_error
        code = err.code().value[0]
        if code == 4:  # DEADLINE_EXCEEDED while using reflection
            print_status(code, err.details() or "", [], bool(opts.get("format-error")))
            return STATUS_CODE_OFFSET + code
        raise Failure("server reflection failed: %s: %s" % (
            CODE_NAMES.get(code, code), err.details()))
    finally:
        refl.close()
        channel.close()


def do_list(refl, source, symbol):
    if not symbol:
        services = sorted(refl.list_services())
        if not services:
            print("(No services)")
        for s in services:
            print(s)
        return 0
    try:
        kind, d = source.load_symbol(symbol)
    except SymbolNotFound as e:
        raise Failure('Failed to list methods for service "%s": %s' % (symbol, e))
    if kind != "service":
        raise Failure('Failed to list methods for service "%s": Service not found: %s' % (
            symbol, symbol))
    methods = sorted(m.full_name for m in d.methods)
    if not methods:
        print("(No methods)")
    for m in methods:
        print(m)
    return 0


def do_describe(refl, source, symbol):
    symbols = [symbol] if symbol else sorted(refl.list_services())
    if not symbols:
        print("Server returned an empty list of exposed services")
    for s in symbols:
        try:
            kind, d = source.load_symbol(s.lstrip("."))
        except SymbolNotFound as e:
            raise Failure('Failed to resolve symbol "%s": %s' % (s, e))
        print("%s is %s:" % (full_name(kind, d), ARTICLES[kind]))
        print(describe_text(kind, d))
    return 0


def do_invoke(channel, source, symbol, request_texts, md, opts, deadline, verbose):
    import grpc
    as_json_error = bool(opts.get("format-error"))
    emit_defaults = bool(opts.get("emit-defaults"))
    fail_prefix = 'Error invoking method "%s": ' % symbol
    try:
        svc_name, meth_name = split_method(symbol)
    except Failure as e:
        raise Failure(fail_prefix + str(e))
    try:
        kind, sd = source.load_symbol(svc_name)
    except SymbolNotFound:
        raise Failure(fail_prefix + 'target server does not expose service "%s"' % svc_name)
    if kind != "service":
        raise Failure(fail_prefix + 'target server does not expose service "%s"' % svc_name)
    mdesc = sd.methods_by_name.get(meth_name)
    if mdesc is None:
        raise Failure(fail_prefix + 'service "%s" does not include a method named "%s"' % (
            sd.full_name, meth_name))
    in_cls = source.message_class(mdesc.input_type)
    out_cls = source.message_class(mdesc.output_type)
    client_streaming = bool(getattr(mdesc, "client_streaming", False))
    server_streaming = bool(getattr(mdesc, "server_streaming", False))
    if not hasattr(mdesc, "client_streaming"):  # older runtimes: read the proto
        mp = to_proto(mdesc.containing_service, "ServiceDescriptorProto")
        mp = next(m for m in mp.method if m.name == mdesc.name)
        client_streaming, server_streaming = mp.client_streaming, mp.server_streaming

    try:
        requests = parse_requests(request_texts, in_cls, source, bool(opts.get("allow-unknown-fields")))
    except Failure as e:
        raise Failure(fail_prefix + "error getting request data: " + str(e))
    if not client_streaming:
        if len(requests) > 1:
            raise Failure(fail_prefix + 'method "%s" is a unary RPC, but request data '
                          'contained more than 1 message' % mdesc.full_name)
        if not requests:
            requests = [in_cls()]

    if verbose:
        print("\nResolved method descriptor:")
        print(describe_text("method", mdesc))
        print("\nRequest metadata to send:")
        print(metadata_text(md))

    path = "/%s/%s" % (sd.full_name, mdesc.name)
    ser = lambda m: m.SerializeToString()  # noqa: E731
    kwargs = dict(metadata=md or None, timeout=remaining(deadline))
    received = 0
    headers_printed = [False]

    def show_headers(call):
        if verbose and not headers_printed[0]:
            headers_printed[0] = True
            try:
                print("\nResponse headers received:")
                print(metadata_text(call.initial_metadata()))
            except Exception:
                print("(empty)")

    def show_response(resp):
        if verbose:
            print("\nResponse contents:")
        print(to_json(resp, source, emit_defaults))
        sys.stdout.flush()

    call = None
    try:
        if not server_streaming:
            if client_streaming:
                mc = channel.stream_unary(path, request_serializer=ser,
                                          response_deserializer=out_cls.FromString)
                resp, call = mc.with_call(iter(requests), **kwargs)
            else:
                mc = channel.unary_unary(path, request_serializer=ser,
                                         response_deserializer=out_cls.FromString)
                resp, call = mc.with_call(requests[0], **kwargs)
            show_headers(call)
            show_response(resp)
            received = 1
        else:
            if client_streaming:
                mc = channel.stream_stream(path, request_serializer=ser,
                                           response_deserializer=out_cls.FromString)
                call = mc(iter(requests), **kwargs)
            else:
                mc = channel.unary_stream(path, request_serializer=ser,
                                          response_deserializer=out_cls.FromString)
                call = mc(requests[0], **kwargs)
            for resp in call:
                show_headers(call)
                show_response(resp)
                received += 1
            show_headers(call)
        trailers = call.trailing_metadata()
        code, message = 0, ""
    except grpc.RpcError as e:
        call = e
        if verbose:
            show_headers(e)
        code = e.code().value[0] if e.code() is not None else 2
        message = e.details() or ""
        try:
            trailers = e.trailing_metadata()
        except Exception:
            trailers = None

    if verbose:
        shown = [(k, v) for k, v in (trailers or ()) if k != "grpc-status-details-bin"]
        print("\nResponse trailers received:")
        print(metadata_text(shown))
        n_req = len(requests)
        print("Sent %d request%s and received %d response%s" % (
            n_req, "" if n_req == 1 else "s", received, "" if received == 1 else "s"))
    sys.stdout.flush()
    if code != 0:
        print_status(code, message, status_details(trailers, source), as_json_error)
        return STATUS_CODE_OFFSET + code
    return 0


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    sys.exit(main(sys.argv[1:]))
