// Command-line flags with environment-variable equivalents.
//
// Every setting is registered once with a default, a help text and bounds.
// Its environment variable is ULTICODE_ + the flag name in upper snake case
// (--grpc-listen -> ULTICODE_GRPC_LISTEN). Precedence: flag > environment >
// default. Parse() validates everything before the service starts serving and
// names the offending setting in its error. Not thread-safe; use from main.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ulticode::config {

class Flags {
 public:
  using Validator = std::function<absl::Status(const std::string&)>;

  Flags(std::string program, std::string description);

  void String(std::string name, std::string* out, std::string help, Validator validate = nullptr);
  void Int(std::string name, int64_t* out, std::string help, int64_t min, int64_t max);
  void Int(std::string name, int* out, std::string help, int min, int max);
  // Durations use Go syntax: "250ms", "30s", "5m".
  void Duration(std::string name, absl::Duration* out, std::string help, absl::Duration min,
                absl::Duration max);
  void Bool(std::string name, bool* out, std::string help);
  // Parse fails naming `name` unless the flag or its environment twin is set.
  // Secrets are never flags: they come from files (--*-password-file, key
  // files), so no value is ever visible in a command line or --help.
  // `unless`, when given, is asked after every value is set: true exempts
  // (e.g. key files that a --migrate=only run never reads).
  void Require(absl::string_view name, std::function<bool()> unless = nullptr);
  // A check across flags, run by Parse after every value is set; its error
  // is a configuration error like any other.
  void AddCheck(std::function<absl::Status()> check) { checks_.push_back(std::move(check)); }

  // Applies environment then argv. Returns InvalidArgument naming the setting
  // on any unknown flag, malformed or out-of-range value. Sets help_requested()
  // when --help/-h is present (nothing else is validated then).
  absl::Status Parse(int argc, const char* const* argv);

  bool help_requested() const { return help_requested_; }
  std::string Usage() const;

  static std::string EnvName(absl::string_view flag);

 private:
  struct Entry {
    std::string name;
    std::string help;
    std::string default_text;
    bool required = false;
    bool is_bool = false;
    std::function<absl::Status(const std::string&)> set;
    bool was_set = false;
    std::function<bool()> required_unless = nullptr;  // see Require
  };
  Entry* Find(absl::string_view name);

  std::string program_;
  std::string description_;
  std::vector<Entry> entries_;
  std::vector<std::function<absl::Status()>> checks_;
  bool help_requested_ = false;
};

// For main(): parses; on --help prints usage and exits 0; on error prints the
// message and a hint to stderr and exits 2.
void ParseOrExit(Flags& flags, int argc, const char* const* argv);

// Validates "host:port" with a port in 1..65535.
absl::Status ValidateHostPort(const std::string& value);

}  // namespace ulticode::config
