#include "common/config/flags.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ulticode::config {

Flags::Flags(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

std::string Flags::EnvName(absl::string_view flag) {
  return absl::StrCat("ULTICODE_", absl::AsciiStrToUpper(absl::StrReplaceAll(flag, {{"-", "_"}})));
}

void Flags::String(std::string name, std::string* out, std::string help, Validator validate) {
  Entry e{name, std::move(help), *out, false, false, nullptr};
  e.set = [name, out, validate](const std::string& v) -> absl::Status {
    if (validate) {
      absl::Status s = validate(v);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", s.message()));
    }
    *out = v;
    return absl::OkStatus();
  };
  entries_.push_back(std::move(e));
}

void Flags::Require(absl::string_view name, std::function<bool()> unless) {
  if (Entry* e = Find(name); e != nullptr) {
    e->required = true;
    e->required_unless = std::move(unless);
  }
}

void Flags::Int(std::string name, int64_t* out, std::string help, int64_t min, int64_t max) {
  Entry e{name,   absl::StrCat(help, " [", min, "..", max, "]"), absl::StrCat(*out), false, false,
          nullptr};
  e.set = [name, out, min, max](const std::string& v) -> absl::Status {
    int64_t parsed;
    if (!absl::SimpleAtoi(v, &parsed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": \"", v, "\" is not an integer"));
    }
    if (parsed < min || parsed > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": ", parsed, " is outside ", min, "..", max));
    }
    *out = parsed;
    return absl::OkStatus();
  };
  entries_.push_back(std::move(e));
}

void Flags::Int(std::string name, int* out, std::string help, int min, int max) {
  Entry e{name,   absl::StrCat(help, " [", min, "..", max, "]"), absl::StrCat(*out), false, false,
          nullptr};
  e.set = [name, out, min, max](const std::string& v) -> absl::Status {
    int parsed;
    if (!absl::SimpleAtoi(v, &parsed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": \"", v, "\" is not an integer"));
    }
    if (parsed < min || parsed > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": ", parsed, " is outside ", min, "..", max));
    }
    *out = parsed;
    return absl::OkStatus();
  };
  entries_.push_back(std::move(e));
}

void Flags::Duration(std::string name, absl::Duration* out, std::string help, absl::Duration min,
                     absl::Duration max) {
  Entry e{name,
          absl::StrCat(help, " [", absl::FormatDuration(min), "..", absl::FormatDuration(max), "]"),
          absl::FormatDuration(*out),
          false,
          false,
          nullptr};
  e.set = [name, out, min, max](const std::string& v) -> absl::Status {
    absl::Duration parsed;
    if (!absl::ParseDuration(v, &parsed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": \"", v, "\" is not a duration (e.g. 250ms, 30s, 5m)"));
    }
    if (parsed < min || parsed > max) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", v, " is outside ",
                                                     absl::FormatDuration(min), "..",
                                                     absl::FormatDuration(max)));
    }
    *out = parsed;
    return absl::OkStatus();
  };
  entries_.push_back(std::move(e));
}

void Flags::Bool(std::string name, bool* out, std::string help) {
  Entry e{name, std::move(help), *out ? "true" : "false", false, true, nullptr};
  e.set = [name, out](const std::string& v) -> absl::Status {
    const std::string lower = absl::AsciiStrToLower(v);
    if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") {
      *out = true;
    } else if (lower == "false" || lower == "0" || lower == "no" || lower == "off") {
      *out = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": \"", v, "\" is not a boolean (true/false)"));
    }
    return absl::OkStatus();
  };
  entries_.push_back(std::move(e));
}

Flags::Entry* Flags::Find(absl::string_view name) {
  for (Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

absl::Status Flags::Parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--help" || a == "-h" || a == "-help") {
      help_requested_ = true;
      return absl::OkStatus();
    }
  }
  for (Entry& e : entries_) {
    const std::string env = EnvName(e.name);
    if (const char* v = std::getenv(env.c_str()); v != nullptr) {
      absl::Status s = e.set(v);
      if (!s.ok())
        return absl::InvalidArgumentError(absl::StrCat(s.message(), " (from ", env, ")"));
      e.was_set = true;
    }
  }
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (!absl::StartsWith(a, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", a, "\""));
    }
    a.remove_prefix(2);
    std::string name(a), value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != absl::string_view::npos) {
      name = std::string(a.substr(0, eq));
      value = std::string(a.substr(eq + 1));
      has_value = true;
    }
    Entry* e = Find(name);
    if (e == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (e->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    absl::Status s = e->set(value);
    if (!s.ok()) return s;
    e->was_set = true;
  }
  for (const Entry& e : entries_) {
    if (e.required && !e.was_set && !(e.required_unless && e.required_unless())) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", e.name, " is required (or ", EnvName(e.name), ")"));
    }
  }
  for (const auto& check : checks_) {
    if (absl::Status s = check(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string Flags::Usage() const {
  std::string out = absl::StrCat("Usage: ", program_, " [--flag=value ...]\n\n", description_,
                                 "\n\nFlags (each also read from its environment variable):\n");
  for (const Entry& e : entries_) {
    absl::StrAppend(&out, "  --", e.name, e.is_bool ? "" : "=VALUE", "  (", EnvName(e.name), ")\n",
                    "      ", e.help);
    if (e.required) {
      absl::StrAppend(&out, " (required)");
    } else {
      absl::StrAppend(&out, " (default: \"", e.default_text, "\")");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

void ParseOrExit(Flags& flags, int argc, const char* const* argv) {
  absl::Status s = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    std::exit(0);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s: configuration error: %s\nRun with --help to list the settings.\n",
                 argv[0], std::string(s.message()).c_str());
    std::exit(2);
  }
}

absl::Status ValidateHostPort(const std::string& value) {
  auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("\"", value, "\" is not host:port"));
  }
  int port;
  if (!absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("\"", value, "\" has no valid port (1..65535)"));
  }
  return absl::OkStatus();
}

}  // namespace ulticode::config
