#include "spec/eagle3_drafter.h"

#include "core/error.h"
#include "engine/sampler.h"

namespace eaglet {

Eagle3Drafter::Eagle3Drafter(const Eagle3Draft& draft, int64_t num_blocks)
    : draft_(draft), cache_(draft.kv_shape(num_blocks)) {}

SeqId Eagle3Drafter::add() {
  const SeqId s = cache_.create();
  states_[s] = State{};
  return s;
}

void Eagle3Drafter::remove(SeqId seq) {
  cache_.free(seq);
  states_.erase(seq);
}

void Eagle3Drafter::extend(const std::vector<Extend>& rows) {
  if (rows.empty()) return;
  const int64_t H = draft_.config().hidden, A = 3 * int64_t(draft_.config().target_hidden);
  std::vector<Eagle3Rows> chunks;
  std::vector<float> aux;
  for (auto& r : rows) {
    State& st = states_.at(r.seq);
    cache_.truncate(r.seq, st.exact_len);  // drop the speculative tail of the last draft
    chunks.push_back(Eagle3Rows{r.seq, r.tokens});
    aux.insert(aux.end(), r.aux, r.aux + int64_t(r.tokens.size()) * A);
  }
  const int64_t n = int64_t(aux.size() / size_t(A));
  std::vector<float> g(size_t(n * H)), out(size_t(n * H)), logits;
  draft_.fuse_aux(aux.data(), n, g.data());
  draft_.forward(cache_, chunks, g.data(), out.data(), &logits);
  const int Vd = draft_.config().draft_vocab;
  int64_t row = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    State& st = states_.at(rows[i].seq);
    row += int64_t(rows[i].tokens.size());
    st.exact_len += int64_t(rows[i].tokens.size());
    st.last.assign(out.begin() + (row - 1) * H, out.begin() + row * H);
    st.next = draft_.to_target_id(argmax(logits.data() + i * size_t(Vd), Vd));
  }
}

std::vector<std::vector<int>> Eagle3Drafter::draft(const std::vector<SeqId>& seqs, const std::vector<int>& ks) {
  const int64_t H = draft_.config().hidden;
  const int Vd = draft_.config().draft_vocab;
  std::vector<std::vector<int>> out(seqs.size());
  std::vector<std::vector<float>> g(seqs.size());
  int max_k = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (ks[i] <= 0) continue;
    const State& st = states_.at(seqs[i]);
    out[i].push_back(st.next);
    g[i] = st.last;
    max_k = std::max(max_k, ks[i]);
  }
  for (int step = 1; step < max_k; ++step) {
    std::vector<Eagle3Rows> chunks;
    std::vector<size_t> who;
    std::vector<float> gin;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (int(out[i].size()) >= ks[i]) continue;
      chunks.push_back(Eagle3Rows{seqs[i], {out[i].back()}});
      who.push_back(i);
      gin.insert(gin.end(), g[i].begin(), g[i].end());
    }
    if (chunks.empty()) break;
    std::vector<float> next(gin.size()), logits;
    draft_.forward(cache_, chunks, gin.data(), next.data(), &logits);
    for (size_t j = 0; j < who.size(); ++j) {
      const size_t i = who[j];
      out[i].push_back(draft_.to_target_id(argmax(logits.data() + j * size_t(Vd), Vd)));
      g[i].assign(next.begin() + int64_t(j) * H, next.begin() + int64_t(j + 1) * H);
    }
  }
  return out;
}

}  // namespace eaglet
