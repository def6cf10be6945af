// Helpers for the kv tests: an independent model of upstream's dictionary
// cache, token-identity encoding, and iteration counts that shrink under
// sanitizers.
#pragma once

#include "core/tensor.h"
#include "kv/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace lingbot::kv::test {

// Sanitizer builds run fewer random cases; LINGBOT_KV_TEST_SCALE (a float)
// scales every count, e.g. 10 for a soak run.
inline bool under_sanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

inline int iterations(int release_count, int sanitizer_divisor = 8) {
  double n = under_sanitizer() ? static_cast<double>(release_count) / sanitizer_divisor : release_count;
  if (const char* s = std::getenv("LINGBOT_KV_TEST_SCALE")) n *= std::atof(s);
  return std::max(1, static_cast<int>(n));
}

// A token's identity: which frame (a serial counting every frame that passed
// through, stored or not) and which token of that frame.
struct TokenId {
  int64_t frame;
  int token;
  auto operator<=>(const TokenId&) const = default;
};
using TokenSet = std::vector<TokenId>;  // sorted multiset

inline std::string describe(const TokenSet& s) {
  std::string out = "{";
  for (const TokenId& t : s) out += fmt::format("({},{})", t.frame, t.token);
  return out + "}";
}

// Upstream's SDPA dictionary cache, transcribed from
// SDPAAttention._apply_kv_cache_eviction with Python slicing, on token ids.
// Written without looking at WindowPolicy: an independent model.
class DictModel {
 public:
  DictModel(const CacheConfig& c, const TokenLayout& l) : c_(c), l_(l) {}

  void store(const std::vector<int64_t>& serials) {
    for (int64_t s : serials) frames_.push_back(s);
    const int64_t n = static_cast<int64_t>(frames_.size());
    if (l_.tokens_per_frame() <= 1) return;  // upstream: `if shape[3] > 1`
    const int64_t W = c_.sliding_window, S = c_.scale_frames;
    if (n <= W + S) return;
    const int64_t evict_start = S, evict_end = n - W;
    if (evict_end <= evict_start) return;
    if (c_.cross_frame_special) {
      const int keep = c_.camera_only ? std::min(1, l_.num_special) : l_.num_special;
      for (int64_t i = evict_start; i < evict_end; ++i)
        for (int t = 0; t < keep; ++t) specials_.push_back({frames_[static_cast<size_t>(i)], t});
    }
    std::vector<int64_t> kept;
    if (c_.include_scale_frames) kept.assign(frames_.begin(), frames_.begin() + S);  // [:S]
    kept.insert(kept.end(), frames_.end() - W, frames_.end());                        // [-W:]
    frames_ = std::move(kept);
  }

  TokenSet visible(const std::vector<int64_t>& own_frames = {}) const {
    TokenSet out = specials_;
    auto add = [&](int64_t f) {
      for (int t = 0; t < l_.tokens_per_frame(); ++t) out.push_back({f, t});
    };
    for (int64_t f : frames_) add(f);
    for (int64_t f : own_frames) add(f);
    std::sort(out.begin(), out.end());
    return out;
  }

  void reset() {
    frames_.clear();
    specials_.clear();
  }
  const std::vector<int64_t>& frames() const { return frames_; }
  int64_t retained_tokens() const { return static_cast<int64_t>(specials_.size()); }

 private:
  CacheConfig c_;
  TokenLayout l_;
  std::vector<int64_t> frames_;
  TokenSet specials_;
};

// K/V rows that encode their own identity, so the visible multiset can be
// read back from what a cache hands to attention. Every element is a
// function of (block, frame serial, token, head, dim, k-or-v); the first two
// elements of a K row are the frame serial and the token index (exact in
// float up to 2^24).
inline float encoded_value(int block, int64_t frame, int token, int head, int dim, bool is_v) {
  if (!is_v && head == 0 && dim == 0) return static_cast<float>(frame);
  if (!is_v && head == 0 && dim == 1) return static_cast<float>(token);
  return static_cast<float>(((block * 7 + frame * 3 + token) % 1000) * 16 + head * 4 + dim) +
         (is_v ? 0.25f : 0.5f);
}

