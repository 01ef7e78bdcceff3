#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <random>

#include "server/openai_protocol.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
// Events from the n sequences of one API request, drained by the HTTP thread.
struct Channel {
  struct Event {
    int index;
    std::string text;
    std::vector<TokenLogprob> tokens;
    std::string finish;
    int completion_tokens = 0;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Event> events;
  std::atomic<int> finished{0};
  void push(Event e) {
    std::lock_guard<std::mutex> lk(mu);
    if (!e.finish.empty()) ++finished;
    events.push_back(std::move(e));
    cv.notify_all();
  }
  bool pop(Event* e, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, wait, [&] { return !events.empty(); })) return false;
    *e = std::move(events.front());
    events.pop_front();
    return true;
  }
};

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return fmt::format("{}-{:016x}{:04x}", prefix, salt ^ uint64_t(std::time(nullptr)), counter++ & 0xffff);
}

std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
}  // namespace

struct OpenAiServer::Impl {
  ModelBundle& bundle;
  Scheduler& scheduler;
  ServingMetrics& metrics;
  ServerOptions opts;
  std::unique_ptr<ChatTemplate> chat_template;
  httplib::Server http;
  std::atomic<bool> stopping{false};

  Impl(ModelBundle& b, Scheduler& s, ServingMetrics& m, ServerOptions o)
      : bundle(b), scheduler(s), metrics(m), opts(std::move(o)) {
    chat_template = ChatTemplate::from_tokenizer_config(bundle.tokenizer.config());
  }

