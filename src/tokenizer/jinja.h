// A small Jinja interpreter (the subset chat templates use). See chat_template.h.
#pragma once
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

struct Node;
class Template {
 public:
  explicit Template(const std::string& source);
  ~Template();
  std::string render(const Dict& globals) const;

 private:
  std::vector<std::unique_ptr<Node>> body_;
};

}  // namespace eaglet::jinja
