#include "server/tool_parser.h"

#include <fmt/format.h>

#include <functional>

#include "core/error.h"
#include "server/tagged_tool_parser.h"

namespace eaglet {

using ojson = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;

int ToolCallParser::begin_call(const std::string& name, OutputDelta* out) {
  out->calls.push_back({next_, id_base_ + std::to_string(next_), name, ""});
  return next_++;
}

void ToolCallParser::arguments(int index, std::string_view text, OutputDelta* out) {
  if (!text.empty()) out->calls.push_back({index, "", "", std::string(text)});
}

size_t marker_prefix_at_end(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// --- Markers around blocks -------------------------------------------------------------------

// After a call, the whitespace that ends a piece is held whatever the pieces: it comes out only
// when text other than whitespace or a call follows it, so a split cannot change the content.
void TaggedToolParser::content(std::string_view text, OutputDelta* out) {
  if (text.empty()) return;
  const size_t last = calls() > 0 ? text.find_last_not_of(" \t\r\n") : text.size() - 1;
  if (last == npos) {
    blank_ += text;
    return;
  }
  out->content += blank_;
  out->content += text.substr(0, last + 1);
  blank_.assign(text.substr(last + 1));
}

void TaggedToolParser::feed(std::string_view text, OutputDelta* out) {
  buf_ += text;
  for (;;) {
    if (!in_block_) {
      const size_t at = buf_.find(open_);
      if (at == npos) {
        const size_t keep = marker_prefix_at_end(buf_, open_);
        content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      content(std::string_view(buf_).substr(0, at), out);
      buf_.erase(0, at + open_.size());
      in_block_ = true;
      blank_.clear();
      begin_block();
    }
    const size_t end = buf_.find(close_);
    if (end == npos) {  // a possible start of the closing marker is held back: the body only grows
      body(std::string_view(buf_).substr(0, buf_.size() - marker_prefix_at_end(buf_, close_)), false, out);
      return;
    }
    if (!body(std::string_view(buf_).substr(0, end), true, out)) content(open_ + buf_.substr(0, end + close_.size()), out);
    buf_.erase(0, end + close_.size());
    in_block_ = false;
  }
}

void TaggedToolParser::finish(OutputDelta* out) {
  if (in_block_) {  // cut off inside a block: what it settled stays, the rest is content
    if (!body(buf_, true, out)) content(open_ + buf_, out);
  } else {
    content(buf_, out);
  }
  buf_.clear();
  in_block_ = false;
}

// --- JSON calls ------------------------------------------------------------------------------

namespace {

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

constexpr size_t kBad = npos - 1;

// The end of the JSON value at s[i] (npos: the text stops inside it; kBad: none starts there).
// Brackets and strings are followed; the value is checked as JSON once whole.
size_t value_end(std::string_view s, size_t i) {
  if (i >= s.size()) return npos;
  const char c = s[i];
  if (c == '"') {
    for (size_t j = i + 1; j < s.size(); ++j) {
      if (s[j] == '\\') ++j;
      else if (s[j] == '"') return j + 1;
    }
    return npos;
  }
  if (c == '{' || c == '[') {
    int depth = 0;
    for (size_t j = i; j < s.size(); ++j) {
      if (s[j] == '"') {
        const size_t e = value_end(s, j);
        if (e == npos) return npos;
        j = e - 1;
      } else if (s[j] == '{' || s[j] == '[') {
        ++depth;
      } else if ((s[j] == '}' || s[j] == ']') && --depth == 0) {
        return j + 1;
      }
    }
    return npos;
  }
  size_t j = i;
  while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == '+' || s[j] == '-')) ++j;
  if (j == i) return kBad;
  return j == s.size() ? npos : j;  // a number may go on
}

// One call object {"name": ..., ARGS: ...} as far as the text goes.
struct CallScan {
  enum State { Partial, Whole, Bad } state = Partial;
  std::string name;
  bool has_name = false;
  size_t args_begin = npos, args_end = npos;  // the arguments value's text
  size_t end = npos;                          // past the closing brace (Whole)
};

CallScan scan_call(std::string_view s, std::string_view args_key) {
  CallScan r;
  auto bad = [&] { r.state = CallScan::Bad; return r; };
  size_t i = skip_ws(s, 0);
  if (i == s.size()) return r;
  if (s[i] != '{') return bad();
  for (++i;;) {
    i = skip_ws(s, i);
    if (i == s.size()) return r;
    if (s[i] == '}' && r.args_begin == npos && !r.has_name) return bad();
    if (s[i] != '"') return bad();
    const size_t key_end = value_end(s, i);
    if (key_end == npos) return r;
    const ojson key = ojson::parse(s.substr(i, key_end - i), nullptr, false);
    if (key.is_discarded()) return bad();
    i = skip_ws(s, key_end);
    if (i == s.size()) return r;
    if (s[i] != ':') return bad();
    i = skip_ws(s, i + 1);
    if (i == s.size()) return r;
    const size_t v_end = value_end(s, i);
    if (v_end == kBad) return bad();
    if (key == args_key || (args_key == "arguments" && key == "parameters")) r.args_begin = i;
    if (v_end == npos) return r;
    if (key == "name") {
      const ojson n = ojson::parse(s.substr(i, v_end - i), nullptr, false);
      if (n.is_discarded() || !n.is_string() || n.get<std::string>().empty()) return bad();  // a call names a tool
      r.name = n.get<std::string>();
      r.has_name = true;
    } else if (r.args_begin == i) {
      r.args_end = v_end;
    }
    i = skip_ws(s, v_end);
    if (i == s.size()) return r;
    if (s[i] == ',') {
      ++i;
      continue;
    }
    if (s[i] != '}') return bad();
    if (!r.has_name) return bad();
    r.state = CallScan::Whole;
    r.end = i + 1;
    return r;
  }
}

// Streams one JSON call object: its name once known and its arguments value as written (an
// arguments *string* of JSON, which some models write, is decoded once whole).
class JsonCallStream {
 public:
  explicit JsonCallStream(std::string args_key) : key_(std::move(args_key)) {}
  // `text`: the object so far (leading whitespace allowed). Returns the scan. What was read before
  // a malformed part comes out even then: a stream cannot take back what it sent, and the whole
  // text must settle as its pieces do.
  using Begin = std::function<int(const std::string&, OutputDelta*)>;
  CallScan update(std::string_view text, OutputDelta* out, const Begin& begin) {
    CallScan s = scan_call(text, key_);
    const bool raw = s.args_begin != npos && text[s.args_begin] != '"';
    if (index_ < 0 && s.has_name && raw) index_ = begin(s.name, out);
    if (index_ >= 0 && raw) {
      const size_t upto = s.args_end != npos ? s.args_end : text.size();
      emit(text.substr(s.args_begin + sent_, upto - s.args_begin - sent_), out);
      sent_ = upto - s.args_begin;
    }
    if (s.state == CallScan::Whole) settle(text.substr(0, s.end), s, out, begin);
    return s;
  }
  bool started() const { return index_ >= 0; }

 private:
  void emit(std::string_view t, OutputDelta* out) {
    if (!t.empty()) out->calls.push_back({index_, "", "", std::string(t)});
  }
  // The whole object: a call not streamed yet (name after the arguments, arguments as a string,
  // none at all) comes out now.
  void settle(std::string_view object, const CallScan& s, OutputDelta* out, const Begin& begin) {
    if (index_ >= 0) return;
    std::string args = "{}";
    if (s.args_begin != npos) {
      const ojson v = ojson::parse(object.substr(s.args_begin, s.args_end - s.args_begin), nullptr, false);
      args = v.is_string() ? v.get<std::string>() : std::string(object.substr(s.args_begin, s.args_end - s.args_begin));
    }
    index_ = begin(s.name, out);
    emit(args, out);
  }
  const std::string key_;
  int index_ = -1;
  size_t sent_ = 0;
};

// hermes: one JSON call per <tool_call> block.
class HermesParser final : public TaggedToolParser {
 public:
  explicit HermesParser(std::string id_base) : TaggedToolParser("<tool_call>", "</tool_call>", std::move(id_base)) {}

 private:
  void begin_block() override { call_ = std::make_unique<JsonCallStream>("arguments"); }
  bool body(std::string_view text, bool closed, OutputDelta* out) override {
    auto begin = [this](const std::string& n, OutputDelta* o) { return begin_call(n, o); };
    const CallScan s = call_->update(text, out, begin);
    if (!closed) return true;
    return call_->started() || (s.state == CallScan::Whole && ojson::parse(text.substr(0, s.end), nullptr, false).is_object());
  }
  std::unique_ptr<JsonCallStream> call_;
};

// A run of JSON call objects: llama3_json's `{...}; {...}` and the forced "required" list
// `[{...}, {...}]`. Output that does not start as such is content (llama3_json) from there on.
class JsonCallsParser final : public ToolCallParser {
 public:
  enum class Style { Llama3, List };
  JsonCallsParser(Style style, std::string id_base)
      : ToolCallParser(std::move(id_base)), style_(style), key_(style == Style::List ? "parameters" : "arguments") {}

  void feed(std::string_view text, OutputDelta* out) override {
    buf_ += text;
    if (mode_ == Mode::Content) return flush_content(out);
    if (mode_ == Mode::Start && !start(out)) return;
    auto begin = [this](const std::string& n, OutputDelta* o) { return begin_call(n, o); };
    while (mode_ == Mode::Calls) {
      size_t i = skip_ws(buf_, pos_);
      if (!call_) {
        if (i == buf_.size()) return;
        const char sep = style_ == Style::List ? ',' : ';';
        if (buf_[i] == sep && calls() > 0) i = skip_ws(buf_, i + 1);
        else if (style_ == Style::List && buf_[i] == ']') return (void)(pos_ = i + 1, mode_ = Mode::Done);
        // Ended after a separator: it is read again with what follows, or a second separator in
        // the next piece would pass as the one after it (pieces settled differently from the
        // whole text: `{...}; ;x` left `;x` as content whole and `x` cut after `; `).
        if (i == buf_.size()) return;
        pos_ = i;
        call_ = std::make_unique<JsonCallStream>(key_);
      }
      const CallScan s = call_->update(std::string_view(buf_).substr(pos_), out, begin);
      if (s.state == CallScan::Partial) return;
      if (s.state == CallScan::Bad) return give_up(out);
      pos_ += s.end;
      call_.reset();
    }
  }

  void finish(OutputDelta* out) override {
    if (mode_ != Mode::Content && calls() == 0) give_up(out);
    if (mode_ == Mode::Content) flush_content(out);
  }

 private:
  enum class Mode { Start, Calls, Content, Done };
  // Decides from the first characters whether the output is calls.
  bool start(OutputDelta* out) {
    static const std::string kTag = "<|python_tag|>";
    size_t i = skip_ws(buf_, 0);
    if (i == buf_.size()) return false;
    if (style_ == Style::Llama3) {
      const std::string_view rest = std::string_view(buf_).substr(i);
      if (rest.size() < kTag.size() && kTag.compare(0, rest.size(), rest) == 0) return false;
      if (rest.substr(0, kTag.size()) == kTag) {
        i = skip_ws(buf_, i + kTag.size());
        if (i == buf_.size()) return false;
      }
    }
    const char want = style_ == Style::List ? '[' : '{';
    if (buf_[i] != want) {
      give_up(out);
      return false;
    }
    pos_ = style_ == Style::List ? i + 1 : i;
    mode_ = Mode::Calls;
    return true;
  }
  // Not calls after all: the text is content (what streamed as calls stays).
  void give_up(OutputDelta* out) {
    if (calls() > 0) buf_.erase(0, pos_);
    mode_ = Mode::Content;
    call_.reset();
    flush_content(out);
  }
  void flush_content(OutputDelta* out) {
    out->content += buf_;
    buf_.clear();
  }
  const Style style_;
  const std::string key_;
  Mode mode_ = Mode::Start;
  std::string buf_;
  size_t pos_ = 0;
  std::unique_ptr<JsonCallStream> call_;
};

// tool_choice naming a function: the whole output is its arguments.
class NamedCallParser final : public ToolCallParser {
 public:
  NamedCallParser(std::string name, std::string id_base) : ToolCallParser(std::move(id_base)), name_(std::move(name)) {}
  void feed(std::string_view text, OutputDelta* out) override {
    if (index_ < 0) index_ = begin_call(name_, out);
    arguments(index_, text, out);
  }
  void finish(OutputDelta* out) override {
    if (index_ < 0) index_ = begin_call(name_, out);
  }

 private:
  const std::string name_;
  int index_ = -1;
};

}  // namespace

// server/tool_parser_xml.cpp: null for a name that is not one of its formats.
std::unique_ptr<ToolCallParser> make_xml_tool_call_parser(const std::string& name, const ToolRequest& tools, std::string id_base);

const std::vector<std::string>& tool_call_parser_names() {
  static const std::vector<std::string> names = {"hermes", "llama3_json", "minimax_m2", "minimax_m3", "qwen3_coder"};
  return names;
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(const std::string& name, const ToolRequest& tools, std::string id_base) {
  if (name == "hermes") return std::make_unique<HermesParser>(std::move(id_base));
  if (name == "llama3_json") return std::make_unique<JsonCallsParser>(JsonCallsParser::Style::Llama3, std::move(id_base));
  if (auto xml = make_xml_tool_call_parser(name, tools, id_base)) return xml;
  fail("--tool-call-parser '{}' is not one of: {}", name, fmt::join(tool_call_parser_names(), ", "));
}

std::unique_ptr<ToolCallParser> make_forced_tool_call_parser(const ToolRequest& tools, std::string id_base) {
  if (tools.choice == ToolRequest::Choice::Named) return std::make_unique<NamedCallParser>(tools.named, std::move(id_base));
  return std::make_unique<JsonCallsParser>(JsonCallsParser::Style::List, std::move(id_base));
}

}  // namespace eaglet
