// A small Jinja interpreter (the subset chat templates use). See chat_template.h.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace eaglet::jinja {

struct Value;
using List = std::vector<Value>;
// Insertion-ordered, as Python's dicts: items(), tojson and loops see keys in the order they came.
using Dict = nlohmann::ordered_map<std::string, Value>;
struct Undefined {};

struct Value {
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<List>, std::shared_ptr<Dict>> v;
  Value() = default;
  template <typename T>
  Value(T x) : v(std::move(x)) {}
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);
  bool truthy() const;
  std::string str() const;
  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
};

// Bounds on one render beyond the fixed size and work limits (jinja_builtins.h): a wall-clock
// deadline, and a flag that stops it early (a server shutting down).
struct RenderLimits {
  double max_seconds = 60.0;  // the server passes --chat-template-timeout (2 s)
  const std::atomic<bool>* cancel = nullptr;
  uint64_t* work = nullptr;  // when set: the work the render did (jinja_builtins.h's units), even on failure
};

struct Node;
class Template {
 public:
  explicit Template(const std::string& source);
  ~Template();
  std::string render(const Dict& globals, const RenderLimits& limits = {}) const;

 private:
  std::vector<std::unique_ptr<Node>> body_;
};

}  // namespace eaglet::jinja
