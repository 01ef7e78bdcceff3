#include "server/openai_server.h"

#include <spdlog/spdlog.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <mutex>
#include <random>
#include <strings.h>
#include <thread>

#include "core/error.h"
#include "core/splitmix.h"
#include "core/version.h"
#include "io/json_config.h"
#include "server/chat_output.h"
#include "server/openai_protocol.h"
#include "server/structured_output.h"
#include "tokenizer/chat_template.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return fmt::format("{}-{:016x}{:04x}", prefix, salt ^ uint64_t(std::time(nullptr)), counter++ & 0xffff);
}

std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// What a token's entry in the logprobs JSON takes besides its text: its log-probability, its
// offset and the punctuation around them (about; the response budget is not exact to the byte).
constexpr size_t kLogprobEntryBytes = 48;
constexpr size_t kTopEntryBytes = 20;  // one alternative: `"text": -1.23456789, `

// Output of one of a call's n sequences, as the scheduler reports it.
struct Event {
  int index;
  std::string text;
  std::vector<TokenLogprob> tokens;
  std::string finish;  // set on the last event of a sequence
  int completion_tokens = 0;
  bool echo = false;   // the prompt itself (echo), with its tokens' log-probabilities
};

// Per-position log-probabilities of an echoed prompt: the first token has none (null).
std::vector<TokenLogprob> echoed_prompt(const std::vector<int>& prompt, std::vector<TokenLogprob> scored) {
  std::vector<TokenLogprob> out{TokenLogprob{prompt.empty() ? -1 : prompt[0], std::nanf(""), {}}};
  for (auto& t : scored) out.push_back(std::move(t));
  return out;
}
}  // namespace

bool constant_time_equal(const std::string& given, const std::string& expected) {
  unsigned diff = given.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= unsigned(static_cast<unsigned char>(i < given.size() ? given[i] : 0) ^ static_cast<unsigned char>(expected[i]));
  return diff == 0;
}

struct OpenAiServer::Impl {
  ModelBundle& bundle;
  Scheduler& scheduler;
  ServingMetrics& metrics;
  ServerOptions opts;
  std::unique_ptr<ChatTemplate> chat_template;
  // Before `transport`: requests still queued on its connections are destroyed with it, and they
  // count themselves out of active_calls.
  std::atomic<bool> draining{false};
  std::atomic<int> active_calls{0};
  std::once_flag shutdown_once;
  http::Server transport;

  Impl(ModelBundle& b, Scheduler& s, ServingMetrics& m, ServerOptions o)
      : bundle(b), scheduler(s), metrics(m), opts(std::move(o)),
        transport(opts.limits, [](int status, const std::string& msg) {
          const char* type = status == 404 ? "NotFoundError" : status < 500 ? "invalid_request_error" : "server_error";
          return to_text(error_body(ApiError{status, msg, type, ""}));
        }) {
    chat_template = opts.chat_template.empty() ? ChatTemplate::from_tokenizer_config(bundle.tokenizer.config())
                                               : std::make_unique<ChatTemplate>(opts.chat_template);
    if (opts.enable_auto_tool_choice && opts.tool_call_parser.empty())
      fail("--enable-auto-tool-choice needs --tool-call-parser (one of: {})", fmt::join(tool_call_parser_names(), ", "));
    if (!opts.tool_call_parser.empty()) make_tool_call_parser(opts.tool_call_parser, ToolRequest{}, "");  // checks the name
    if (!opts.reasoning_parser.empty()) reasoning = &reasoning_format(opts.reasoning_parser);
    size_t bytes = 0;
    const int V = bundle.model->config().vocab;
    for (int t = 0; t < V; ++t) bytes += bundle.tokenizer.token_bytes(t).size();
    mean_token_bytes = V > 0 ? double(bytes) / V : 0;
    routes();
  }
  double mean_token_bytes = 0;  // over the vocabulary: what an unknown alternative takes in logprobs
  const ReasoningFormat* reasoning = nullptr;  // --reasoning-parser

  bool auto_tools() const { return opts.enable_auto_tool_choice && !opts.tool_call_parser.empty(); }

  // The request's constraint (structured output or a forced tool choice) as the sampler's
  // grammar, applied after the reasoning when the server parses reasoning.
  void constrain(ApiRequest& r, ReasoningStart start) {
    std::optional<GrammarAsk> ask = r.structured;
    if (r.tools.forced()) ask = GrammarAsk{"tool_choice", forced_tool_gbnf(r.tools)};
    if (!ask) return;
    if (reasoning && start != ReasoningStart::Outside) {
      static const std::string kStart = "eaglet-after-reasoning";
      r.sampling.grammar = compile_grammar({ask->param, after_reasoning_gbnf(ask->gbnf, *reasoning, start, kStart)}, kStart);
    } else {
      r.sampling.grammar = compile_grammar(*ask);
    }
    r.sampling.vocabulary = vocabulary();
  }

