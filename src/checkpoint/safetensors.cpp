#include "checkpoint/safetensors.h"

#include "core/error.h"
#include "checkpoint/byte_order.h"
#include "core/printable.h"
#include "checkpoint/storage_view.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_set>

namespace lingbot::io {

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's order

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit
constexpr int kMaxJsonDepth = 8;                   // a valid header nests 3 deep

std::optional<DType> parse_dtype(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, DType>, 10> kTable{{
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"F64", DType::F64},
      {"I64", DType::I64}, {"I32", DType::I32}, {"I16", DType::I16},   {"I8", DType::I8},
      {"U8", DType::U8},   {"BOOL", DType::Bool},
  }};
  for (const auto& [n, t] : kTable)
    if (n == s) return t;
  return std::nullopt;
}

struct TensorRecord {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<TensorRecord> tensors;
  std::map<std::string, std::string> metadata;
  std::span<const uint8_t> buffer;
};

// Nesting depth of the JSON text, counted outside strings. The parser's own
// recursion is then bounded before it runs.
int json_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

uint64_t as_u64(const Json& j, const std::string& name, const std::string& what, const char* field) {
  if (!j.is_number_unsigned())
    fail("{}: tensor '{}': {} must hold non-negative integers, found {}", name, what, field,
         printable(j.dump()));
  return j.get<uint64_t>();
}