// [frames.size() * tokens_per_frame, H, D] for K (is_v false) or V.
inline Tensor encoded_rows(const TokenLayout& l, int block, const std::vector<int64_t>& frames, bool is_v) {
  const int tpf = l.tokens_per_frame();
  Tensor t = Tensor::empty({static_cast<int64_t>(frames.size()) * tpf, l.num_heads, l.head_dim});
  float* p = t.f32();
  for (size_t f = 0; f < frames.size(); ++f)
    for (int tok = 0; tok < tpf; ++tok)
      for (int h = 0; h < l.num_heads; ++h)
        for (int d = 0; d < l.head_dim; ++d) *p++ = encoded_value(block, frames[f], tok, h, d, is_v);
  return t;
}

// Decodes gathered K/V rows; sets `error` if any element is not the value its
// identity implies (a torn or misplaced row). Needs head_dim >= 2.
inline TokenSet decode_rows(const TokenLayout& l, int block, const std::pair<Tensor, Tensor>& kv,
                            std::string* error) {
  TokenSet out;
  const Tensor& k = kv.first;
  const Tensor& v = kv.second;
  const int64_t n = k.dim(0);
  const int64_t row = l.row_floats();
  for (int64_t r = 0; r < n; ++r) {
    const float* kr = k.f32() + r * row;
    const float* vr = v.f32() + r * row;
    const TokenId id{static_cast<int64_t>(kr[0]), static_cast<int>(kr[1])};
    for (int h = 0; h < l.num_heads; ++h)
      for (int d = 0; d < l.head_dim; ++d) {
        const int64_t i = int64_t{h} * l.head_dim + d;
        if (kr[i] != encoded_value(block, id.frame, id.token, h, d, false) ||
            vr[i] != encoded_value(block, id.frame, id.token, h, d, true)) {
          if (error && error->empty()) {
            *error = "row " + std::to_string(r) + " (frame " + std::to_string(id.frame) + ", token " +
                     std::to_string(id.token) + ") has a wrong value at head " + std::to_string(h) + " dim " +
                     std::to_string(d);
          }
        }
      }
    out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string describe(const CacheConfig& c, const TokenLayout& l, int blocks) {
  return "W=" + std::to_string(c.sliding_window) + " S=" + std::to_string(c.scale_frames) +
         " cross=" + std::to_string(c.cross_frame_special) + " scale=" + std::to_string(c.include_scale_frames) +
         " camera_only=" + std::to_string(c.camera_only) + " growth=" + std::to_string(c.pool_growth_pages) +
         " specials=" + std::to_string(l.num_special) + " patches=" + std::to_string(l.num_patches) +
         " H=" + std::to_string(l.num_heads) + " D=" + std::to_string(l.head_dim) +
         " blocks=" + std::to_string(blocks);
}

// A random configuration for property tests. One in eight has 1-token frames
// (the camera head's never-evicting caches).
inline std::pair<CacheConfig, TokenLayout> random_config(std::mt19937& rng, int head_dim) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  CacheConfig c;
  c.sliding_window = pick(1, 5);
  c.scale_frames = pick(0, 4);
  c.cross_frame_special = pick(0, 3) != 0;
  c.include_scale_frames = pick(0, 2) != 0;
  c.camera_only = pick(0, 2) == 0;
  c.pool_growth_pages = pick(1, 4);
  TokenLayout l;
  const int specials[] = {0, 1, 2, 3, 6};
  l.num_special = specials[pick(0, 4)];
  l.num_patches = pick(0, 5);
  if (l.tokens_per_frame() == 0 || pick(0, 7) == 0) {
    l.num_special = pick(0, 1);
    l.num_patches = 1 - l.num_special;
  }
  l.num_heads = pick(1, 2);
  l.head_dim = head_dim;
  return {c, l};
}

}  // namespace lingbot::kv::test