  void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(to_text(error_body(e)), "application/json");
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (opts.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + opts.api_key) return true;
    send_error(res, ApiError{401, "Incorrect or missing API key", "authentication_error", ""});
    return false;
  }

  std::vector<int> tokenize(const ApiRequest& r) {
    const int V = bundle.model->config().vocab;
    std::vector<int> ids;
    if (r.chat) {
      if (!chat_template)
        throw ApiError{400, "this model's tokenizer_config.json has no chat_template; use /v1/completions", "invalid_request_error", "messages"};
      std::string text;
      try {
        text = chat_template->render(r.messages, true, bundle.tokenizer);
      } catch (const std::exception& e) {
        throw ApiError{400, std::string("chat template failed: ") + e.what(), "invalid_request_error", "messages"};
      }
      ids = bundle.tokenizer.encode(text, 0, true);
    } else if (!r.prompt_ids.empty()) {
      ids = r.prompt_ids;
      for (int t : ids)
        if (t < 0 || t >= V) throw ApiError{400, fmt::format("token id {} is outside the vocabulary [0, {})", t, V), "invalid_request_error", "prompt"};
    } else {
      ids = bundle.tokenizer.encode(r.prompt_text);
    }
    if (ids.empty()) throw ApiError{400, "the prompt is empty", "invalid_request_error", r.chat ? "messages" : "prompt"};
    return ids;
  }

  std::vector<std::string> token_texts(const std::vector<TokenLogprob>& toks) {
    std::vector<std::string> out;
    for (auto& t : toks) out.push_back(bundle.tokenizer.token_bytes(t.token));
    return out;
  }

  ChoiceDelta delta_of(const Channel::Event& e) {
    ChoiceDelta d;
    d.index = e.index;
    d.text = e.text;
    d.finish_reason = e.finish == "abort" ? "abort" : e.finish;
    for (auto& t : e.tokens) {
      d.tokens.push_back(t.token);
      d.logprobs.push_back(t.logprob);
      std::vector<std::pair<std::string, float>> top;
      for (auto& [id, lp] : t.top) top.emplace_back(bundle.tokenizer.token_bytes(id), lp);
      d.top.push_back(top);
    }
    return d;
  }

  void handle(const httplib::Request& hreq, httplib::Response& res, bool chat) {
    if (!authorized(hreq, res)) return;
    try {
      json body;
      try {
        body = json::parse(hreq.body);
      } catch (const json::exception& e) {
        throw ApiError{400, std::string("invalid JSON body: ") + e.what(), "invalid_request_error", ""};
      }
      ApiRequest r = parse_request(body, chat);
      if (!r.model.empty() && r.model != opts.served_model_name)
        throw ApiError{404, fmt::format("The model `{}` does not exist.", r.model), "NotFoundError", "model"};
      std::vector<int> prompt = tokenize(r);
      const int max_len = scheduler.options().max_model_len;
      const int P = int(prompt.size());
      if (P >= max_len)
        throw ApiError{400, fmt::format("This model's maximum context length is {} tokens. However, your request has {} input tokens.", max_len, P),
                       "invalid_request_error", chat ? "messages" : "prompt"};
      int max_tokens = r.max_tokens < 0 ? max_len - P : r.max_tokens;
      if (P + max_tokens > max_len)
        throw ApiError{400, fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                        "({} in the input, {} in the completion).", max_len, P + max_tokens, P, max_tokens),
                       "invalid_request_error", chat ? "max_completion_tokens" : "max_tokens"};
      run(r, prompt, max_tokens, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError{500, e.what(), "server_error", ""});
    }
  }

  void run(const ApiRequest& r, const std::vector<int>& prompt, int max_tokens, httplib::Response& res) {
    auto channel = std::make_shared<Channel>();
    std::vector<std::shared_ptr<Request>> reqs;
    const uint64_t base_seed = r.seed_given ? r.sampling.seed : std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
    for (int i = 0; i < r.n; ++i) {
      auto q = std::make_shared<Request>();
      q->prompt = prompt;
      q->sampling = r.sampling;
      q->sampling.seed = base_seed + uint64_t(i);
      q->stop.max_tokens = max_tokens;
      q->stop.stop_tokens = bundle.eos_ids;
      q->stop.stop_strings = r.stop;
      q->stop.ignore_eos = r.ignore_eos;
      q->top_logprobs = r.logprobs;
      q->on_output = [channel, i](const std::string& text, const std::vector<TokenLogprob>& toks) {
        channel->push({i, text, toks, "", 0});
      };
      q->on_finish = [channel, i](const std::string& reason, int n) { channel->push({i, "", {}, reason, n}); };
      reqs.push_back(q);
    }
    for (auto& q : reqs)
      if (!scheduler.submit(q)) {
        for (auto& other : reqs) other->cancelled = true;
        throw ApiError{503, "the server is at capacity (waiting queue full); retry later", "server_error", ""};
      }
    const std::string id = random_id(r.chat ? "chatcmpl" : "cmpl");
    const int64_t created = int64_t(std::time(nullptr));
    const int P = int(prompt.size());
    if (!r.stream) {
      std::vector<std::string> texts(size_t(r.n)), finish(size_t(r.n));
      std::vector<ChoiceDelta> all(size_t(r.n));
      int completion = 0;
      Channel::Event e;
      while (channel->finished < r.n || !channel->events.empty()) {
        if (!channel->pop(&e, std::chrono::milliseconds(200))) continue;
        auto& acc = all[size_t(e.index)];
        ChoiceDelta d = delta_of(e);
        acc.text += d.text;
        acc.tokens.insert(acc.tokens.end(), d.tokens.begin(), d.tokens.end());
        acc.logprobs.insert(acc.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
        acc.top.insert(acc.top.end(), d.top.begin(), d.top.end());
        if (!e.finish.empty()) {
          acc.finish_reason = d.finish_reason;
          completion += e.completion_tokens;
        }
      }
      json choices = json::array();
      for (int i = 0; i < r.n; ++i) {
        auto& c = all[size_t(i)];
        std::vector<std::string> tt;
        for (int t : c.tokens) tt.push_back(bundle.tokenizer.token_bytes(t));
        json lp = r.logprobs < 0 ? json() : (r.chat ? chat_logprobs_json(c, tt) : completion_logprobs_json(c, tt, 0));
        if (r.chat)
          choices.push_back({{"index", i}, {"message", {{"role", "assistant"}, {"content", c.text}}}, {"logprobs", lp},
                             {"finish_reason", c.finish_reason}});
        else
          choices.push_back({{"index", i}, {"text", c.text}, {"logprobs", lp}, {"finish_reason", c.finish_reason}});
      }
      json out = {{"id", id}, {"object", r.chat ? "chat.completion" : "text_completion"}, {"created", created},
                  {"model", opts.served_model_name}, {"choices", choices}, {"usage", usage_json(P, completion)}};
      res.set_content(to_text(out), "application/json");
      return;
    }
    auto state = std::make_shared<std::vector<size_t>>(size_t(r.n), 0);  // text offsets per choice
    auto completion = std::make_shared<int>(0);
    auto sent_role = std::make_shared<bool>(false);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, r, reqs, channel, id, created, P, state, completion, sent_role](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string line = "data: " + to_text(j) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          auto cancel_all = [&] {
            for (auto& q : reqs) q->cancelled = true;
          };
          const std::string object = r.chat ? "chat.completion.chunk" : "text_completion";
          if (r.chat && !*sent_role) {
            *sent_role = true;
            json choices = json::array();
            for (int i = 0; i < r.n; ++i)
              choices.push_back({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                                 {"finish_reason", nullptr}});
            if (!send({{"id", id}, {"object", object}, {"created", created}, {"model", opts.served_model_name}, {"choices", choices}})) {
              cancel_all();
              return false;
            }
          }
          Channel::Event e;
          if (!channel->pop(&e, std::chrono::milliseconds(100))) {
            if (stopping) cancel_all();
            if (!sink.is_writable()) {
              cancel_all();
              return false;
            }
            return true;
          }
          ChoiceDelta d = delta_of(e);
          json lp;
          if (r.logprobs >= 0 && !d.tokens.empty()) {
            auto tt = token_texts(e.tokens);
            lp = r.chat ? chat_logprobs_json(d, tt) : completion_logprobs_json(d, tt, (*state)[size_t(e.index)]);
          }
          (*state)[size_t(e.index)] += d.text.size();
          json choice = {{"index", e.index}, {"logprobs", lp}, {"finish_reason", e.finish.empty() ? json() : json(d.finish_reason)}};
          if (r.chat) choice["delta"] = e.finish.empty() ? json{{"content", d.text}} : json::object();
          else choice["text"] = d.text;
          if (!e.finish.empty()) *completion += e.completion_tokens;
          json chunk = {{"id", id}, {"object", object}, {"created", created}, {"model", opts.served_model_name},
                        {"choices", json::array({choice})}};
          if (r.include_usage) chunk["usage"] = nullptr;
          if (!send(chunk)) {
            cancel_all();
            return false;
          }
          if (channel->finished == r.n && channel->events.empty()) {
            if (r.include_usage)
              send({{"id", id}, {"object", object}, {"created", created}, {"model", opts.served_model_name},
                    {"choices", json::array()}, {"usage", usage_json(P, *completion)}});
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
          }
          return true;
        },
        [reqs](bool success) {
          if (!success)
            for (auto& q : reqs) q->cancelled = true;  // client went away mid-stream
        });
  }

  void routes() {
    http.set_payload_max_length(opts.max_body_bytes);
    http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& s) { handle(q, s, false); });
    http.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& s) { handle(q, s, true); });
    http.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& s) {
      if (!authorized(q, s)) return;
      json m = {{"id", opts.served_model_name}, {"object", "model"}, {"created", int64_t(std::time(nullptr))},
                {"owned_by", "eaglet"}, {"root", bundle.model->config().dir}, {"max_model_len", scheduler.options().max_model_len}};
      s.set_content(to_text({{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& s) { s.status = 200; });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& s) {
      s.set_content(metrics.render(opts.served_model_name), "text/plain; version=0.0.4");
    });
    http.set_error_handler([this](const httplib::Request&, httplib::Response& s) {
      if (!s.body.empty()) return;
      const char* type = s.status == 404 ? "NotFoundError" : s.status == 413 ? "invalid_request_error" : "server_error";
      const std::string msg = s.status == 404 ? "route not found" : s.status == 413 ? "request body too large" : "error";
      send_error(s, ApiError{s.status, msg, type, ""});
    });
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& s, std::exception_ptr) {
      send_error(s, ApiError{500, "internal error", "server_error", ""});
    });
  }
};

OpenAiServer::OpenAiServer(ModelBundle& bundle, Scheduler& scheduler, ServingMetrics& metrics, ServerOptions opts)
    : impl_(std::make_unique<Impl>(bundle, scheduler, metrics, std::move(opts))) {
  impl_->routes();
}

OpenAiServer::~OpenAiServer() { stop(); }

bool OpenAiServer::listen() {
  if (impl_->opts.port == 0) {
    bound_port_ = impl_->http.bind_to_any_port(impl_->opts.host);
    if (bound_port_ <= 0) return false;
  } else {
    if (!impl_->http.bind_to_port(impl_->opts.host, impl_->opts.port)) return false;
    bound_port_ = impl_->opts.port;
  }
  spdlog::info("serving {} on http://{}:{}", impl_->opts.served_model_name, impl_->opts.host, bound_port_);
  return impl_->http.listen_after_bind();
}

void OpenAiServer::stop() {
  impl_->stopping = true;
  impl_->http.stop();
}

}  // namespace eaglet
