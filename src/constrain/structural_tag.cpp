#include "constrain/structural_tag.h"

#include <fmt/format.h>

#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "constrain/compose.h"
#include "constrain/grammar.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "core/error.h"
#include "io/json_config.h"

namespace eaglet::constrain {

namespace {

using ojson = nlohmann::ordered_json;

// What follows a format's text: nothing known (the format must end by itself), the end of the
// output, or one of the enclosing tag's end strings (which the format's text then takes in, so
// that free text can stop at it).
struct Tail {
  enum class Kind { Open, Output, Ends } kind = Kind::Open;
  std::vector<std::string> ends;
};

struct TagSpec {
  std::string begin;
  const ojson* content = nullptr;
  std::vector<std::string> ends;
  std::string path, content_path;
};

void check_keys(const ojson& f, const std::string& path, std::initializer_list<const char*> known) {
  for (const auto& [k, v] : f.items()) {
    bool ok = false;
    for (const char* n : known) ok |= k == n;
    if (!ok) fail("{}.{}: not supported here (this format takes {})", path, k, fmt::join(known, ", "));
  }
}

const ojson& field(const ojson& f, const std::string& key, const std::string& path) {
  if (!f.contains(key)) fail("{}: '{}' is required", path, key);
  return f[key];
}

std::string string_field(const ojson& f, const std::string& key, const std::string& path) {
  const ojson& v = field(f, key, path);
  if (!v.is_string()) fail("{}.{}: must be a string (got {})", path, key, json_brief(v));
  return v.get<std::string>();
}

// A list of strings; `one_ok`: a single string stands for a list of one.
std::vector<std::string> strings_field(const ojson& f, const std::string& key, const std::string& path, bool one_ok) {
  if (!f.contains(key)) return {};
  const ojson& v = f[key];
  if (one_ok && v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) fail("{}.{}: must be a list of strings (got {})", path, key, json_brief(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) fail("{}.{}[{}]: must be a string (got {})", path, key, i, json_brief(v[i]));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

int64_t int_field(const ojson& f, const std::string& key, const std::string& path) {
  const ojson& v = field(f, key, path);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    fail("{}.{}: must be an integer (got {})", path, key, json_brief(v));
  return v.get<int64_t>();
}

bool bool_field(const ojson& f, const std::string& key, const std::string& path) {
  if (!f.contains(key) || f[key].is_null()) return false;
  if (!f[key].is_boolean()) fail("{}.{}: must be true or false (got {})", path, key, json_brief(f[key]));
  return f[key].get<bool>();
}

const ojson& list_field(const ojson& f, const std::string& key, const std::string& path) {
  const ojson& v = field(f, key, path);
  if (!v.is_array() || v.empty()) fail("{}.{}: must be a non-empty list", path, key);
  return v;
}

class StructuralTagCompiler {
 public:
  std::string run(const ojson& tag) {
    if (!tag.is_object()) fail("$: a structural tag must be an object (got {})", json_brief(tag));
    if (tag.contains("type") && tag["type"] != "structural_tag")
      fail("$.type: must be \"structural_tag\" (got {})", json_brief(tag["type"]));
    std::string root;
    if (tag.contains("format")) {
      check_keys(tag, "$", {"type", "format"});
      root = format(tag["format"], "$.format", Tail{Tail::Kind::Output, {}});
    } else if (tag.contains("structures")) {
      check_keys(tag, "$", {"type", "structures", "triggers"});
      root = legacy(tag);
    } else {
      fail("$: a structural tag needs 'format' (or the older 'structures' and 'triggers')");
    }
    return rules_ + "root ::= " + root + "\n";
  }

 private:
  std::string fresh() { return fmt::format("st-{}", next_++); }
  std::string rule(const std::string& body) {
    const std::string name = fresh();
    rules_ += name + " ::= " + body + "\n";
    return name;
  }
  // A grammar of its own (rules renamed apart from the others); returns its start.
  std::string embed(const std::string& gbnf) {
    const std::string prefix = fmt::format("st{}-", next_++);
    rules_ += prefix_rules(gbnf, prefix) + "\n";
    return prefix + "root";
  }
  static std::string ends_expr(const std::vector<std::string>& ends, const std::string& where) {
    std::vector<std::string> alts;
    for (const std::string& e : ends) alts.push_back(gbnf::literal(e, where));
    return alts.size() == 1 ? alts[0] : "(" + fmt::format("{}", fmt::join(alts, " | ")) + ")";
  }
  // `expr` followed by what the tail asks to be taken in.
  std::string closed(const std::string& expr, const Tail& tail, const std::string& path) {
    return rule(tail.kind == Tail::Kind::Ends ? expr + " " + ends_expr(tail.ends, path) : expr);
  }

  std::string format(const ojson& f, const std::string& path, const Tail& tail);
  std::string sub_grammar(const ojson& f, const std::string& type, const std::string& path, const Tail& tail);
  std::string composition(const ojson& f, const std::string& type, const std::string& path, const Tail& tail);
  TagSpec read_tag(const ojson& f, const std::string& path);
  std::vector<TagSpec> read_tags(const ojson& f, const std::string& path);
  std::string tag(const TagSpec& t);
  std::string free_text(const std::string& path, const std::vector<std::pair<std::string, std::string>>& triggers,
                        const std::vector<std::string>& excludes, const Tail& tail, const std::string& name);
  std::string triggered(const std::string& path, const std::vector<std::string>& triggers, const std::vector<TagSpec>& tags,
                        bool at_least_one, bool stop_after_first, const std::vector<std::string>& excludes, const Tail& tail);
  std::string separated(const ojson& f, const std::string& path, const Tail& tail);
  std::string legacy(const ojson& tag);

  std::string rules_;
  int next_ = 0;
  std::deque<ojson> owned_;  // contents made up for the older shape
};

std::string StructuralTagCompiler::format(const ojson& f, const std::string& path, const Tail& tail) {
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
    fail("{}: a format must be an object with a string 'type' (got {})", path, json_brief(f));
  const std::string type = f["type"];
  if (type == "const_string") {
    check_keys(f, path, {"type", "value"});
    return closed(gbnf::literal(string_field(f, "value", path), path + ".value"), tail, path);
  }
  if (type == "json_schema" || type == "grammar" || type == "regex") return sub_grammar(f, type, path, tail);
  if (type == "any_text") {
    check_keys(f, path, {"type", "excludes", "max_tokens", "max_chars"});
    for (const char* budget : {"max_tokens", "max_chars"})
      if (f.contains(budget) && !f[budget].is_null()) fail("{}.{}: budgets on free text are not supported", path, budget);
    return free_text(path, {}, strings_field(f, "excludes", path, false), tail, fresh());
  }
  if (type == "tag") return closed(tag(read_tag(f, path)), tail, path);
  if (type == "triggered_tags") {
    check_keys(f, path, {"type", "triggers", "tags", "at_least_one", "stop_after_first", "excludes"});
    list_field(f, "triggers", path);
    return triggered(path, strings_field(f, "triggers", path, false), read_tags(f, path), bool_field(f, "at_least_one", path),
                     bool_field(f, "stop_after_first", path), strings_field(f, "excludes", path, false), tail);
  }
  if (type == "tags_with_separator") return separated(f, path, tail);
  static const std::set<std::string> compositions = {"sequence", "or", "optional", "plus", "star", "repeat"};
  if (compositions.count(type)) return composition(f, type, path, tail);
  static const std::set<std::string> token_level = {"token", "exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch", "dispatch"};
  if (token_level.count(type)) fail("{}.type: '{}' is not supported (formats over text only, not over token ids)", path, type);
  fail("{}.type: unknown format '{}' (const_string, json_schema, grammar, regex, any_text, sequence, or, optional, "
       "plus, star, repeat, tag, triggered_tags, tags_with_separator)",
       path, type);
}

std::string StructuralTagCompiler::sub_grammar(const ojson& f, const std::string& type, const std::string& path, const Tail& tail) {
  std::string gbnf;
  if (type == "json_schema") {
    check_keys(f, path, {"type", "json_schema", "style", "any_order"});
    if (f.contains("style") && f["style"] != "json") fail("{}.style: only \"json\" is supported (got {})", path, json_brief(f["style"]));
    if (bool_field(f, "any_order", path)) fail("{}.any_order: properties in any order are not supported", path);
    ojson schema = field(f, "json_schema", path);
    if (schema.is_string()) schema = ojson::parse(schema.get<std::string>(), nullptr, false);
    if (!schema.is_object() && !schema.is_boolean()) fail("{}.json_schema: must be a JSON schema (an object)", path);
    try {
      gbnf = json_schema_to_gbnf(schema, true);
    } catch (const Error& e) {
      fail("{}.json_schema: {}", path, e.what());
    }
  } else if (type == "grammar") {
    check_keys(f, path, {"type", "grammar"});
    gbnf = string_field(f, "grammar", path);
    Grammar::parse(gbnf, path + ".grammar");  // its own errors name its own lines
  } else {
    check_keys(f, path, {"type", "pattern"});
    gbnf = regex_to_gbnf(string_field(f, "pattern", path), path + ".pattern");
  }
  return closed(embed(gbnf), tail, path);
}

std::string StructuralTagCompiler::composition(const ojson& f, const std::string& type, const std::string& path, const Tail& tail) {
  if (type == "sequence" || type == "or") {
    check_keys(f, path, {"type", "elements"});
    const ojson& elements = list_field(f, "elements", path);
    std::vector<std::string> parts;
    for (size_t i = 0; i < elements.size(); ++i) {
      // In a sequence only the last element meets the tail; in `or`, every one does.
      const bool last = type == "or" || i + 1 == elements.size();
      parts.push_back(format(elements[i], fmt::format("{}.elements[{}]", path, i), last ? tail : Tail{}));
    }
    return rule(fmt::format("{}", fmt::join(parts, type == "or" ? " | " : " ")));
  }
  const bool counted = type == "repeat";
  if (counted) check_keys(f, path, {"type", "min", "max", "content"});
  else check_keys(f, path, {"type", "content"});
  const std::string inner = format(field(f, "content", path), path + ".content", Tail{});
  std::string op = type == "optional" ? "?" : type == "plus" ? "+" : "*";
  if (counted) {
    const int64_t lo = int_field(f, "min", path), hi = int_field(f, "max", path);
    if (lo < 0) fail("{}.min: must not be negative (got {})", path, lo);
    if (hi != -1 && hi < lo) fail("{}.max: must be at least min ({}), or -1 for no limit (got {})", path, lo, hi);
    op = hi < 0 ? fmt::format("{{{},}}", lo) : fmt::format("{{{},{}}}", lo, hi);
  }
  return closed(inner + op, tail, path);
}

TagSpec StructuralTagCompiler::read_tag(const ojson& f, const std::string& path) {
  if (!f.is_object()) fail("{}: a tag must be an object (got {})", path, json_brief(f));
  if (f.contains("type") && f["type"] != "tag") fail("{}.type: must be \"tag\" (got {})", path, json_brief(f["type"]));
  check_keys(f, path, {"type", "begin", "content", "end"});
  TagSpec t;
  if (!field(f, "begin", path).is_string()) fail("{}.begin: must be a string (token begins are not supported)", path);
  t.begin = f["begin"].get<std::string>();
  t.content = &field(f, "content", path);
  t.ends = strings_field(f, "end", path, true);
  if (!f.contains("end") || t.ends.empty()) fail("{}.end: must be a string or a non-empty list of strings", path);
  t.path = path;
  t.content_path = path + ".content";
  return t;
}

std::vector<TagSpec> StructuralTagCompiler::read_tags(const ojson& f, const std::string& path) {
  const ojson& list = list_field(f, "tags", path);
  std::vector<TagSpec> tags;
  for (size_t i = 0; i < list.size(); ++i) tags.push_back(read_tag(list[i], fmt::format("{}.tags[{}]", path, i)));
  return tags;
}

// begin, then the content with the end taken in.
std::string StructuralTagCompiler::tag(const TagSpec& t) {
  const std::string content = format(*t.content, t.content_path, Tail{Tail::Kind::Ends, t.ends});
  return gbnf::literal(t.begin, t.path + ".begin") + " " + content;
}

// Free text as rule `name`: (trigger, rule it opens) pairs, excluded strings, and what ends it.
std::string StructuralTagCompiler::free_text(const std::string& path, const std::vector<std::pair<std::string, std::string>>& triggers,
                                             const std::vector<std::string>& excludes, const Tail& tail, const std::string& name) {
  if (tail.kind == Tail::Kind::Open)
    fail("{}: free text here has nothing to end it: it may only end the output or a tag's content", path);
  std::vector<TextMarker> markers;
  for (const std::string& e : tail.ends) {
    if (e.empty()) fail("{}: free text cannot stop at an empty end string", path);
    markers.push_back({e, std::string()});
  }
  for (const auto& [t, then] : triggers) markers.push_back({t, then});
  for (const std::string& x : excludes) {
    if (x.empty()) fail("{}.excludes: an excluded string is empty", path);
    markers.push_back({x, std::nullopt});
  }
  rules_ += free_text_gbnf(name, markers, tail.kind == Tail::Kind::Output, path);
  return name;
}

std::string StructuralTagCompiler::triggered(const std::string& path, const std::vector<std::string>& triggers,
                                             const std::vector<TagSpec>& tags, bool at_least_one, bool stop_after_first,
                                             const std::vector<std::string>& excludes, const Tail& tail) {
  if (tail.kind == Tail::Kind::Open)
    fail("{}: triggered_tags may only end the output or a tag's content (free text needs something to end it)", path);
  for (size_t i = 0; i < triggers.size(); ++i)
    if (triggers[i].empty()) fail("{}.triggers[{}]: a trigger is empty", path, i);
  const std::string text = fresh();
  // After a tag: more free text, or (stop_after_first) what follows the whole format.
  const std::string after = !stop_after_first ? text : tail.kind == Tail::Kind::Ends ? ends_expr(tail.ends, path) : "";
  std::vector<std::vector<std::string>> opened(triggers.size());  // per trigger: the tags' rests
  std::vector<std::string> whole;
  for (const TagSpec& t : tags) {
    std::vector<size_t> by;
    for (size_t i = 0; i < triggers.size(); ++i)
      if (t.begin.compare(0, triggers[i].size(), triggers[i]) == 0) by.push_back(i);
    if (by.empty()) fail("{}.begin: '{}' starts with none of the triggers", t.path, t.begin);
    if (by.size() > 1) fail("{}.begin: '{}' starts with two triggers ('{}', '{}')", t.path, t.begin, triggers[by[0]], triggers[by[1]]);
    const std::string content = format(*t.content, t.content_path, Tail{Tail::Kind::Ends, t.ends});
    opened[by[0]].push_back(gbnf::literal(t.begin.substr(triggers[by[0]].size()), t.path + ".begin") + " " + content);
    whole.push_back(gbnf::literal(t.begin, t.path + ".begin") + " " + content);
  }
  std::vector<std::pair<std::string, std::string>> dispatch;
  for (size_t i = 0; i < triggers.size(); ++i)
    if (!opened[i].empty()) dispatch.emplace_back(triggers[i], rule(fmt::format("({}) {}", fmt::join(opened[i], " | "), after)));
  free_text(path, dispatch, excludes, tail, text);
  if (!at_least_one) return text;
  return rule(fmt::format("({}) {}", fmt::join(whole, " | "), after));
}

std::string StructuralTagCompiler::separated(const ojson& f, const std::string& path, const Tail& tail) {
  check_keys(f, path, {"type", "tags", "separator", "at_least_one", "stop_after_first"});
  const std::string sep = gbnf::literal(string_field(f, "separator", path), path + ".separator");
  std::vector<std::string> alts;
  for (const TagSpec& t : read_tags(f, path)) alts.push_back(tag(t));
  const std::string one = rule(fmt::format("{}", fmt::join(alts, " | ")));
  const bool at_least_one = bool_field(f, "at_least_one", path);
  std::string body = bool_field(f, "stop_after_first", path) ? one : fmt::format("{} ({} {})*", one, sep, one);
  if (!at_least_one) body = "(" + body + ")?";
  return closed(body, tail, path);
}

// {"structures": [{"begin", "schema", "end"}], "triggers": [...]}: triggered tags of schemas.
std::string StructuralTagCompiler::legacy(const ojson& tag) {
  const ojson& structures = list_field(tag, "structures", "$");
  std::vector<TagSpec> tags;
  for (size_t i = 0; i < structures.size(); ++i) {
    const std::string path = fmt::format("$.structures[{}]", i);
    const ojson& s = structures[i];
    if (!s.is_object()) fail("{}: must be an object {{begin, schema, end}}", path);
    check_keys(s, path, {"begin", "schema", "end"});
    owned_.push_back({{"type", "json_schema"}, {"json_schema", field(s, "schema", path)}});
    TagSpec t;
    t.begin = string_field(s, "begin", path);
    t.ends = {string_field(s, "end", path)};
    t.content = &owned_.back();
    t.path = path;
    t.content_path = path + ".schema";
    tags.push_back(std::move(t));
  }
  list_field(tag, "triggers", "$");
  return triggered("$", strings_field(tag, "triggers", "$", false), tags, false, false, {}, Tail{Tail::Kind::Output, {}});
}

}  // namespace

std::string structural_tag_to_gbnf(const nlohmann::ordered_json& tag) { return StructuralTagCompiler().run(tag); }

}  // namespace eaglet::constrain
