#include "checkpoint/torch_checkpoint.h"

#include "core/error.h"
#include "core/log.h"
#include "checkpoint/pickle.h"
#include "core/printable.h"
#include "checkpoint/storage_view.h"
#include "checkpoint/zip_archive.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace lingbot::io {

namespace {

using Kind = PickleValue::Kind;
using DictEntries = std::vector<std::pair<const PickleValue*, const PickleValue*>>;

// torch.<Name>Storage -> element type. (torch._utils maps these the other
// way when it pickles a TypedStorage.)
std::optional<DType> storage_dtype(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, DType>, 10> kTable{{
      {"FloatStorage", DType::F32},
      {"HalfStorage", DType::F16},
      {"BFloat16Storage", DType::BF16},
      {"DoubleStorage", DType::F64},
      {"LongStorage", DType::I64},
      {"IntStorage", DType::I32},
      {"ShortStorage", DType::I16},
      {"CharStorage", DType::I8},
      {"ByteStorage", DType::U8},
      {"BoolStorage", DType::Bool},
  }};
  for (const auto& [n, t] : kTable)
    if (n == name) return t;
  return std::nullopt;
}

// torch.<dtype> (how a torch.dtype pickles) -> element type.
std::optional<DType> torch_dtype(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, DType>, 16> kTable{{
      {"float32", DType::F32}, {"float", DType::F32},     {"float16", DType::F16},
      {"half", DType::F16},    {"bfloat16", DType::BF16}, {"float64", DType::F64},
      {"double", DType::F64},  {"int64", DType::I64},     {"long", DType::I64},
      {"int32", DType::I32},   {"int", DType::I32},       {"int16", DType::I16},
      {"short", DType::I16},   {"int8", DType::I8},       {"uint8", DType::U8},
      {"bool", DType::Bool},
  }};
  for (const auto& [n, t] : kTable)
    if (n == name) return t;
  return std::nullopt;
}

// A short description of a value for "x is not a tensor" style messages:
// "an int (3)", "a call to argparse.Namespace(...)".
std::string describe(const PickleValue& v) {
  if (v.is(Kind::Call)) return fmt::format("a call to {}", v.repr(80));
  const std::string_view kind = v.kind_name();
  const bool vowel = std::string_view("aeiou").find(kind.front()) != std::string_view::npos;
  return fmt::format("{} {} ({})", vowel ? "an" : "a", kind, v.repr(60));
}

// The (key, value) pairs of anything that behaves as a dict: a dict, an
// OrderedDict (pickled as a call of collections.OrderedDict followed by
// SETITEMS), or an object of a dict subclass that received items.
std::optional<DictEntries> dict_entries(const PickleValue& v) {
  if (v.is(Kind::Dict)) return v.entries();
  if (!v.is(Kind::Call)) return std::nullopt;
  const bool ordered_dict = v.is_call_to("collections", "OrderedDict");
  if (!ordered_dict && !v.is_call_to("builtins", "dict") && v.entries().empty()) return std::nullopt;
  DictEntries out;
  // OrderedDict([(k, v), ...]): items passed to the constructor.
  const PickleValue* args = v.args();
  if (args != nullptr && args->is(Kind::Tuple) && args->items().size() == 1 &&
      (args->items()[0]->is(Kind::List) || args->items()[0]->is(Kind::Tuple))) {
    for (const PickleValue* pair : args->items()[0]->items())
      if ((pair->is(Kind::Tuple) || pair->is(Kind::List)) && pair->items().size() == 2)
        out.emplace_back(pair->items()[0], pair->items()[1]);
  }
  out.insert(out.end(), v.entries().begin(), v.entries().end());
  return out;
}

// Is this a torch tensor record (anything torch pickles with a _rebuild_ function)?
bool is_tensor_record(const PickleValue& v) {
  if (!v.is(Kind::Call) || v.callable() == nullptr || !v.callable()->is(Kind::Global)) return false;
  const PickleValue& f = *v.callable();
  if (f.module() == "torch._utils" && f.name().starts_with("_rebuild_")) return true;
  if (f.module() == "torch._tensor" && f.name().starts_with("_rebuild_")) return true;
  return false;
}

const PickleValue* string_key(const DictEntries& entries, std::string_view key) {
  const PickleValue* found = nullptr;
  for (const auto& [k, v] : entries)
    if (k->is(Kind::String) && k->text() == key) found = v;  // the last assignment wins
  return found;
}

class TorchReader {
 public:
  TorchReader(std::span<const uint8_t> bytes, const std::string& name, std::shared_ptr<void> owner)
      : zip_(bytes, name), name_(name), owner_(std::move(owner)) {
    // Copies (strided views, deflated storages) are bounded by the file's
    // size: a hostile file cannot make us allocate much more than it is.
    copy_budget_ = std::max<uint64_t>(uint64_t{4} * bytes.size(), uint64_t{64} << 20);
  }

