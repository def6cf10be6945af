#include "checkpoint/pickle.h"

#include "core/error.h"
#include "checkpoint/byte_order.h"
#include "core/printable.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace lingbot::io {

namespace {

// Opcodes, named as in CPython's Lib/pickle.py (one byte each).
enum Op : uint8_t {
  // protocol 0
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I',
  LONG = 'L', NONE = 'N', PERSID = 'P', REDUCE = 'R', STRING = 'S', UNICODE = 'V',
  APPEND = 'a', BUILD = 'b', GLOBAL = 'c', DICT = 'd', GET = 'g', INST = 'i', LIST = 'l',
  OBJ = 'o', PUT = 'p', SETITEM = 's', TUPLE = 't',
  // protocol 1
  BININT = 'J', BININT1 = 'K', BININT2 = 'M', BINPERSID = 'Q', BINSTRING = 'T',
  SHORT_BINSTRING = 'U', BINUNICODE = 'X', EMPTY_DICT = '}', APPENDS = 'e', BINGET = 'h',
  LONG_BINGET = 'j', EMPTY_LIST = ']', BINPUT = 'q', LONG_BINPUT = 'r', SETITEMS = 'u',
  BINFLOAT = 'G', EMPTY_TUPLE = ')',
  // protocol 2
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85,
  TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  // protocol 3
  BINBYTES = 'B', SHORT_BINBYTES = 'C',
  // protocol 4
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f,
  ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94,
  FRAME = 0x95,
  // protocol 5
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};

constexpr int kHighestProtocol = 5;

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | ((cp >> 18) & 0x07));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// The pickle virtual machine: a value stack, a stack of MARK positions
// ("fences": nothing may be popped below the innermost one) and the memo.
class Unpickler {
 public:
  Unpickler(std::span<const uint8_t> bytes, const std::string& name, const PickleLimits& limits)
      : in_(bytes), name_(name), limits_(limits) {}

  PickleDocument run();

 private:
  using Value = PickleValue;
  using Kind = PickleValue::Kind;

  [[noreturn]] void error(const std::string& problem) const {
    if (op_pos_ >= in_.size())  // ran out before the next opcode
      fail("{}: bad pickle at byte {}: {}", name_, op_pos_, problem);
    fail("{}: bad pickle at byte {} (opcode 0x{:02x}): {}", name_, op_pos_, op_, problem);
  }

