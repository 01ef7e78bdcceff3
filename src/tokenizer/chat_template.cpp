#include "tokenizer/chat_template.h"

#include "core/error.h"
#include "tokenizer/jinja.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {

struct ChatTemplate::Impl {
  jinja::Template tmpl;
  explicit Impl(const std::string& s) : tmpl(s) {}
};

ChatTemplate::ChatTemplate(const std::string& source) : impl_(std::make_unique<Impl>(source)) {}
ChatTemplate::~ChatTemplate() = default;

std::unique_ptr<ChatTemplate> ChatTemplate::from_tokenizer_config(const nlohmann::json& config) {
  if (!config.contains("chat_template")) return nullptr;
  const auto& t = config["chat_template"];
  if (t.is_string()) return std::make_unique<ChatTemplate>(t.get<std::string>());
  if (t.is_array())
    for (auto& e : t)
      if (e.value("name", "") == "default" && e.contains("template")) return std::make_unique<ChatTemplate>(e["template"].get<std::string>());
  return nullptr;
}

std::string ChatTemplate::render(const nlohmann::json& context, const jinja::RenderLimits& limits) const {
  jinja::Dict globals;
  for (auto& [k, v] : context.items()) globals[k] = jinja::Value::from_json(v);
  return impl_->tmpl.render(globals, limits);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Tokenizer& tok,
                                 const nlohmann::ordered_json& extra, const jinja::RenderLimits& limits) const {
  // Ordered as a client sends them (role, then content): templates that print a message with
  // tojson or loop over its items() see Python's order.
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (auto& m : messages) {
    nlohmann::ordered_json j = {{"role", m.role}, {"content", m.content}};
    for (auto& [k, v] : m.fields.items()) j[k] = v;
    msgs.push_back(std::move(j));
  }
  auto text_of = [&](const char* key) -> std::string {
    const auto& c = tok.config();
    if (!c.contains(key)) return "";
    if (c[key].is_string()) return c[key].get<std::string>();
    if (c[key].is_object()) return c[key].value("content", "");
    return "";
  };
  jinja::Dict globals;
  if (extra.is_object())
    for (auto& [k, v] : extra.items()) globals[k] = jinja::Value::from_json(v);
  globals["messages"] = jinja::Value::from_json(msgs);
  globals["add_generation_prompt"] = jinja::Value(add_generation_prompt);
  globals["bos_token"] = jinja::Value(text_of("bos_token"));
  globals["eos_token"] = jinja::Value(text_of("eos_token"));
  return impl_->tmpl.render(globals, limits);
}

}  // namespace eaglet