Header parse_header(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 8)
    fail("{}: truncated safetensors file ({} bytes, the header length alone needs 8)", name,
         bytes.size());
  const uint64_t n = load_le64(bytes.data());
  if (n > kMaxHeaderBytes)
    fail("{}: safetensors header length {} is absurd (limit {} bytes): corrupt file", name, n,
         kMaxHeaderBytes);
  if (!fits(8, n, bytes.size()))
    fail("{}: safetensors header of {} bytes runs past the end of the file ({} bytes): truncated",
         name, n, bytes.size());
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), n);
  if (text.empty() || text.front() != '{')
    fail("{}: safetensors header does not start with '{{'", name);
  if (json_depth(text) > kMaxJsonDepth)
    fail("{}: safetensors header nests deeper than {} levels: corrupt file", name, kMaxJsonDepth);

  // Parse, refusing duplicate top-level names (the DOM would keep only one).
  std::unordered_set<std::string> seen;
  std::string duplicate;
  const Json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event,
                                               Json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  Json header;
  try {
    header = Json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: safetensors header is not valid JSON: {}", name, printable(e.what(), 160));
  }
  if (!duplicate.empty())
    fail("{}: tensor '{}' appears twice in the safetensors header", name, printable(duplicate));
  if (!header.is_object()) fail("{}: safetensors header is not a JSON object", name);

  Header out;
  out.buffer = bytes.subspan(8 + n);
  for (const auto& [key, value] : header.items()) {
    const std::string what = printable(key);
    if (key == "__metadata__") {
      if (!value.is_object()) fail("{}: safetensors __metadata__ is not an object", name);
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          fail("{}: safetensors __metadata__ '{}' is not a string", name, printable(mk));
        out.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    if (!value.is_object()) fail("{}: tensor '{}': header entry is not an object", name, what);
    for (const auto& [field, unused] : value.items())
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        fail("{}: tensor '{}': unexpected field '{}'", name, what, printable(field));
    if (!value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
      fail("{}: tensor '{}': needs dtype, shape and data_offsets", name, what);
    const Json& dtype = value.at("dtype");
    const Json& shape = value.at("shape");
    const Json& offsets = value.at("data_offsets");

    TensorRecord r;
    r.name = key;
    if (!dtype.is_string()) fail("{}: tensor '{}': dtype is not a string", name, what);
    const std::optional<DType> t = parse_dtype(dtype.get<std::string>());
    if (!t)
      fail("{}: tensor '{}': dtype '{}' is not supported (F32, F16, BF16, F64, I64, I32, I16, I8, "
           "U8, BOOL)",
           name, what, printable(dtype.get<std::string>()));
    r.dtype = *t;
    if (!shape.is_array()) fail("{}: tensor '{}': shape is not an array", name, what);
    if (shape.size() > 64) fail("{}: tensor '{}': shape has {} dimensions", name, what, shape.size());
    uint64_t numel = 1;
    for (const Json& d : shape) {
      const uint64_t dim = as_u64(d, name, what, "shape");
      if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dim, &numel))
        fail("{}: tensor '{}': shape is too large", name, what);
      r.shape.push_back(static_cast<int64_t>(dim));
    }
    if (!offsets.is_array() || offsets.size() != 2)
      fail("{}: tensor '{}': data_offsets must be [begin, end]", name, what);
    r.begin = as_u64(offsets[0], name, what, "data_offsets");
    r.end = as_u64(offsets[1], name, what, "data_offsets");
    if (r.begin > r.end)
      fail("{}: tensor '{}': data_offsets [{}, {}] end before they begin", name, what, r.begin,
           r.end);
    if (r.end > out.buffer.size())
      fail("{}: tensor '{}': data_offsets [{}, {}] run past the data buffer ({} bytes): truncated?",
           name, what, r.begin, r.end, out.buffer.size());
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, uint64_t{dtype_size(r.dtype)}, &nbytes) ||
        nbytes != r.end - r.begin)
      fail("{}: tensor '{}': {} {} needs {} bytes, data_offsets [{}, {}] give {}", name, what,
           dtype_name(r.dtype), shape_str(r.shape), nbytes, r.begin, r.end, r.end - r.begin);
    out.tensors.push_back(std::move(r));
  }

  // The tensors must tile the buffer exactly: sorted by offset, each begins
  // where the previous ended, and the last ends at the end of the file.
  std::vector<const TensorRecord*> sorted;
  for (const TensorRecord& r : out.tensors) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(), [](const TensorRecord* a, const TensorRecord* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  for (const TensorRecord* r : sorted) {
    if (r->begin < cursor)
      fail("{}: tensor '{}' (bytes {}..{}) overlaps another tensor", name, printable(r->name),
           r->begin, r->end);
    if (r->begin > cursor)
      fail("{}: tensor '{}' starts at byte {} of the data buffer, leaving a gap after byte {}",
           name, printable(r->name), r->begin, cursor);
    cursor = r->end;
  }
  if (cursor != out.buffer.size())
    fail("{}: the tensors cover {} bytes but the data buffer has {}: trailing bytes or a "
         "corrupt header",
         name, cursor, out.buffer.size());
  return out;
}

}  // namespace

StateDict read_safetensors(std::span<const uint8_t> bytes, const std::string& display_name,
                           std::shared_ptr<void> owner) {
  const Header header = parse_header(bytes, display_name);
  StateDict out(display_name, "safetensors");
  // Copies happen only for misaligned tensors; each is bounded by the file.
  uint64_t copy_budget = std::max<uint64_t>(bytes.size(), uint64_t{64} << 20);
  for (const TensorRecord& r : header.tensors) {
    StridedLayout layout;
    layout.shape = r.shape;
    layout.strides = contiguous_strides(r.shape);
    const std::string what = fmt::format("{}: tensor '{}'", display_name, printable(r.name));
    out.insert(r.name, tensor_from_storage(header.buffer.subspan(r.begin, r.end - r.begin), owner,
                                           r.dtype, layout, what, copy_budget));
  }
  out.keep_alive(std::move(owner));
  return out;
}

std::map<std::string, std::string> read_safetensors_metadata(std::span<const uint8_t> bytes,
                                                             const std::string& display_name) {
  return parse_header(bytes, display_name).metadata;
}

bool looks_like_safetensors(std::span<const uint8_t> bytes) {
  return bytes.size() >= 9 && bytes[8] == '{';
}

}  // namespace lingbot::io