  StateDict run() {
    find_prefix();
    check_byteorder();
    const ZipEntry& pkl = zip_.at(prefix_ + "data.pkl");
    const std::vector<uint8_t> pickle_bytes = zip_.read(pkl);
    const PickleDocument doc =
        unpickle(pickle_bytes, fmt::format("{}: {}", name_, printable(pkl.name)));

    StateDict out(name_, "torch");
    std::string under;
    const DictEntries entries = find_state_dict(doc.root(), under);
    out.set_found_under(under);
    const std::string where = under.empty() ? "" : fmt::format("'{}' > ", under);
    for (const auto& [k, v] : entries) {
      if (!k->is(Kind::String)) {
        out.add_skipped(k->repr(60), fmt::format("key is {}, not a string", describe(*k)));
        continue;
      }
      const std::string& key = k->text();
      if (!is_tensor_record(*v)) {
        out.add_skipped(key, fmt::format("{} is not a tensor", describe(*v)));
        continue;
      }
      const std::string what = fmt::format("{}: tensor {}'{}'", name_, where, printable(key, 160));
      out.insert(key, rebuild(*v->callable(), v->args(), what, 0));
    }
    for (const SkippedEntry& s : out.skipped())
      log_debug("{}: skipped state dict entry '{}': {}", name_, s.key, s.reason);
    out.keep_alive(owner_);
    return out;
  }

 private:
  // The folder all members live in: the one holding data.pkl.
  void find_prefix() {
    std::vector<std::string> candidates;
    bool torchscript = false;
    for (const ZipEntry& e : zip_.entries()) {
      const std::string_view n = e.name;
      if (n == "data.pkl") candidates.emplace_back("");
      if (n.ends_with("/data.pkl")) {
        const std::string_view dir = n.substr(0, n.size() - std::strlen("data.pkl"));
        if (dir.find('/') == dir.size() - 1) candidates.emplace_back(dir);
      }
      if (n.ends_with("/constants.pkl") || n == "constants.pkl") torchscript = true;
    }
    if (torchscript)
      fail("{}: is a TorchScript archive (torch.jit.save), not a torch.save checkpoint; save the "
           "weights with torch.save(model.state_dict(), path)",
           name_);
    if (candidates.empty())
      fail("{}: zip archive without a data.pkl member: not a torch.save checkpoint", name_);
    if (candidates.size() > 1)
      fail("{}: zip archive holds {} data.pkl members ('{}data.pkl', '{}data.pkl', ...): not a "
           "torch.save checkpoint",
           name_, candidates.size(), printable(candidates[0]), printable(candidates[1]));
    prefix_ = candidates[0];
  }

  void check_byteorder() {
    const ZipEntry* e = zip_.find(prefix_ + "byteorder");
    if (e == nullptr) return;  // written since PyTorch 1.12; older files are little-endian
    const std::vector<uint8_t> b = zip_.read(*e, 64);
    const std::string order(b.begin(), b.end());
    if (order == "little") return;
    if (order == "big")
      fail("{}: was saved on a big-endian machine (byteorder 'big'), which is not supported; "
           "load and re-save it with torch on a little-endian machine",
           name_);
    fail("{}: unknown byte order '{}' in member '{}'", name_, printable(order, 16),
         printable(e->name));
  }

  // The state dict: the "model" or "state_dict" entry of the top-level dict,
  // or the top-level dict itself; the first of them that holds a tensor.
  DictEntries find_state_dict(const PickleValue& root, std::string& under) {
    const std::optional<DictEntries> top = dict_entries(root);
    if (!top)
      fail("{}: no state dict: the checkpoint holds {}, not a dict of tensors", name_,
           describe(root));
    auto has_tensor = [](const DictEntries& d) {
      return std::any_of(d.begin(), d.end(), [](const auto& kv) { return is_tensor_record(*kv.second); });
    };
    std::vector<std::string> notes;
    for (const char* key : {"model", "state_dict"}) {
      const PickleValue* v = string_key(*top, key);
      if (v == nullptr) continue;
      const std::optional<DictEntries> sub = dict_entries(*v);
      if (!sub) {
        notes.push_back(fmt::format("'{}' holds {}", key, describe(*v)));
      } else if (has_tensor(*sub)) {
        under = key;
        return *sub;
      } else {
        notes.push_back(fmt::format("'{}' holds no tensors", key));
      }
    }
    if (has_tensor(*top)) return *top;
    std::string keys;
    for (size_t i = 0; i < top->size() && i < 8; ++i) {
      if (i) keys += ", ";
      keys += (*top)[i].first->repr(40);
    }
    if (top->size() > 8) keys += ", ...";
    notes.push_back(top->empty() ? "the top-level dict is empty"
                                 : fmt::format("the top-level dict has no tensors (keys: {})", keys));
    fail("{}: no state dict: {}", name_, fmt::join(notes, "; "));
  }