  // ---- input ----
  const uint8_t* take(uint64_t n) {
    if (!fits(pos_, n, in_.size()))
      error(fmt::format("needs {} more bytes but only {} remain (truncated)", n,
                        in_.size() - pos_));
    const uint8_t* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint8_t take_u8() { return *take(1); }
  std::string_view take_line() {  // without its '\n'
    const uint8_t* start = in_.data() + pos_;
    const void* nl = std::memchr(start, '\n', in_.size() - pos_);
    if (nl == nullptr) error("text argument has no end of line (truncated)");
    const size_t n = static_cast<const uint8_t*>(nl) - start;
    pos_ += n + 1;
    return {reinterpret_cast<const char*>(start), n};
  }
  std::string_view take_string(uint64_t n) {
    return {reinterpret_cast<const char*>(take(n)), static_cast<size_t>(n)};
  }

  // ---- values ----
  Value* make(Kind kind) {
    if (doc_.arena_.size() >= limits_.max_values)
      error(fmt::format("more than {} objects: too large or hostile", limits_.max_values));
    doc_.arena_.push_back(std::make_unique<Value>());
    Value* v = doc_.arena_.back().get();
    v->kind_ = kind;
    return v;
  }
  Value* make_int(int64_t i) {
    Value* v = make(Kind::Int);
    v->int_ = i;
    return v;
  }
  Value* make_text(Kind kind, std::string_view s) {
    Value* v = make(kind);
    v->text_.assign(s);
    return v;
  }
  Value* make_global(std::string_view module, std::string_view name) {
    Value* v = make(Kind::Global);
    v->text_.assign(module);
    v->name_.assign(name);
    return v;
  }
  Value* make_call(const Value* callable, const Value* args) {
    Value* v = make(Kind::Call);
    v->callable_ = callable;
    v->args_ = args;
    return v;
  }
  Value* make_sequence(Kind kind, std::vector<Value*>&& items) {
    Value* v = make(kind);
    v->items_.assign(items.begin(), items.end());
    return v;
  }
  // Little-endian two's complement of any length (LONG1/LONG4).
  Value* make_long(const uint8_t* p, uint64_t n) {
    if (n == 0) return make_int(0);
    if (n <= 8) {
      uint64_t u = 0;
      for (uint64_t i = 0; i < n; ++i) u |= static_cast<uint64_t>(p[i]) << (8 * i);
      if (n < 8 && (p[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
      return make_int(static_cast<int64_t>(u));
    }
    // Too big for int64: keep a readable description, bounded in size.
    std::string hex = "0x";
    for (uint64_t i = n; i-- > 0 && hex.size() < 40;) hex += fmt::format("{:02x}", p[i]);
    if (n > 19) hex += "...";
    return make_text(Kind::BigInt, fmt::format("<{}-byte int {}>", n, hex));
  }
  Value* make_decimal(std::string_view digits) {
    if (!digits.empty() && digits.back() == 'L') digits.remove_suffix(1);  // Python 2 long
    std::string_view body = digits;
    if (!body.empty() && (body.front() == '+')) body.remove_prefix(1);
    int64_t i = 0;
    const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), i);
    if (ec == std::errc() && end == body.data() + body.size() && !body.empty()) return make_int(i);
    const bool all_digits =
        !body.empty() && body.find_first_not_of("-0123456789") == std::string_view::npos;
    if (!all_digits) error(fmt::format("'{}' is not an integer", printable(digits, 40)));
    return make_text(Kind::BigInt, digits.substr(0, 60));
  }

  // ---- stack ----
  size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value* v) { stack_.push_back(v); }
  Value* pop() {
    if (stack_.size() <= fence()) error("stack underflow");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value* top() {
    if (stack_.size() <= fence()) error("stack underflow");
    return stack_.back();
  }
  // Everything pushed since the innermost MARK, which is removed.
  std::vector<Value*> pop_mark() {
    if (marks_.empty()) error("no MARK on the stack");
    const size_t base = marks_.back();
    marks_.pop_back();
    std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(base), stack_.end());
    stack_.resize(base);
    return items;
  }

  // ---- containers (a Call stands for an object of an unknown class) ----
  void append_items(Value* target, std::vector<Value*>&& items) {
    if (target->kind_ != Kind::List && target->kind_ != Kind::Call && target->kind_ != Kind::Set)
      error(fmt::format("cannot append to a {}", target->kind_name()));
    target->items_.insert(target->items_.end(), items.begin(), items.end());
  }
  void set_items(Value* target, const std::vector<Value*>& kv) {
    if (target->kind_ != Kind::Dict && target->kind_ != Kind::Call)
      error(fmt::format("cannot set items on a {}", target->kind_name()));
    if (kv.size() % 2 != 0) error("odd number of items for SETITEMS");
    for (size_t i = 0; i < kv.size(); i += 2) target->entries_.emplace_back(kv[i], kv[i + 1]);
  }

  // ---- memo ----
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) error(fmt::format("memo entry {} is not defined", index));
    push(it->second);
  }
  static uint64_t parse_index(std::string_view line, const Unpickler& self) {
    uint64_t i = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), i);
    if (ec != std::errc() || end != line.data() + line.size())
      self.error(fmt::format("'{}' is not a memo index", printable(line, 40)));
    return i;
  }

  // ---- protocol-0 text decoding ----
  std::string decode_escaped_string(std::string_view quoted);
  std::string decode_raw_unicode_escape(std::string_view s);
  double parse_float(std::string_view s) {
    double d = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec != std::errc() || end != s.data() + s.size()) {
      if (s == "nan") return NAN;
      if (s == "inf") return INFINITY;
      if (s == "-inf") return -INFINITY;
      error(fmt::format("'{}' is not a float", printable(s, 40)));
    }
    return d;
  }

  void step(uint8_t op);

  std::span<const uint8_t> in_;
  const std::string& name_;
  const PickleLimits& limits_;
  uint64_t pos_ = 0;
  uint64_t op_pos_ = 0;
  uint8_t op_ = 0;
  bool stopped_ = false;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;
  PickleDocument doc_;
};