  // The tokenizer's vocabulary as a trie for grammar masks: built by the first constrained request.
  std::shared_ptr<const constrain::TokenTrie> vocabulary() {
    std::call_once(vocabulary_once, [&] { vocabulary_trie = std::make_shared<const constrain::TokenTrie>(bundle.tokenizer); });
    return vocabulary_trie;
  }
  std::once_flag vocabulary_once;
  std::shared_ptr<const constrain::TokenTrie> vocabulary_trie;

  // An echoed prompt's log-probabilities are known in size before any work: refuse a request whose
  // scored prompts alone would pass --max-response-bytes (64 x 511 tokens with 20 alternatives
  // built 16.8 MB and took 5 s of engine time).
  void check_prompt_logprobs_size(const ApiRequest& r, const std::vector<std::vector<int>>& prompts) const {
    if (!r.echo || r.logprobs < 0) return;
    double bytes = 0;
    for (auto& p : prompts)
      for (int t : p) bytes += double(bundle.tokenizer.token_bytes(t).size() + kLogprobEntryBytes) +
                               r.logprobs * (mean_token_bytes + kTopEntryBytes);
    bytes *= r.n;
    if (bytes > double(opts.max_response_bytes))
      throw ApiError{400, fmt::format("echo with logprobs {} would build a response of about {:.0f} bytes, over the server's "
                                      "limit of {} bytes (--max-response-bytes); send fewer or shorter prompts, or fewer logprobs",
                                      r.logprobs, bytes, opts.max_response_bytes), "invalid_request_error", "logprobs"};
  }

  uint64_t next_seed() {
    if (!opts.seed) return std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
    std::lock_guard<std::mutex> lk(seed_mu);  // requests arrive on several connection threads
    return splitmix64(seed_state);
  }
  std::mutex seed_mu;
  uint64_t seed_state = opts.seed.value_or(0);

  static void send_error(http::Responder& out, const ApiError& e) {
    out.send(e.status, "application/json", to_text(error_body(e)));
  }

  // RFC 7235: the scheme is case-insensitive ("bearer" is as good as "Bearer"); the key is not.
  bool authorized(const http::Request& req) const {
    if (opts.api_key.empty()) return true;
    const std::string h = req.header("Authorization");
    const bool bearer = h.size() > 7 && strncasecmp(h.c_str(), "bearer ", 7) == 0;
    return constant_time_equal(bearer ? h.substr(7) : std::string(), opts.api_key) && bearer;
  }
  static ApiError unauthorized() { return ApiError{401, "Incorrect or missing API key", "authentication_error", ""}; }

  // JSON with a nesting limit checked while parsing: a 4 MB body of '[' allocated ~140 MB.
  json parse_body(const std::string& body) const {
    const int max_depth = opts.max_json_depth;
    try {
      return json::parse(body, [max_depth](int depth, json::parse_event_t, json&) {
        if (depth > max_depth)
          throw ApiError{400, fmt::format("request body nests deeper than {} levels", max_depth), "invalid_request_error", ""};
        return true;
      });
    } catch (const json::exception& e) {
      throw ApiError{400, std::string("invalid JSON body: ") + e.what(), "invalid_request_error", ""};
    }
  }

