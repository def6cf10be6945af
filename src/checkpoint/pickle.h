// A Python pickle reader that builds an inert tree of values.
//
// torch.save stores its object graph as a pickle (protocol 2 by default).
// Unpickling in Python runs code: every GLOBAL names a callable and REDUCE
// calls it. This reader never runs or emulates anything. A global is only a
// (module, name) pair, and a call is only a record of what would have been
// called with which arguments; interpreting those records (e.g. recognising
// torch._utils._rebuild_tensor_v2) is the caller's business. So a pickle
// that would run os.system in Python is, here, a harmless Call node.
//
// Supported: every opcode of protocols 0-5 except out-of-band buffers
// (NEXT_BUFFER/READONLY_BUFFER, which need buffers passed beside the
// pickle) and the extension registry (EXT1/2/4 load as placeholders).
//
// Resource bounds for hostile input: the reader is an iterative stack
// machine (no recursion), values live in one arena (cycles made with the
// memo cannot leak or recurse), and the number of values is capped
// (`PickleLimits`), so memory is linear in the input size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lingbot::io {

class PickleValue {
 public:
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,           // fits in int64
    BigInt,        // does not: `text` holds a description (decimal or hex bytes)
    Float,
    String,        // Python str (UTF-8 bytes as written) or a protocol-0/py2 str
    Bytes,         // Python bytes / bytearray
    Tuple,
    List,
    Set,           // set or frozenset
    Dict,
    Global,        // module.name, never resolved
    Call,          // callable(*args, **kwargs) that was never called, plus later state
    PersistentId,  // the pickler's persistent id (torch: the storage tuple)
  };

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  std::string_view kind_name() const;

  // Scalars.
  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  double as_float() const { return float_; }
  const std::string& text() const { return text_; }  // String, Bytes, BigInt

  // Tuple, List, Set: the elements. Call: the APPEND/APPENDS'd items.
  const std::vector<const PickleValue*>& items() const { return items_; }
  // Dict: the SETITEM'd pairs, in order, a key set twice appears twice.
  // Call: the same for SETITEMs applied to the constructed object.
  const std::vector<std::pair<const PickleValue*, const PickleValue*>>& entries() const {
    return entries_;
  }

  // Global.
  const std::string& module() const { return text_; }
  const std::string& name() const { return name_; }
  bool is_global(std::string_view module, std::string_view name) const {
    return kind_ == Kind::Global && text_ == module && name_ == name;
  }

  // Call: what would be called, with what, and the BUILD state set on the
  // result (nullptr if none). kwargs only for NEWOBJ_EX.
  const PickleValue* callable() const { return callable_; }
  const PickleValue* args() const { return args_; }
  const PickleValue* kwargs() const { return kwargs_; }
  const PickleValue* state() const { return state_; }
  // Call whose callable is the global module.name.
  bool is_call_to(std::string_view module, std::string_view name) const {
    return kind_ == Kind::Call && callable_ != nullptr && callable_->is_global(module, name);
  }

  // PersistentId.
  const PickleValue* persistent_id() const { return args_; }

  // A short, bounded Python-like rendering for error messages, e.g.
  // "os.system('touch x')" or "{'a': 1, ...}". Safe on cyclic values.
  std::string repr(size_t max_chars = 120) const;

 private:
  friend class Unpickler;
  Kind kind_ = Kind::None;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0.0;
  std::string text_;  // String/Bytes/BigInt payload, Global module
  std::string name_;  // Global name
  std::vector<const PickleValue*> items_;
  std::vector<std::pair<const PickleValue*, const PickleValue*>> entries_;
  const PickleValue* callable_ = nullptr;
  const PickleValue* args_ = nullptr;
  const PickleValue* kwargs_ = nullptr;
  const PickleValue* state_ = nullptr;
};

struct PickleLimits {
  size_t max_values = size_t{8} << 20;  // objects created (8 Mi: ~1 GiB worst case)
};

// The result of unpickling: the root value and the arena that owns every
// value reachable from it.
class PickleDocument {
 public:
  const PickleValue& root() const { return *root_; }
  size_t value_count() const { return arena_.size(); }

 private:
  friend class Unpickler;
  std::vector<std::unique_ptr<PickleValue>> arena_;
  const PickleValue* root_ = nullptr;
};

// Parses one pickle (up to its STOP opcode) from `bytes`. `display_name`
// starts every error, e.g. "model.pt: archive/data.pkl". Bytes after STOP
// are ignored, as Python does.
PickleDocument unpickle(std::span<const uint8_t> bytes, const std::string& display_name,
                        const PickleLimits& limits = {});

}  // namespace lingbot::io
