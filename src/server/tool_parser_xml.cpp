// The XML tool-call formats (MiniMax M2 and M3, Qwen3-Coder), see server/tool_parser.h. Values
// are text in these formats: the tool's JSON schema says what type each one is (vLLM's parsers do
// the same); where it says nothing, JSON-looking text becomes that JSON value for MiniMax, and
// stays text for Qwen3-Coder (as vLLM reads each).
#include <algorithm>
#include <set>

#include "server/tagged_tool_parser.h"

namespace eaglet {

using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t npos = std::string_view::npos;
const std::string kM3Ns = "]<]minimax[>[";

std::string_view trim_newlines(std::string_view s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::set<std::string> types_of(const ojson* schema) {
  std::set<std::string> t;
  if (!schema || !schema->is_object() || !schema->contains("type")) return t;
  const ojson& v = (*schema)["type"];
  if (v.is_string()) t.insert(v.get<std::string>());
  for (auto& x : v.is_array() ? v : ojson::array())
    if (x.is_string()) t.insert(x.get<std::string>());
  return t;
}

bool fits(const ojson& v, const std::set<std::string>& types) {
  if (types.empty()) return true;
  if (v.is_string()) return types.count("string");
  if (v.is_number_integer()) return types.count("integer") || types.count("number");
  if (v.is_number()) return types.count("number");
  if (v.is_boolean()) return types.count("boolean");
  if (v.is_null()) return types.count("null");
  if (v.is_array()) return types.count("array");
  return types.count("object");
}

// A leaf value's text as the schema types it.
ojson typed(std::string_view text, const ojson* schema) {
  const std::set<std::string> types = types_of(schema);
  text = trim_newlines(text);
  if (types.size() == 1 && types.count("string")) return std::string(text);
  const ojson v = ojson::parse(text, nullptr, false);
  if (!v.is_discarded() && fits(v, types)) return v;
  return std::string(text);
}

const ojson* member(const ojson* schema, const char* key, const std::string& name = "") {
  if (!schema || !schema->is_object() || !schema->contains(key)) return nullptr;
  const ojson& v = (*schema)[key];
  if (name.empty()) return &v;
  return v.is_object() && v.contains(name) ? &v[name] : nullptr;
}

// --- MiniMax-M2: <parameter name="k">v</parameter> ---------------------------------------------

ojson m2_arguments(std::string_view body, const ojson* params) {
  static const std::string kOpen = "<parameter name=\"", kClose = "</parameter>";
  ojson args = ojson::object();
  for (size_t i = 0; (i = body.find(kOpen, i)) != npos;) {
    const size_t name_end = body.find("\">", i + kOpen.size());
    if (name_end == npos) break;
    const std::string name(body.substr(i + kOpen.size(), name_end - i - kOpen.size()));
    const size_t v = name_end + 2, end = body.find(kClose, v);
    if (end == npos) break;
    args[name] = typed(body.substr(v, end - v), member(params, "properties", name));
    i = end + kClose.size();
  }
  return args;
}

// --- MiniMax-M3: NS<k>v NS</k>, nested elements for objects, NS<item> for lists ------------------

struct Element {
  std::string name;
  std::string_view value;
};

// `s` as a run of elements NS<name>...NS</name> (whitespace between); false when it is not one.
bool m3_elements(std::string_view s, std::vector<Element>* out) {
  size_t i = 0;
  for (;;) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i == s.size()) return !out->empty();
    if (s.compare(i, kM3Ns.size() + 1, kM3Ns + "<") != 0) return false;
    const size_t name_begin = i + kM3Ns.size() + 1, name_end = s.find('>', name_begin);
    if (name_end == npos || name_end == name_begin || s[name_begin] == '/') return false;
    const std::string name(s.substr(name_begin, name_end - name_begin));
    const std::string open = kM3Ns + "<" + name + ">", close = kM3Ns + "</" + name + ">";
    int depth = 1;
    size_t j = name_end + 1;
    while (depth > 0) {  // an element may hold elements of its own name
      const size_t o = s.find(open, j), c = s.find(close, j);
      if (c == npos) return false;
      if (o != npos && o < c) {
        ++depth;
        j = o + open.size();
      } else {
        --depth;
        j = c + close.size();
      }
    }
    out->push_back({name, s.substr(name_end + 1, j - close.size() - name_end - 1)});
    i = j;
  }
}

ojson m3_value(std::string_view text, const ojson* schema) {
  std::vector<Element> children;
  const std::set<std::string> types = types_of(schema);
  if (types.count("string") && types.size() == 1) return std::string(trim_newlines(text));
  if (!m3_elements(text, &children)) return typed(text, schema);
  bool all_items = true;
  for (auto& c : children) all_items = all_items && c.name == "item";
  if (types.count("array") || (all_items && !types.count("object"))) {
    ojson list = ojson::array();
    for (auto& c : children) list.push_back(m3_value(c.value, member(schema, "items")));
    return list;
  }
  ojson obj = ojson::object();
  for (auto& c : children) obj[c.name] = m3_value(c.value, member(schema, "properties", c.name));
  return obj;
}