PickleDocument Unpickler::run() {
  if (in_.empty()) fail("{}: empty pickle", name_);
  while (!stopped_) {
    op_pos_ = pos_;
    if (pos_ >= in_.size()) error("ends without a STOP opcode (truncated)");
    op_ = in_[pos_++];
    step(op_);
  }
  return std::move(doc_);
}

void Unpickler::step(uint8_t op) {
  switch (op) {
    // ---- framing and protocol ----
    case PROTO: {
      const int proto = take_u8();
      if (proto > kHighestProtocol) error(fmt::format("unsupported pickle protocol {}", proto));
      break;
    }
    case FRAME: {
      // A hint for buffered readers: the next n bytes form one frame. We
      // read everything in place, so only check it is plausible.
      const uint64_t n = load_le64(take(8));
      if (n > in_.size() - pos_) error(fmt::format("frame of {} bytes overruns the pickle", n));
      break;
    }
    case STOP:
      doc_.root_ = pop();
      stopped_ = true;
      break;

    // ---- stack manipulation ----
    case MARK: marks_.push_back(stack_.size()); break;
    case POP:
      if (stack_.size() > fence()) {
        stack_.pop_back();
      } else {
        pop_mark();  // CPython: POP on an empty frame discards the mark
      }
      break;
    case POP_MARK: pop_mark(); break;
    case DUP: push(top()); break;

    // ---- memo ----
    case PUT: memo_put(parse_index(take_line(), *this)); break;
    case BINPUT: memo_put(take_u8()); break;
    case LONG_BINPUT: memo_put(load_le32(take(4))); break;
    case MEMOIZE: memo_put(memo_.size()); break;
    case GET: memo_get(parse_index(take_line(), *this)); break;
    case BINGET: memo_get(take_u8()); break;
    case LONG_BINGET: memo_get(load_le32(take(4))); break;

    // ---- scalars ----
    case NONE: push(make(Kind::None)); break;
    case NEWTRUE:
    case NEWFALSE: {
      Value* v = make(Kind::Bool);
      v->bool_ = op == NEWTRUE;
      push(v);
      break;
    }
    case INT: {
      const std::string_view line = take_line();
      if (line == "00" || line == "01") {  // protocol 0 spells booleans this way
        Value* v = make(Kind::Bool);
        v->bool_ = line == "01";
        push(v);
      } else {
        push(make_decimal(line));
      }
      break;
    }
    case LONG: push(make_decimal(take_line())); break;
    case BININT: push(make_int(static_cast<int32_t>(load_le32(take(4))))); break;
    case BININT1: push(make_int(take_u8())); break;
    case BININT2: push(make_int(load_le16(take(2)))); break;
    case LONG1: {
      const uint64_t n = take_u8();
      push(make_long(take(n), n));
      break;
    }
    case LONG4: {
      const int32_t n = static_cast<int32_t>(load_le32(take(4)));
      if (n < 0) error("negative LONG4 length");
      push(make_long(take(static_cast<uint64_t>(n)), static_cast<uint64_t>(n)));
      break;
    }
    case FLOAT: {
      Value* v = make(Kind::Float);
      v->float_ = parse_float(take_line());
      push(v);
      break;
    }
    case BINFLOAT: {
      const uint8_t* p = take(8);
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];  // big-endian
      Value* v = make(Kind::Float);
      std::memcpy(&v->float_, &bits, 8);
      push(v);
      break;
    }

    // ---- strings and bytes ----
    case STRING: push(make_text(Kind::String, decode_escaped_string(take_line()))); break;
    case BINSTRING: {
      const int32_t n = static_cast<int32_t>(load_le32(take(4)));
      if (n < 0) error("negative BINSTRING length");
      push(make_text(Kind::String, take_string(static_cast<uint64_t>(n))));
      break;
    }
    case SHORT_BINSTRING: push(make_text(Kind::String, take_string(take_u8()))); break;
    case UNICODE: push(make_text(Kind::String, decode_raw_unicode_escape(take_line()))); break;
    case SHORT_BINUNICODE: push(make_text(Kind::String, take_string(take_u8()))); break;
    case BINUNICODE: push(make_text(Kind::String, take_string(load_le32(take(4))))); break;
    case BINUNICODE8: push(make_text(Kind::String, take_string(load_le64(take(8))))); break;
    case SHORT_BINBYTES: push(make_text(Kind::Bytes, take_string(take_u8()))); break;
    case BINBYTES: push(make_text(Kind::Bytes, take_string(load_le32(take(4))))); break;
    case BINBYTES8:
    case BYTEARRAY8: push(make_text(Kind::Bytes, take_string(load_le64(take(8))))); break;
    case NEXT_BUFFER:
    case READONLY_BUFFER: error("out-of-band buffers (pickle protocol 5) are not supported");

    // ---- tuples, lists, sets, dicts ----
    case EMPTY_TUPLE: push(make(Kind::Tuple)); break;
    case TUPLE1:
    case TUPLE2:
    case TUPLE3: {
      const size_t n = op - TUPLE1 + 1;
      std::vector<Value*> items(n);
      for (size_t i = n; i-- > 0;) items[i] = pop();
      push(make_sequence(Kind::Tuple, std::move(items)));
      break;
    }
    case TUPLE: push(make_sequence(Kind::Tuple, pop_mark())); break;
    case EMPTY_LIST: push(make(Kind::List)); break;
    case LIST: push(make_sequence(Kind::List, pop_mark())); break;
    case APPEND: {
      Value* v = pop();
      append_items(top(), {v});
      break;
    }
    case APPENDS: {
      std::vector<Value*> items = pop_mark();
      append_items(top(), std::move(items));
      break;
    }
    case EMPTY_SET: push(make(Kind::Set)); break;
    case FROZENSET: push(make_sequence(Kind::Set, pop_mark())); break;
    case ADDITEMS: {
      std::vector<Value*> items = pop_mark();
      Value* target = top();
      if (target->kind_ != Kind::Set && target->kind_ != Kind::Call)
        error(fmt::format("cannot add items to a {}", target->kind_name()));
      append_items(target, std::move(items));
      break;
    }
    case EMPTY_DICT: push(make(Kind::Dict)); break;
    case DICT: {
      const std::vector<Value*> kv = pop_mark();
      Value* d = make(Kind::Dict);
      set_items(d, kv);
      push(d);
      break;
    }
    case SETITEM: {
      Value* value = pop();
      Value* key = pop();
      set_items(top(), {key, value});
      break;
    }
    case SETITEMS: {
      const std::vector<Value*> kv = pop_mark();
      set_items(top(), kv);
      break;
    }

    // ---- globals and calls: recorded, never executed ----
    case GLOBAL: {
      const std::string_view module = take_line();
      const std::string_view name = take_line();
      push(make_global(module, name));
      break;
    }
    case STACK_GLOBAL: {
      Value* name = pop();
      Value* module = pop();
      if (module->kind_ != Kind::String || name->kind_ != Kind::String)
        error("STACK_GLOBAL needs two strings");
      push(make_global(module->text_, name->text_));
      break;
    }
    case EXT1:
    case EXT2:
    case EXT4: {
      // The copyreg extension registry maps codes to globals at run time;
      // without Python there is no registry, so keep the code as a name.
      const uint64_t code = op == EXT1 ? take_u8() : op == EXT2 ? load_le16(take(2))
                                                                : load_le32(take(4));
      push(make_global("copyreg.extension", std::to_string(code)));
      break;
    }
    case REDUCE: {
      Value* args = pop();
      Value* callable = pop();
      push(make_call(callable, args));
      break;
    }
    case NEWOBJ: {
      Value* args = pop();
      Value* cls = pop();
      push(make_call(cls, args));
      break;
    }
    case NEWOBJ_EX: {
      Value* kwargs = pop();
      Value* args = pop();
      Value* cls = pop();
      Value* call = make_call(cls, args);
      call->kwargs_ = kwargs;
      push(call);
      break;
    }
    case OBJ: {  // MARK cls arg1 ... argN OBJ
      std::vector<Value*> items = pop_mark();
      if (items.empty()) error("OBJ without a class");
      Value* cls = items.front();
      items.erase(items.begin());
      push(make_call(cls, make_sequence(Kind::Tuple, std::move(items))));
      break;
    }
    case INST: {  // MARK arg1 ... argN INST module\n name\n
      const std::string_view module = take_line();
      const std::string_view name = take_line();
      std::vector<Value*> items = pop_mark();
      Value* cls = make_global(module, name);
      push(make_call(cls, make_sequence(Kind::Tuple, std::move(items))));
      break;
    }
    case BUILD: {
      Value* state = pop();
      Value* target = top();
      if (target->kind_ != Kind::Call)
        error(fmt::format("BUILD (set state) on a {}", target->kind_name()));
      target->state_ = state;
      break;
    }
    case PERSID: {
      Value* pid = make(Kind::PersistentId);
      pid->args_ = make_text(Kind::String, take_line());
      push(pid);
      break;
    }
    case BINPERSID: {
      Value* id = pop();
      Value* pid = make(Kind::PersistentId);
      pid->args_ = id;
      push(pid);
      break;
    }
    default: error("unknown opcode");
  }
}

