#include "kv/kv_cache.h"

#include <fmt/format.h>

namespace lingbot::kv {

namespace {
// Keeps every slot and row index within int32 and every product within int64.
constexpr int kMaxTokensPerFrame = 1 << 24;
constexpr int kMaxRowFloats = 1 << 20;

std::string bytes_str(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}
}  // namespace

void validate(const CacheConfig& c) {
  LB_CHECK(c.sliding_window >= 1, "kv cache config: sliding_window must be >= 1, got {}", c.sliding_window);
  LB_CHECK(c.scale_frames >= 0, "kv cache config: scale_frames must be >= 0, got {}", c.scale_frames);
  LB_CHECK(c.pool_growth_pages >= 1, "kv cache config: pool_growth_pages must be >= 1, got {}",
           c.pool_growth_pages);
  LB_CHECK(c.sliding_window <= (1 << 24) && c.scale_frames <= (1 << 24),
           "kv cache config: sliding_window {} / scale_frames {} too large", c.sliding_window, c.scale_frames);
}

void validate(const TokenLayout& l) {
  LB_CHECK(l.num_special >= 0 && l.num_patches >= 0,
           "kv token layout: num_special ({}) and num_patches ({}) must be >= 0", l.num_special, l.num_patches);
  LB_CHECK(l.tokens_per_frame() >= 1 && l.tokens_per_frame() <= kMaxTokensPerFrame,
           "kv token layout: tokens per frame must be in [1, {}], got {}", kMaxTokensPerFrame,
           l.tokens_per_frame());
  LB_CHECK(l.num_heads >= 1 && l.head_dim >= 1 && l.row_floats() <= kMaxRowFloats,
           "kv token layout: bad num_heads {} / head_dim {}", l.num_heads, l.head_dim);
}

std::string_view kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::Auto: return "auto";
    case KvDtype::Bf16: return "bf16";
    case KvDtype::Fp8: return "fp8";
  }
  return "?";
}

KvDtype parse_kv_dtype(std::string_view name) {
  for (KvDtype d : {KvDtype::Auto, KvDtype::Bf16, KvDtype::Fp8})
    if (kv_dtype_name(d) == name) return d;
  fail("kv cache: unknown kv_dtype '{}' (auto, bf16 or fp8)", name);
}

std::string_view layout_name(Layout layout) { return layout == Layout::Dense ? "dense" : "paged"; }

std::string format_stats(const CacheStats& s) {
  std::string line = fmt::format(
      "kv[{} x{}] frames seen {} stored {} listed {} (scale {} + window {}) evicted {} | "
      "retained specials {} | visible tokens {}",
      layout_name(s.layout), s.num_blocks, s.frames_seen, s.frames_stored, s.frames_listed, s.scale_frames,
      s.window_frames, s.frames_evicted, s.special_tokens_retained, s.visible_tokens);
  if (s.layout == Layout::Paged) {
    line += fmt::format(" | pages of {}: {} used ({} frame + {} special, {} stream tokens) + {} free = {}",
                        s.page_size, s.pages_in_use, s.frame_pages, s.special_pages, s.special_stream_tokens,
                        s.pages_free, s.pages_pool);
  }
  line += fmt::format(" | {} {} in use, {} reserved", s.storage, bytes_str(s.bytes_in_use), bytes_str(s.bytes_reserved));
  return line;
}

}  // namespace lingbot::kv