  // A tensor from the function torch pickled it with and that function's arguments.
  Tensor rebuild(const PickleValue& func, const PickleValue* args, const std::string& what,
                 int depth) {
    if (depth > 4) fail("{}: tensor record nested too deeply", what);
    if (args == nullptr || !args->is(Kind::Tuple))
      fail("{}: {}.{} is called without an argument tuple", what, printable(func.module()),
           printable(func.name()));
    const auto& a = args->items();
    const std::string& fn = func.name();
    auto need = [&](size_t n) {
      if (a.size() < n)
        fail("{}: {} takes at least {} arguments, the pickle gives {}", what, fn, n, a.size());
    };
    if (func.module() == "torch._utils" &&
        (fn == "_rebuild_tensor_v2" || fn == "_rebuild_tensor" || fn == "_rebuild_tensor_v3")) {
      // (storage, storage_offset, size, stride, ...); v3 adds the dtype at [6].
      need(fn == "_rebuild_tensor_v3" ? 7 : 4);
      std::optional<DType> dtype;
      if (fn == "_rebuild_tensor_v3") {
        const PickleValue& d = *a[6];
        if (!d.is(Kind::Global) || d.module() != "torch" || !(dtype = torch_dtype(d.name())))
          fail("{}: unsupported tensor dtype {}", what, d.repr(40));
      }
      return from_storage(*a[0], *a[1], *a[2], *a[3], dtype, what);
    }
    if (func.module() == "torch._utils" &&
        (fn == "_rebuild_parameter" || fn == "_rebuild_parameter_with_state")) {
      need(1);  // (data, requires_grad, backward_hooks[, state]): data is the tensor
      return rebuild_value(*a[0], what, depth + 1);
    }
    if (func.module() == "torch._tensor" && fn == "_rebuild_from_type_v2") {
      need(3);  // (func, new_type, args, state): a tensor subclass; read it as a plain tensor
      if (!a[0]->is(Kind::Global)) fail("{}: _rebuild_from_type_v2 without a function", what);
      return rebuild(*a[0], a[2], what, depth + 1);
    }
    fail("{}: stored with {}.{} (a quantized, sparse or other special tensor), which this reader "
         "does not support",
         what, printable(func.module()), printable(fn));
  }

  Tensor rebuild_value(const PickleValue& v, const std::string& what, int depth) {
    if (!is_tensor_record(v)) fail("{}: expected a tensor, found {}", what, describe(v));
    return rebuild(*v.callable(), v.args(), what, depth);
  }

  static int64_t as_int(const PickleValue& v, const std::string& what, const char* field) {
    if (!v.is(Kind::Int)) fail("{}: {} is {}, expected an int", what, field, describe(v));
    return v.as_int();
  }

  static std::vector<int64_t> as_ints(const PickleValue& v, const std::string& what,
                                      const char* field) {
    if (!v.is(Kind::Tuple) && !v.is(Kind::List))
      fail("{}: {} is {}, expected a tuple of ints", what, field, describe(v));
    if (v.items().size() > 64) fail("{}: {} has {} dimensions", what, field, v.items().size());
    std::vector<int64_t> out;
    for (const PickleValue* x : v.items()) out.push_back(as_int(*x, what, field));
    return out;
  }