// Python 2 / protocol-0 STRING: a quoted literal with backslash escapes
// (what codecs.escape_decode accepts).
std::string Unpickler::decode_escaped_string(std::string_view q) {
  if (q.size() < 2 || q.front() != q.back() || (q.front() != '\'' && q.front() != '"'))
    error("STRING argument must be quoted");
  const std::string_view s = q.substr(1, q.size() - 2);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i >= s.size()) error("STRING ends with a lone backslash");
    const char c = s[i];
    switch (c) {
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case '\n': break;  // line continuation
      case 'x': {
        const int hi = i + 1 < s.size() ? hex_digit(s[i + 1]) : -1;
        const int lo = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) error("invalid \\x escape in STRING");
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {  // up to three octal digits
          int v = c - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            v = v * 8 + (s[++i] - '0');
          out += static_cast<char>(v & 0xff);
        } else {
          out += '\\';  // unknown escapes are kept verbatim, as Python does
          out += c;
        }
    }
  }
  return out;
}

// Protocol-0 UNICODE: "raw-unicode-escape": bytes are Latin-1 code points,
// except \uXXXX and \UXXXXXXXX. Returned as UTF-8.
std::string Unpickler::decode_raw_unicode_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
      const size_t digits = s[i + 1] == 'u' ? 4 : 8;
      if (i + 2 + digits > s.size()) error("truncated \\u escape in UNICODE");
      uint32_t cp = 0;
      for (size_t k = 0; k < digits; ++k) {
        const int d = hex_digit(s[i + 2 + k]);
        if (d < 0) error("invalid \\u escape in UNICODE");
        cp = cp * 16 + static_cast<uint32_t>(d);
      }
      if (cp > 0x10ffff) error("\\U escape beyond U+10FFFF in UNICODE");
      append_utf8(out, cp);
      i += 1 + digits;
    } else {
      append_utf8(out, c);
    }
  }
  return out;
}

