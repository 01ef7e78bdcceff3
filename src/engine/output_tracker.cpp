#include "engine/output_tracker.h"

#include <algorithm>

namespace eaglet {

OutputTracker::OutputTracker(const Tokenizer& tok, StopConditions stop, bool after_text)
    : stop_(std::move(stop)), decoder_(tok, true, after_text) {}

void OutputTracker::finish(const std::string& reason) {
  if (finish_reason_.empty()) finish_reason_ = reason;
}

bool OutputTracker::stop() {
  text_ += held_ + decoder_.flush();
  held_.clear();
  finish("stop");
  return false;
}

bool OutputTracker::append(int token) {
  if (finished()) return false;
  tokens_.push_back(token);
  const bool is_stop_token = !stop_.ignore_eos &&
                             std::find(stop_.stop_tokens.begin(), stop_.stop_tokens.end(), token) != stop_.stop_tokens.end();
  if (is_stop_token) {
    text_ += held_ + decoder_.flush();
    held_.clear();
    finish("stop");
    return false;
  }
  held_ += decoder_.push(token);
  // A stop string ends the text right before it. Earlier text held no stop string, so only
  // matches reaching into the new text need looking for.
  size_t cut = std::string::npos;
  const std::string all = text_ + held_;
  for (auto& s : stop_.stop_strings) {
    if (s.empty()) continue;
    const size_t from = text_.size() >= s.size() ? text_.size() - s.size() + 1 : 0;
    cut = std::min(cut, all.find(s, from));
  }
  if (cut != std::string::npos) {
    text_ = all.substr(0, cut);
    held_.clear();
    finish("stop");
    return false;
  }
  // Hold back the longest suffix that is a prefix of some stop string.
  size_t hold = 0;
  for (auto& s : stop_.stop_strings)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > hold; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) { hold = n; break; }
  text_ += held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  if (int(tokens_.size()) >= stop_.max_tokens) {
    text_ += held_ + decoder_.flush();
    held_.clear();
    finish("length");
    return false;
  }
  return true;
}

std::string OutputTracker::take_new_text() {
  std::string out = text_.substr(std::min(emitted_, text_.size()));
  emitted_ = text_.size();
  return out;
}

}  // namespace eaglet