  // Token ids of one prompt (`p`; null for chat, whose messages go through the template),
  // refused before tokenizing when the text cannot fit the context.
  // `rendered`: set to the chat template's output (chat).
  std::vector<int> tokenize(const ApiRequest& r, const ApiRequest::Prompt* p, int max_len, const std::string& param,
                            std::string* rendered_out = nullptr) const {
    const int V = bundle.model->config().vocab;
    auto too_long = [&](const std::string& n) {
      return ApiError{400, fmt::format("This model's maximum context length is {} tokens. However, your request has {} input tokens.",
                                       max_len, n), "invalid_request_error", param};
    };
    std::string rendered;  // chat: the template's output
    if (r.chat) {
      if (!chat_template)
        throw ApiError{400, "this model has no chat_template (tokenizer_config.json) and none was given (--chat-template); use /v1/completions",
                       "invalid_request_error", "messages"};
      uint64_t work = 0;
      // glibc keeps what a large render freed in this thread's arena; give it back.
      struct Trim {
        uint64_t& work;
        ~Trim() {
          if (work > (uint64_t(16) << 20)) malloc_trim(0);
        }
      } trim{work};
      try {
        const jinja::RenderLimits limits{opts.chat_template_timeout_s, &draining, &work};
        nlohmann::ordered_json vars = nlohmann::ordered_json(r.chat_template_kwargs);
        if (r.tools.any()) vars["tools"] = r.tools.tools;
        rendered = chat_template->render(r.messages, r.add_generation_prompt, bundle.tokenizer, vars, limits);
      } catch (const std::exception& e) {
        if (draining) throw ApiError{503, "the server is shutting down", "server_error", ""};
        throw ApiError{400, std::string("chat template failed: ") + e.what(), "invalid_request_error", "messages"};
      }
    }
    std::vector<int> ids;
    if (p && p->is_ids) {
      if (p->ids.size() >= size_t(max_len)) throw too_long(std::to_string(p->ids.size()));
      for (int64_t t : p->ids)
        if (t < 0 || t >= V) throw ApiError{400, fmt::format("token id {} is outside the vocabulary [0, {})", t, V), "invalid_request_error", param};
      ids.assign(p->ids.begin(), p->ids.end());
    } else {  // the tokenizer only produces ids the model has (load_bundle checks)
      const std::string& text = r.chat ? rendered : p->text;
      if (const size_t least = bundle.tokenizer.min_tokens(text.size()); least >= size_t(max_len))
        throw too_long(fmt::format("at least {}", least));
      ids = bundle.tokenizer.encode(text, r.chat ? 0 : -1, true, size_t(max_len));
      if (ids.size() >= size_t(max_len)) throw too_long(fmt::format("at least {}", ids.size()));
    }
    if (ids.empty()) throw ApiError{400, "the prompt is empty", "invalid_request_error", param};
    if (rendered_out) *rendered_out = std::move(rendered);
    return ids;
  }

  void check_model(const ApiRequest& r) const {
    if (!r.model.empty() && r.model != opts.served_model_name)
      throw ApiError{404, fmt::format("The model `{}` does not exist.", r.model), "NotFoundError", "model"};
  }

  // /tokenize and /detokenize, as vLLM serves them.
  void tokenize_route(const http::Request& q, http::Responder& out) const;
  void detokenize_route(const http::Request& q, http::Responder& out) const;

  void generate(const http::Request& hreq, const std::shared_ptr<http::Responder>& out, bool chat);
  void routes();
};

namespace {

// One API request in flight: its n sequences in the scheduler and its HTTP response. The
// scheduler's callbacks hold it (so it lives while a sequence does); it holds the sequences only
// weakly, and the disconnect hook holds it weakly, so nothing forms a cycle.
class ApiCall : public std::enable_shared_from_this<ApiCall> {
 public:
  // `prompts`: one per prompt of the request; choice p * n + i is sequence i of prompt p.
  // `start`: where a chat output begins with respect to the reasoning (--reasoning-parser).
  ApiCall(OpenAiServer::Impl& s, ApiRequest r, std::vector<std::vector<int>> prompts, std::shared_ptr<http::Responder> out,
          ReasoningStart start)
      : srv_(s), r_(std::move(r)), prompts_(std::move(prompts)), choices_(int(prompts_.size()) * r_.n), out_(std::move(out)),
        id_(random_id(r_.chat ? "chatcmpl" : "cmpl")), created_(int64_t(std::time(nullptr))),
        acc_(size_t(choices_)), offsets_(size_t(choices_), 0) {
    for (auto& p : prompts_) prompt_tokens_ += int(p.size());
    if (r_.chat) split_outputs(start);
    ++srv_.active_calls;
  }
  ~ApiCall() { --srv_.active_calls; }

  // Queues the n sequences; throws ApiError 503 when the scheduler's queue is full.
  void start(int max_tokens) {
    const uint64_t base_seed = r_.seed_given ? r_.sampling.seed : srv_.next_seed();
    std::vector<std::shared_ptr<Request>> reqs;
    for (int i = 0; i < choices_; ++i) {
      auto q = std::make_shared<Request>();
      const std::vector<int>& prompt = prompts_[size_t(i / r_.n)];
      q->prompt = prompt;
      q->sampling = r_.sampling;
      q->sampling.seed = base_seed + uint64_t(i);
      q->stop.max_tokens = max_tokens;
      q->stop.stop_tokens = srv_.bundle.eos_ids;
      q->stop.stop_strings = r_.stop;
      q->stop.ignore_eos = r_.ignore_eos;
      q->top_logprobs = r_.logprobs;
      q->no_capture = r_.no_train;
      auto self = shared_from_this();
      if (r_.echo && r_.logprobs >= 0) {
        q->prompt_logprobs = r_.logprobs;
        q->on_prompt_logprobs = [self, i, &prompt](std::vector<TokenLogprob> scored) {
          self->push({i, "", echoed_prompt(prompt, std::move(scored)), "", 0, true});
        };
      }
      q->on_output = [self, i](const std::string& text, const std::vector<TokenLogprob>& toks) { self->push({i, text, toks, "", 0}); };
      q->on_finish = [self, i](const std::string& reason, int n) { self->push({i, "", {}, reason, n}); };
      reqs.push_back(q);
      reqs_.push_back(q);
    }
    for (auto& q : reqs)
      if (!srv_.scheduler.submit(q)) {
        {
          std::lock_guard<std::mutex> lk(mu_);
          failed_ = true;  // the sequences already queued finish as "abort" and are ignored
        }
        cancel();
        throw ApiError{503, "the server is at capacity (waiting queue full); retry later", "server_error", ""};
      }
    if (r_.stream) {
      out_->begin_stream("text/event-stream");
      if (r_.chat) {  // the first chunk names the role, as OpenAI's does
        json choices = json::array();
        for (int i = 0; i < choices_; ++i)
          choices.push_back({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                             {"finish_reason", nullptr}});
        out_->write(sse(chunk(choices)));
      }
    }
    std::weak_ptr<ApiCall> weak = shared_from_this();
    out_->on_disconnect([weak] {
      if (auto self = weak.lock()) self->cancel();
    });
    // Events may already be waiting: the scheduler can run before this thread gets here, and its
    // chunks must not reach the connection before the stream's header.
    std::lock_guard<std::mutex> lk(mu_);
    started_ = true;
    post_drain();
  }