ojson m3_arguments(std::string_view body, const ojson* params) {
  std::vector<Element> children;
  ojson args = ojson::object();
  if (!m3_elements(body, &children)) return args;
  for (auto& c : children) args[c.name] = m3_value(c.value, member(params, "properties", c.name));
  return args;
}

// --- Qwen3-Coder: <function=f><parameter=k>\nv\n</parameter></function> ---------------------------

// A value is the text between the markers less one newline at each end (the template writes
// them); a parameter the schema does not type stays text, as in vLLM's qwen3_coder parser.
ojson qwen3_coder_value(std::string_view text, const ojson* schema) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  const std::set<std::string> types = types_of(schema);
  if (types.empty() || (types.size() == 1 && types.count("string"))) return std::string(text);
  return typed(text, schema);
}

// A parameter ends at </parameter>, or (as vLLM reads it) where the next one starts.
ojson qwen3_coder_arguments(std::string_view body, const ojson* params) {
  static const std::string kOpen = "<parameter=", kClose = "</parameter>";
  ojson args = ojson::object();
  for (size_t i = body.find(kOpen); i != npos;) {
    const size_t name_end = body.find('>', i + kOpen.size());
    if (name_end == npos) break;
    const std::string name(body.substr(i + kOpen.size(), name_end - i - kOpen.size()));
    const size_t close = body.find(kClose, name_end + 1), next = body.find(kOpen, name_end + 1);
    const size_t end = std::min({close, next, body.size()});
    args[name] = qwen3_coder_value(body.substr(name_end + 1, end - name_end - 1), member(params, "properties", name));
    i = next;
  }
  return args;
}

// --- The formats' shared reader ---------------------------------------------------------------

// A format: the block's markers, an invoke's (its name between `invoke` and `name_end`), and how
// its arguments read.
struct XmlFormat {
  std::string open, close, invoke, name_end, end;
  ojson (*arguments)(std::string_view body, const ojson* params);
};

class XmlCallParser final : public TaggedToolParser {
 public:
  XmlCallParser(XmlFormat format, const ToolRequest& tools, std::string id_base)
      : TaggedToolParser(format.open, format.close, std::move(id_base)), f_(std::move(format)), tools_(tools) {}

 private:
  void begin_block() override {
    done_ = 0;
    found_ = 0;
  }
  // Each whole invoke past `done_` becomes a call.
  bool body(std::string_view text, bool closed, OutputDelta* out) override {
    for (;;) {
      const size_t at = text.find(f_.invoke, done_);
      if (at == npos) break;
      const size_t name_end = text.find(f_.name_end, at + f_.invoke.size()), end = text.find(f_.end, at);
      if (name_end == npos || end == npos || name_end > end) break;
      const std::string name(text.substr(at + f_.invoke.size(), name_end - at - f_.invoke.size()));
      done_ = end + f_.end.size();
      if (name.empty()) continue;  // no call names nothing (a call's first delta is the one with a name)
      const size_t inner = name_end + f_.name_end.size();
      auto it = tools_.parameters.find(name);
      const ojson* params = it == tools_.parameters.end() ? nullptr : &it->second;
      const ojson args = f_.arguments(text.substr(inner, end - inner), params);
      arguments(begin_call(name, out), args.dump(-1, ' ', false, ojson::error_handler_t::replace), out);
      ++found_;
    }
    return !closed || found_ > 0;
  }
  const XmlFormat f_;
  const ToolRequest& tools_;
  size_t done_ = 0;
  int found_ = 0;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_xml_tool_call_parser(const std::string& name, const ToolRequest& tools, std::string id_base) {
  XmlFormat f;
  if (name == "minimax_m2") {
    f = {"<minimax:tool_call>", "</minimax:tool_call>", "<invoke name=\"", "\">", "</invoke>", m2_arguments};
  } else if (name == "minimax_m3") {
    f = {kM3Ns + "<tool_call>", kM3Ns + "</tool_call>", kM3Ns + "<invoke name=\"", "\">", kM3Ns + "</invoke>", m3_arguments};
  } else if (name == "qwen3_coder") {
    f = {"<tool_call>", "</tool_call>", "<function=", ">", "</function>", qwen3_coder_arguments};
  } else {
    return nullptr;
  }
  return std::make_unique<XmlCallParser>(std::move(f), tools, std::move(id_base));
}

}  // namespace eaglet