PickleDocument unpickle(std::span<const uint8_t> bytes, const std::string& display_name,
                        const PickleLimits& limits) {
  return Unpickler(bytes, display_name, limits).run();
}

// ---------------------------------------------------------------------------
// PickleValue

std::string_view PickleValue::kind_name() const {
  switch (kind_) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int:
    case Kind::BigInt: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::Tuple: return "tuple";
    case Kind::List: return "list";
    case Kind::Set: return "set";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Call: return "object";
    case Kind::PersistentId: return "persistent id";
  }
  return "?";
}

namespace {

// Bounded, depth-limited rendering: values may be shared or cyclic.
void render(const PickleValue* v, std::string& out, size_t budget, int depth) {
  using Kind = PickleValue::Kind;
  if (out.size() >= budget) return;
  if (v == nullptr) {
    out += "?";
    return;
  }
  if (depth > 4) {
    out += "...";
    return;
  }
  auto quoted = [&](const std::string& s, const char* prefix) {
    out += prefix;
    out += '\'';
    for (const char c : s) {
      if (out.size() >= budget) break;
      const auto u = static_cast<unsigned char>(c);
      if (c == '\'' || c == '\\') {
        out += '\\';
        out += c;
      } else if (u < 0x20 || u == 0x7f) {
        out += fmt::format("\\x{:02x}", u);
      } else {
        out += c;
      }
    }
    out += '\'';
  };
  auto seq = [&](const std::vector<const PickleValue*>& items, const char* open, const char* close) {
    out += open;
    for (size_t i = 0; i < items.size(); ++i) {
      if (out.size() >= budget) {
        out += "...";
        break;
      }
      if (i) out += ", ";
      render(items[i], out, budget, depth + 1);
    }
    out += close;
  };
  switch (v->kind()) {
    case Kind::None: out += "None"; break;
    case Kind::Bool: out += v->as_bool() ? "True" : "False"; break;
    case Kind::Int: out += std::to_string(v->as_int()); break;
    case Kind::BigInt: out += v->text(); break;
    case Kind::Float: out += fmt::format("{}", v->as_float()); break;
    case Kind::String: quoted(v->text(), ""); break;
    case Kind::Bytes: quoted(v->text(), "b"); break;
    case Kind::Tuple: seq(v->items(), "(", v->items().size() == 1 ? ",)" : ")"); break;
    case Kind::List: seq(v->items(), "[", "]"); break;
    case Kind::Set: seq(v->items(), "{", "}"); break;
    case Kind::Dict:
      out += '{';
      for (size_t i = 0; i < v->entries().size(); ++i) {
        if (out.size() >= budget) {
          out += "...";
          break;
        }
        if (i) out += ", ";
        render(v->entries()[i].first, out, budget, depth + 1);
        out += ": ";
        render(v->entries()[i].second, out, budget, depth + 1);
      }
      out += '}';
      break;
    case Kind::Global: out += printable(v->module(), 60) + "." + printable(v->name(), 60); break;
    case Kind::Call:
      render(v->callable(), out, budget, depth + 1);
      if (v->args() != nullptr && v->args()->kind() == Kind::Tuple) {
        seq(v->args()->items(), "(", ")");
      } else {
        out += "(*";
        render(v->args(), out, budget, depth + 1);
        out += ")";
      }
      break;
    case Kind::PersistentId:
      out += "persistent_id(";
      render(v->persistent_id(), out, budget, depth + 1);
      out += ")";
      break;
  }
}

}  // namespace

std::string PickleValue::repr(size_t max_chars) const {
  std::string out;
  render(this, out, max_chars, 0);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

}  // namespace lingbot::io