 private:
  // Scheduler thread: keep the event and have the connection's thread format it.
  void push(Event e) {
    std::lock_guard<std::mutex> lk(mu_);
    if (failed_) return;
    events_.push_back(std::move(e));
    post_drain();
  }

  void post_drain() {  // with mu_ held
    if (!started_ || drain_posted_ || events_.empty()) return;
    drain_posted_ = true;
    out_->post([self = shared_from_this()] { self->drain(); });
  }

  void cancel() {
    for (auto& w : reqs_)
      if (auto q = w.lock()) q->cancelled = true;
  }

  void drain() {
    std::deque<Event> events;
    {
      std::lock_guard<std::mutex> lk(mu_);
      events.swap(events_);
      drain_posted_ = false;
    }
    for (auto& e : events) {
      if (!e.finish.empty()) {
        ++finished_;
        completion_ += e.completion_tokens;
      }
      // echo without scores: the prompt's text goes first (with scores it comes as its own event).
      if (r_.echo && r_.logprobs < 0 && !echoed_[size_t(e.index)]) {
        echoed_[size_t(e.index)] = true;
        const Event prompt{e.index, srv_.bundle.tokenizer.decode(prompts_[size_t(e.index / r_.n)]), {}, "", 0};
        r_.stream ? stream(prompt) : collect(prompt);
      }
      if (done_) break;  // over the response budget: answered already
      r_.stream ? stream(e) : collect(e);
    }
    if (finished_ == choices_ && !done_) finish();
  }

  // A response held whole until it is sent counts its bytes: past --max-response-bytes the
  // request ends here, its sequences cancelled, with a 400 naming the limit. (A stream's bytes
  // leave as they come; the transport bounds what a client leaves unread.)
  bool charge(size_t n) {
    response_bytes_ += n;
    if (response_bytes_ <= srv_.opts.max_response_bytes) return true;
    done_ = true;
    cancel();
    OpenAiServer::Impl::send_error(*out_, ApiError{400, fmt::format("the response grew past the server's limit of {} bytes "
                                                      "(--max-response-bytes); ask for fewer tokens, choices or logprobs",
                                                      srv_.opts.max_response_bytes),
                                     "invalid_request_error", r_.chat ? "max_completion_tokens" : "max_tokens"});
    return false;
  }

  ChoiceDelta delta_of(const Event& e) const {
    ChoiceDelta d;
    d.index = e.index;
    d.text = e.echo ? srv_.bundle.tokenizer.decode(prompts_[size_t(e.index / r_.n)]) : e.text;
    d.finish_reason = e.finish;
    for (auto& t : e.tokens) {
      d.tokens.push_back(t.token);
      d.logprobs.push_back(t.logprob);
      std::vector<std::pair<std::string, float>> top;
      for (auto& [id, lp] : t.top) top.emplace_back(srv_.bundle.tokenizer.token_bytes(id), lp);
      d.top.push_back(top);
    }
    return d;
  }

  std::vector<std::string> token_texts(const std::vector<int>& tokens) const {
    std::vector<std::string> out;
    for (int t : tokens) out.push_back(srv_.bundle.tokenizer.token_bytes(t));
    return out;
  }