  Tensor from_storage(const PickleValue& storage_arg, const PickleValue& offset_arg,
                      const PickleValue& size_arg, const PickleValue& stride_arg,
                      std::optional<DType> tensor_dtype, const std::string& what) {
    // ('storage', torch.FloatStorage, key, location, numel)
    if (!storage_arg.is(Kind::PersistentId) || storage_arg.persistent_id() == nullptr)
      fail("{}: storage argument is {}, expected a storage reference", what, describe(storage_arg));
    const PickleValue& pid = *storage_arg.persistent_id();
    if (!pid.is(Kind::Tuple) || pid.items().size() < 5 || !pid.items()[0]->is(Kind::String) ||
        pid.items()[0]->text() != "storage")
      fail("{}: storage reference {} is not ('storage', type, key, location, numel)", what,
           pid.repr(80));
    const PickleValue& type = *pid.items()[1];
    const PickleValue& key = *pid.items()[2];
    const int64_t numel = as_int(*pid.items()[4], what, "storage numel");
    if (!key.is(Kind::String)) fail("{}: storage key is {}, expected a str", what, describe(key));
    if (numel < 0) fail("{}: storage numel {} is negative", what, numel);
    if (!type.is(Kind::Global) || (type.module() != "torch" && type.module() != "torch.cuda"))
      fail("{}: storage type {} is not a torch storage class", what, type.repr(60));

    // The storage's own element type (UntypedStorage counts bytes).
    DType storage_type = DType::U8;
    if (type.name() != "UntypedStorage") {
      const std::optional<DType> t = storage_dtype(type.name());
      if (!t) fail("{}: storage type torch.{} is not supported", what, printable(type.name()));
      storage_type = *t;
    } else if (!tensor_dtype) {
      fail("{}: an untyped storage without a dtype", what);
    }
    const DType dtype = tensor_dtype.value_or(storage_type);

    // The same storage used with two element types would reinterpret bytes;
    // torch.save refuses to write that, so such a file is corrupt.
    const auto [seen, fresh] = storage_dtypes_.emplace(key.text(), dtype);
    if (!fresh && seen->second != dtype)
      fail("{}: storage '{}' is used as both {} and {}", what, printable(key.text()),
           dtype_name(seen->second), dtype_name(dtype));

    const std::string member = prefix_ + "data/" + key.text();
    const ZipEntry* entry = zip_.find(member);
    if (entry == nullptr)
      fail("{}: storage member '{}' is missing from the archive", what, printable(member));
    uint64_t need_bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel), uint64_t{dtype_size(storage_type)},
                               &need_bytes))
      fail("{}: storage '{}' claims an impossible {} elements", what, printable(member), numel);
    if (entry->size < need_bytes)
      fail("{}: storage '{}' holds {} bytes, the pickle says {} {} elements ({} bytes)", what,
           printable(member), entry->size, numel, dtype_name(storage_type), need_bytes);
    const std::span<const uint8_t> bytes = storage_bytes(*entry).first(need_bytes);

    StridedLayout layout;
    layout.offset = as_int(offset_arg, what, "storage offset");
    layout.shape = as_ints(size_arg, what, "size");
    layout.strides = as_ints(stride_arg, what, "stride");
    return tensor_from_storage(bytes, storage_owner(*entry), dtype, layout, what, copy_budget_);
  }

  // Stored members are used in place; a deflated one (never written by
  // torch, but a re-zipped file may have it) is inflated once and cached.
  std::span<const uint8_t> storage_bytes(const ZipEntry& entry) {
    if (entry.method == ZipEntry::kStored) return zip_.stored_bytes(entry);
    auto it = inflated_.find(entry.name);
    if (it == inflated_.end()) {
      if (entry.size > copy_budget_)
        fail("{}: zip member '{}': inflating it needs {} bytes, more than the {} allowed", name_,
             printable(entry.name), entry.size, copy_budget_);
      copy_budget_ -= entry.size;
      auto buffer = std::make_shared<std::vector<uint8_t>>(zip_.read(entry, entry.size));
      it = inflated_.emplace(entry.name, std::move(buffer)).first;
    }
    return *it->second;
  }

  std::shared_ptr<void> storage_owner(const ZipEntry& entry) {
    const auto it = inflated_.find(entry.name);
    return it != inflated_.end() ? std::shared_ptr<void>(it->second) : owner_;
  }

  ZipArchive zip_;
  const std::string& name_;
  std::shared_ptr<void> owner_;
  std::string prefix_;  // "<archive name>/" (or "" for members at the root)
  uint64_t copy_budget_ = 0;
  std::unordered_map<std::string, DType> storage_dtypes_;
  std::unordered_map<std::string, std::shared_ptr<std::vector<uint8_t>>> inflated_;
};

// torch's legacy magic number 0x1950a86a20f9469cfc6c as pickled: LONG1 of 10
// little-endian bytes. It is the first value of a legacy file, right after
// PROTO (and, from protocol 4, a FRAME header).
constexpr std::array<uint8_t, 12> kLegacyMagic = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                                  0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

}  // namespace

StateDict read_torch_checkpoint(std::span<const uint8_t> bytes, const std::string& display_name,
                                std::shared_ptr<void> owner) {
  return TorchReader(bytes, display_name, std::move(owner)).run();
}

bool is_legacy_torch_file(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2 + kLegacyMagic.size() || bytes[0] != 0x80) return false;  // PROTO n
  const std::span<const uint8_t> head = bytes.first(std::min<size_t>(bytes.size(), 32));
  return std::search(head.begin(), head.end(), kLegacyMagic.begin(), kLegacyMagic.end()) !=
         head.end();
}

std::string legacy_torch_message(const std::string& display_name) {
  return fmt::format(
      "{}: legacy torch.save format (PyTorch < 1.6 or _use_new_zipfile_serialization=False) is "
      "not supported; re-save it with PyTorch >= 1.6: torch.save(torch.load(old, "
      "map_location='cpu', weights_only=False), new)",
      display_name);
}

}  // namespace lingbot::io
