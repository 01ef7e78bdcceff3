#include "io/hf_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace eaglet {

namespace fs = std::filesystem;

namespace {
std::string hub_cache() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h && *h) return std::string(h) + "/hub";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/huggingface/hub";
}

// An id is "org/name": one slash, no path syntax.
bool looks_like_id(const std::string& s) {
  const size_t slash = s.find('/');
  return slash != std::string::npos && slash > 0 && s.find('/', slash + 1) == std::string::npos && s[0] != '.' &&
         slash + 1 < s.size();
}
}  // namespace

std::string resolve_model_path(const std::string& arg) {
  if (arg.empty() || fs::exists(arg)) return arg;
  std::string id = arg, revision = "main";
  if (const size_t at = arg.find('@'); at != std::string::npos) id = arg.substr(0, at), revision = arg.substr(at + 1);
  if (!looks_like_id(id)) fail("{}: no such file or directory", arg);
  const fs::path repo = fs::path(hub_cache()) / ("models--" + id.substr(0, id.find('/')) + "--" + id.substr(id.find('/') + 1));
  if (!fs::is_directory(repo))
    fail("{}: not a local path, and not in the Hugging Face cache ({} does not exist; eaglet never downloads: fetch it "
         "with `huggingface-cli download {}` or pass a directory)", arg, repo.string(), id);
  std::string commit = revision;  // a revision may be a commit hash already
  if (std::ifstream ref(repo / "refs" / revision); ref) std::getline(ref, commit);
  const fs::path snapshot = repo / "snapshots" / commit;
  if (commit.empty() || !fs::is_directory(snapshot))
    fail("{}: {} has no snapshot for revision '{}' (refs/{} -> '{}')", arg, repo.string(), revision, revision, commit);
  return snapshot.string();
}

}  // namespace eaglet