  json chunk(json choices) const {
    return {{"id", id_}, {"object", r_.chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
            {"model", srv_.opts.served_model_name}, {"choices", std::move(choices)}};
  }
  static std::string sse(const json& j) { return "data: " + to_text(j) + "\n\n"; }

  // Chat outputs with reasoning or tool calls to find: one splitter per choice.
  void split_outputs(ReasoningStart start) {
    const bool automatic = r_.tools.choice == ToolRequest::Choice::Auto;
    if (!r_.tools.forced() && !automatic && !srv_.reasoning) return;
    for (int i = 0; i < choices_; ++i) {
      const std::string ids = random_id("chatcmpl-tool") + "-";
      std::unique_ptr<ToolCallParser> tools;
      if (r_.tools.forced()) tools = make_forced_tool_call_parser(r_.tools, ids);
      else if (automatic) tools = make_tool_call_parser(srv_.opts.tool_call_parser, r_.tools, ids);
      outputs_.push_back(std::make_unique<ChatOutput>(srv_.reasoning, start, std::move(tools)));
    }
    messages_.resize(size_t(choices_));
  }

  // What an event settles in its choice's split output (the last event flushes what was held).
  OutputDelta split(const Event& e) {
    ChatOutput& o = *outputs_[size_t(e.index)];
    OutputDelta d = o.feed(e.text);
    if (!e.finish.empty()) d.append(o.finish());
    return d;
  }

  void stream(const Event& e) {
    if (!outputs_.empty()) return stream_split(e);
    const ChoiceDelta d = delta_of(e);
    json lp;
    if (r_.logprobs >= 0 && !d.tokens.empty()) {
      const auto tt = token_texts(d.tokens);
      lp = r_.chat ? chat_logprobs_json(d, tt) : completion_logprobs_json(d, tt, offsets_[size_t(e.index)]);
    }
    offsets_[size_t(e.index)] += d.text.size();
    json choice = {{"index", e.index}, {"logprobs", lp}, {"finish_reason", e.finish.empty() ? json() : json(e.finish)}};
    if (r_.chat) choice["delta"] = e.finish.empty() ? json{{"content", d.text}} : json::object();
    else choice["text"] = d.text;
    json c = chunk(json::array({choice}));
    if (r_.include_usage) c["usage"] = nullptr;
    out_->write(sse(c));
  }

  void stream_split(const Event& e) {
    const OutputDelta d = split(e);
    const ChoiceDelta cd = delta_of(e);
    const json lp = r_.logprobs >= 0 && !cd.tokens.empty() ? chat_logprobs_json(cd, token_texts(cd.tokens)) : json();
    auto write = [&](json delta, json finish) {
      json c = chunk(json::array({{{"index", e.index}, {"delta", std::move(delta)}, {"logprobs", lp}, {"finish_reason", finish}}}));
      if (r_.include_usage) c["usage"] = nullptr;
      out_->write(sse(c));
    };
    if (!d.empty() || !lp.is_null()) write(chat_delta_json(d), json());
    if (!e.finish.empty()) write(json::object(), chat_finish_reason(e.finish, outputs_[size_t(e.index)]->tool_calls()));
  }

  void collect(const Event& e) {
    auto& acc = acc_[size_t(e.index)];
    const ChoiceDelta d = delta_of(e);
    if (!charge(response_bytes_of(d))) return;
    acc.text += d.text;
    acc.tokens.insert(acc.tokens.end(), d.tokens.begin(), d.tokens.end());
    acc.logprobs.insert(acc.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    acc.top.insert(acc.top.end(), d.top.begin(), d.top.end());
    if (!e.finish.empty()) acc.finish_reason = e.finish;
    if (!outputs_.empty()) messages_[size_t(e.index)].add(split(e));
  }

  void finish() {
    done_ = true;
    if (r_.stream) {
      if (r_.include_usage) {
        json c = chunk(json::array());
        c["usage"] = usage_json(prompt_tokens_, completion_);
        out_->write(sse(c));
      }
      out_->write("data: [DONE]\n\n");
      out_->end();
      return;
    }
    json choices = json::array();
    for (int i = 0; i < choices_; ++i) {
      auto& c = acc_[size_t(i)];
      const auto tt = token_texts(c.tokens);
      const json lp = r_.logprobs < 0 ? json() : (r_.chat ? chat_logprobs_json(c, tt) : completion_logprobs_json(c, tt, 0));
      if (r_.chat && !outputs_.empty())
        choices.push_back({{"index", i}, {"message", messages_[size_t(i)].message(srv_.reasoning != nullptr)}, {"logprobs", lp},
                           {"finish_reason", chat_finish_reason(c.finish_reason, outputs_[size_t(i)]->tool_calls())}});
      else if (r_.chat)
        choices.push_back({{"index", i}, {"message", {{"role", "assistant"}, {"content", c.text}}}, {"logprobs", lp},
                           {"finish_reason", c.finish_reason}});
      else
        choices.push_back({{"index", i}, {"text", c.text}, {"logprobs", lp}, {"finish_reason", c.finish_reason}});
    }
    const json out = {{"id", id_}, {"object", r_.chat ? "chat.completion" : "text_completion"}, {"created", created_},
                      {"model", srv_.opts.served_model_name}, {"choices", choices}, {"usage", usage_json(prompt_tokens_, completion_)}};
    out_->send(200, "application/json", to_text(out));
  }

  // About what `d` adds to a response (text, and per token its text, log-probability and offset).
  static size_t response_bytes_of(const ChoiceDelta& d) {
    size_t n = d.text.size();
    for (size_t i = 0; i < d.tokens.size(); ++i) {
      n += kLogprobEntryBytes;
      for (auto& [text, lp] : d.top[i]) n += text.size() + kTopEntryBytes;
    }
    return n;
  }

  OpenAiServer::Impl& srv_;
  const ApiRequest r_;
  const std::vector<std::vector<int>> prompts_;
  const int choices_;
  int prompt_tokens_ = 0;
  const std::shared_ptr<http::Responder> out_;
  const std::string id_;
  const int64_t created_;
  std::vector<std::weak_ptr<Request>> reqs_;
  std::mutex mu_;  // guards events_, started_, drain_posted_, failed_ (the scheduler thread pushes)
  std::deque<Event> events_;
  bool started_ = false, drain_posted_ = false, failed_ = false;
  // Only on the connection's thread:
  int finished_ = 0, completion_ = 0;
  bool done_ = false;
  size_t response_bytes_ = 0;
  std::vector<ChoiceDelta> acc_;   // non-streaming: each choice so far
  std::vector<size_t> offsets_;    // streaming: text offset of each choice (completion logprobs)
  std::vector<bool> echoed_ = std::vector<bool>(size_t(choices_), false);
  std::vector<std::unique_ptr<ChatOutput>> outputs_;  // chat with reasoning or tool calls: per choice
  std::vector<ChatMessageBuilder> messages_;          // the same, non-streaming: each choice's message
};

}  // namespace

void OpenAiServer::Impl::generate(const http::Request& hreq, const std::shared_ptr<http::Responder>& out, bool chat) {
  try {
    if (!authorized(hreq)) throw unauthorized();
    if (draining) throw ApiError{503, "the server is shutting down", "server_error", ""};
    const json body = parse_body(hreq.body);
    // A schema's property order and the tools' as sent: the body read again, keeping key order,
    // when it asks for structure or gives tools.
    const bool structured = body.is_object() && (body.contains("tools") ||
                                                 std::any_of(structured_output_fields().begin(), structured_output_fields().end(),
                                                             [&](const std::string& k) { return body.contains(k); }));
    const auto ordered = structured ? nlohmann::ordered_json::parse(hreq.body, nullptr, false) : nlohmann::ordered_json();
    ApiRequest r = parse_request(body, chat, opts.sampling_defaults, structured && !ordered.is_discarded() ? &ordered : nullptr,
                                 auto_tools());
    const std::string no_train = hreq.header("X-Eaglet-No-Train");
    r.no_train = !no_train.empty() && no_train != "0" && no_train != "false";
    check_model(r);
    const int max_len = scheduler.options().max_model_len;
    if (!chat && int(r.prompts.size()) * r.n > 64)
      throw ApiError{400, fmt::format("{} prompts x n = {} sequences; at most 64 per request", r.prompts.size(), r.n),
                     "invalid_request_error", "prompt"};
    for (auto& [id, bias] : r.sampling.logit_bias)
      if (id >= bundle.model->config().vocab)
        throw ApiError{400, fmt::format("logit_bias token id {} is outside the vocabulary [0, {})", id, bundle.model->config().vocab),
                       "invalid_request_error", "logit_bias"};
    std::vector<std::vector<int>> prompts;
    std::string rendered;
    if (chat) prompts.push_back(tokenize(r, nullptr, max_len, "messages", &rendered));
    for (size_t i = 0; i < r.prompts.size(); ++i)
      prompts.push_back(tokenize(r, &r.prompts[i], max_len, r.prompts.size() > 1 ? fmt::format("prompt[{}]", i) : "prompt"));
    check_prompt_logprobs_size(r, prompts);
    size_t longest = 0;
    for (auto& p : prompts) longest = std::max(longest, p.size());
    const int P = int(longest);
    const int max_tokens = r.max_tokens < 0 ? max_len - P : r.max_tokens;
    if (int64_t(P) + max_tokens > max_len)
      throw ApiError{400, fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                      "({} in the input, {} in the completion).", max_len, int64_t(P) + max_tokens, P, max_tokens),
                     "invalid_request_error", chat ? "max_completion_tokens" : "max_tokens"};
    const ReasoningStart start = reasoning && chat ? reasoning_start(*reasoning, rendered) : ReasoningStart::Outside;
    constrain(r, start);
    auto call = std::make_shared<ApiCall>(*this, std::move(r), std::move(prompts), out, start);
    call->start(max_tokens);
  } catch (const ApiError& e) {
    send_error(*out, e);
  } catch (const json::exception& e) {  // a field of the wrong type that no check named: still the client's
    send_error(*out, ApiError{400, std::string("invalid request: ") + e.what(), "invalid_request_error", ""});
  } catch (const std::exception& e) {
    spdlog::error("request failed: {}", e.what());
    send_error(*out, ApiError{500, e.what(), "server_error", ""});
  }
}

// vLLM's /tokenize: {"prompt": text} or {"messages": [...]} (with add_generation_prompt, tools) ->
// {"tokens", "count", "max_model_len"}; add_special_tokens (default true) adds the BOS as
// /v1/completions does.
void OpenAiServer::Impl::tokenize_route(const http::Request& q, http::Responder& out) const {
  try {
    if (!authorized(q)) throw unauthorized();
    const json b = parse_body(q.body);
    if (!b.is_object()) throw ApiError{400, "request body must be a JSON object", "invalid_request_error", ""};
    for (auto& [k, v] : b.items())
      if (k != "model" && k != "prompt" && k != "messages" && k != "add_special_tokens" && k != "add_generation_prompt" &&
          k != "chat_template_kwargs" && k != "tools")
        throw ApiError{400, fmt::format("'{}' is not supported by /tokenize", k), "invalid_request_error", k};
    const bool chat = b.contains("messages");
    if (chat == b.contains("prompt"))
      throw ApiError{400, "give exactly one of 'prompt' and 'messages'", "invalid_request_error", chat ? "messages" : "prompt"};
    if (b.contains("add_special_tokens") && !b["add_special_tokens"].is_boolean())
      throw ApiError{400, "'add_special_tokens' must be a boolean", "invalid_request_error", "add_special_tokens"};
    json req = b;
    req.erase("add_special_tokens");
    if (!chat && !req["prompt"].is_string()) throw ApiError{400, "'prompt' must be a string", "invalid_request_error", "prompt"};
    // Tools only shape the prompt here: any tool_choice will do.
    const auto ordered = chat ? nlohmann::ordered_json::parse(q.body, nullptr, false) : nlohmann::ordered_json();
    const ApiRequest r = parse_request(req, chat, {}, chat && !ordered.is_discarded() ? &ordered : nullptr, /*auto_tools=*/true);
    check_model(r);
    const int max_len = scheduler.options().max_model_len;
    std::vector<int> ids;
    if (chat) {
      ids = tokenize(r, nullptr, max_len, "messages");
    } else {
      const bool special = b.value("add_special_tokens", true);
      ids = bundle.tokenizer.encode(r.prompts[0].text, special ? -1 : 0, true, size_t(max_len) + 1);
    }
    out.send(200, "application/json", to_text({{"tokens", ids}, {"count", ids.size()}, {"max_model_len", max_len}}));
  } catch (const ApiError& e) {
    send_error(out, e);
  } catch (const json::exception& e) {
    send_error(out, ApiError{400, std::string("invalid request: ") + e.what(), "invalid_request_error", ""});
  }
}

// vLLM's /detokenize: {"tokens": [ids]} -> {"prompt": text}.
void OpenAiServer::Impl::detokenize_route(const http::Request& q, http::Responder& out) const {
  try {
    if (!authorized(q)) throw unauthorized();
    const json b = parse_body(q.body);
    if (!b.is_object() || !b.contains("tokens") || !b["tokens"].is_array())
      throw ApiError{400, "'tokens' must be a list of token ids", "invalid_request_error", "tokens"};
    for (auto& [k, v] : b.items())
      if (k != "model" && k != "tokens") throw ApiError{400, fmt::format("'{}' is not supported by /detokenize", k), "invalid_request_error", k};
    if (b.contains("model")) {
      if (!b["model"].is_string()) throw ApiError{400, "'model' must be a string", "invalid_request_error", "model"};
      ApiRequest r;
      r.model = b["model"];
      check_model(r);
    }
    const int V = bundle.model->config().vocab;
    std::vector<int> ids;
    for (auto& t : b["tokens"]) {
      int64_t id;
      if (!json_int64(t, &id) || id < 0 || id >= V)
        throw ApiError{400, fmt::format("token id {} is not in the vocabulary [0, {})", json_brief(t), V), "invalid_request_error", "tokens"};
      ids.push_back(int(id));
    }
    out.send(200, "application/json", to_text({{"prompt", bundle.tokenizer.decode(ids)}}));
  } catch (const ApiError& e) {
    send_error(out, e);
  }
}

void OpenAiServer::Impl::routes() {
  transport.route("POST", "/v1/completions", [this](const http::Request& q, std::shared_ptr<http::Responder> s) { generate(q, s, false); });
  transport.route("POST", "/v1/chat/completions", [this](const http::Request& q, std::shared_ptr<http::Responder> s) { generate(q, s, true); });
  transport.route("GET", "/v1/models", [this](const http::Request& q, std::shared_ptr<http::Responder> s) {
    if (!authorized(q)) return send_error(*s, unauthorized());
    json m = {{"id", opts.served_model_name}, {"object", "model"}, {"created", int64_t(std::time(nullptr))},
              {"owned_by", "eaglet"}, {"root", opts.served_model_name}, {"max_model_len", scheduler.options().max_model_len}};
    s->send(200, "application/json", to_text({{"object", "list"}, {"data", json::array({m})}}));
  }, http::Lane::Inline);
  // Probes and metrics answer on the I/O thread: a pool busy with slow requests must not make a
  // healthy server look dead.
  transport.route("GET", "/health", [this](const http::Request&, std::shared_ptr<http::Responder> s) {
    s->send(draining ? 503 : 200, "application/json", "{}");
  }, http::Lane::Inline);
  // vLLM's liveness and version probes (load balancers and SageMaker-style health checks use them).
  for (const char* method : {"GET", "POST"})
    transport.route(method, "/ping", [this](const http::Request&, std::shared_ptr<http::Responder> s) {
      s->send(draining ? 503 : 200, "application/json", "{}");
    }, http::Lane::Inline);
  transport.route("GET", "/version", [](const http::Request&, std::shared_ptr<http::Responder> s) {
    s->send(200, "application/json", to_text({{"version", kVersion}}));
  }, http::Lane::Inline);
  transport.route("POST", "/tokenize", [this](const http::Request& q, std::shared_ptr<http::Responder> s) { tokenize_route(q, *s); });
  transport.route("POST", "/detokenize", [this](const http::Request& q, std::shared_ptr<http::Responder> s) { detokenize_route(q, *s); });
  // Admin: back to the previous draft version (online training). Needs --api-key: an open server
  // would let anyone change what it serves with.
  transport.route("POST", "/v1/draft/rollback", [this](const http::Request& q, std::shared_ptr<http::Responder> s) {
    if (opts.api_key.empty())
      return send_error(*s, ApiError{403, "POST /v1/draft/rollback is an admin endpoint: start the server with --api-key",
                                     "permission_error", ""});
    if (!authorized(q)) return send_error(*s, unauthorized());
    if (!opts.rollback_draft)
      return send_error(*s, ApiError{404, "no draft versions: the server runs without --online-train", "NotFoundError", ""});
    const json r = opts.rollback_draft();
    s->send(r.value("rolled_back", false) ? 200 : 409, "application/json", to_text(r));
  });
  transport.route("GET", "/metrics", [this](const http::Request& q, std::shared_ptr<http::Responder> s) {
    if (!opts.metrics_public && !authorized(q)) return send_error(*s, unauthorized());
    s->send(200, "text/plain; version=0.0.4", metrics.render(opts.served_model_name));
  }, http::Lane::Inline);
}

OpenAiServer::OpenAiServer(ModelBundle& bundle, Scheduler& scheduler, ServingMetrics& metrics, ServerOptions opts)
    : impl_(std::make_unique<Impl>(bundle, scheduler, metrics, std::move(opts))) {}

OpenAiServer::~OpenAiServer() { shutdown(); }

int OpenAiServer::bind() {
  const int port = impl_->transport.bind(impl_->opts.host, impl_->opts.port);
  spdlog::info("serving {} on http://{}:{}", impl_->opts.served_model_name, impl_->opts.host, port);
  return port;
}

void OpenAiServer::run() { impl_->transport.run(); }

void OpenAiServer::shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    Impl& s = *impl_;
    using clock = std::chrono::steady_clock;
    auto wait_until = [](const std::function<bool()>& done, double seconds) {
      const auto end = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
      while (!done() && clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return done();
    };
    s.draining = true;
    s.transport.stop_accepting();
    if (s.active_calls > 0) spdlog::info("shutting down: waiting up to {} s for {} running requests", s.opts.drain_timeout_s, int(s.active_calls));
    if (!wait_until([&] { return s.active_calls == 0; }, s.opts.drain_timeout_s))
      spdlog::info("shutting down: aborting {} requests", int(s.active_calls));
    s.scheduler.shutdown();  // what is left ends with finish_reason "abort"
    // Let the connection thread write those last chunks and [DONE] before it stops.
    wait_until([&] { return s.active_calls == 0 && s.transport.busy_connections() == 0; }, 5.0);
    s.transport.stop();
  });
}

}  // namespace eaglet
