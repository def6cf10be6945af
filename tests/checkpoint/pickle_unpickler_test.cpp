// The unpickler: against pickles written by Python itself (protocols 0-5,
// described structurally in pickles/pickles.json), hand-assembled opcode
// sequences for globals and calls, and hostile streams.
#include "checkpoint/pickle.h"

#include "checkpoint_fixtures.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace lingbot;
using namespace lingbot::io;
using lingbot::test::checkpoint_fixture;
using Kind = PickleValue::Kind;

namespace {

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

PickleDocument parse(std::string_view s) { return unpickle(as_bytes(s), "t.pkl"); }

// A string literal with embedded NULs, all of it. (Careful: "\x01a" is one
// byte, 0x1a; hex escapes followed by a hex digit are split into two literals.)
template <size_t N>
std::string B(const char (&s)[N]) {
  return std::string(s, N - 1);
}

std::string error_of(std::string_view s, const PickleLimits& limits = {}) {
  try {
    unpickle(as_bytes(s), "t.pkl", limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string hex(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

// Compares a value tree with its description from pickles.json.
void expect_value(const PickleValue& v, const nlohmann::json& want, const std::string& path) {
  SCOPED_TRACE(path);
  const std::string t = want["t"];
  if (t == "ref") return;  // a back-reference to an enclosing container
  if (t == "None") {
    EXPECT_TRUE(v.is(Kind::None));
  } else if (t == "bool") {
    ASSERT_TRUE(v.is(Kind::Bool));
    EXPECT_EQ(v.as_bool(), want["v"].get<bool>());
  } else if (t == "int") {
    ASSERT_TRUE(v.is(Kind::Int)) << v.repr();
    EXPECT_EQ(v.as_int(), want["v"].get<int64_t>());
  } else if (t == "bigint") {
    EXPECT_TRUE(v.is(Kind::BigInt)) << v.repr();
  } else if (t == "float") {
    ASSERT_TRUE(v.is(Kind::Float)) << v.repr();
    uint64_t bits;
    const double d = v.as_float();
    std::memcpy(&bits, &d, 8);
    EXPECT_EQ(fmt::format("{:016x}", bits), want["bits"].get<std::string>());
  } else if (t == "str") {
    ASSERT_TRUE(v.is(Kind::String)) << v.repr();
    EXPECT_EQ(hex(v.text()), want["hex"].get<std::string>());
  } else if (t == "bytes") {
    ASSERT_TRUE(v.is(Kind::Bytes)) << v.repr();
    EXPECT_EQ(hex(v.text()), want["hex"].get<std::string>());
  } else if (t == "tuple" || t == "list") {
    ASSERT_TRUE(v.is(t == "tuple" ? Kind::Tuple : Kind::List)) << v.repr();
    ASSERT_EQ(v.items().size(), want["items"].size());
    for (size_t i = 0; i < v.items().size(); ++i)
      expect_value(*v.items()[i], want["items"][i], path + "[" + std::to_string(i) + "]");
  } else if (t == "set") {
    ASSERT_TRUE(v.is(Kind::Set)) << v.repr();
    EXPECT_EQ(v.items().size(), want["n"].get<size_t>());
  } else if (t == "dict") {
    ASSERT_TRUE(v.is(Kind::Dict)) << v.repr();
    ASSERT_EQ(v.entries().size(), want["items"].size());
    for (size_t i = 0; i < v.entries().size(); ++i) {
      expect_value(*v.entries()[i].first, want["items"][i][0], path + ".key" + std::to_string(i));
      expect_value(*v.entries()[i].second, want["items"][i][1], path + ".val" + std::to_string(i));
    }
  } else {
    FAIL() << "unknown description " << t;
  }
}

}  // namespace

TEST(Unpickler, ValuesPickledByPythonInEveryProtocol) {
  const auto described = test::read_json(checkpoint_fixture("pickles/pickles.json"));
  std::set<int> protocols;
  for (const auto& entry : described["files"]) {
    const std::string file = entry["file"];
    const auto bytes = test::read_bytes(checkpoint_fixture("pickles/" + file));
    const PickleDocument doc = unpickle(bytes, file);
    expect_value(doc.root(), entry["value"], file);
    protocols.insert(entry["protocol"].get<int>());
  }
  EXPECT_EQ(protocols, (std::set<int>{0, 1, 2, 3, 4, 5}));
}

TEST(Unpickler, SharedAndRecursiveValuesAreTheSameObject) {
  const auto bytes = test::read_bytes(checkpoint_fixture("pickles/recursive_p2.pkl"));
  const PickleDocument doc = unpickle(bytes, "r");
  const PickleValue& root = doc.root();  // l = [1]; l.append(l)
  ASSERT_TRUE(root.is(Kind::List));
  ASSERT_EQ(root.items().size(), 2u);
  EXPECT_EQ(root.items()[1], &root);
  EXPECT_LT(root.repr(1000).size(), 1010u);  // bounded despite the cycle

  const auto shared = test::read_bytes(checkpoint_fixture("pickles/shared_p4.pkl"));
  const PickleDocument doc2 = unpickle(shared, "s");  // [s, s, {'again': s}]
  EXPECT_EQ(doc2.root().items()[0], doc2.root().items()[1]);
  EXPECT_EQ(doc2.root().items()[2]->entries()[0].second, doc2.root().items()[0]);
}

TEST(Unpickler, GlobalsAndCallsAreRecordedNeverRun) {
  // os.system('touch x') in protocol 0, as the classic exploit writes it.
  const PickleDocument doc = parse("cos\nsystem\n(S'touch x'\ntR.");
  const PickleValue& call = doc.root();
  ASSERT_TRUE(call.is(Kind::Call));
  EXPECT_TRUE(call.is_call_to("os", "system"));
  ASSERT_TRUE(call.args()->is(Kind::Tuple));
  EXPECT_EQ(call.args()->items()[0]->text(), "touch x");
  EXPECT_EQ(call.repr(), "os.system('touch x')");
}

TEST(Unpickler, OrderedDictWithItemsAndBuildState) {
  // pickle.dumps(od, 2) where od = OrderedDict(a=1) with od._metadata = OrderedDict({'': {'version': 1}})
  const std::string s = B(
      "\x80\x02" "ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00" "aq\x02K\x01s}q\x03"
      "X\x09\x00\x00\x00_metadataq\x04h\x00)Rq\x05X\x00\x00\x00\x00q\x06}q\x07"
      "X\x07\x00\x00\x00versionq\x08K\x01sssb.");
  const PickleDocument doc = parse(s);
  const PickleValue& od = doc.root();
  ASSERT_TRUE(od.is_call_to("collections", "OrderedDict"));
  ASSERT_EQ(od.entries().size(), 1u);
  EXPECT_EQ(od.entries()[0].first->text(), "a");
  EXPECT_EQ(od.entries()[0].second->as_int(), 1);
  ASSERT_NE(od.state(), nullptr);
  ASSERT_TRUE(od.state()->is(Kind::Dict));
  EXPECT_EQ(od.state()->entries()[0].first->text(), "_metadata");
}

TEST(Unpickler, ObjectsPersistentIdsAndExtensions) {
  // NEWOBJ with BUILD (argparse.Namespace(lr=0.1)), protocol 2.
  const std::string ns = B(
      "\x80\x02" "cargparse\nNamespace\nq\x00)\x81q\x01}q\x02X\x02\x00\x00\x00lrq\x03"
      "G?\xb9\x99\x99\x99\x99\x99\x9asb.");
  const PickleDocument a = parse(ns);
  EXPECT_TRUE(a.root().is_call_to("argparse", "Namespace"));
  EXPECT_DOUBLE_EQ(a.root().state()->entries()[0].second->as_float(), 0.1);

  // BINPERSID of a tuple, and protocol-0 PERSID of a line.
  const PickleDocument b = parse(B("\x80\x02X\x07\x00\x00\x00storageK\x05\x86Q."));
  ASSERT_TRUE(b.root().is(Kind::PersistentId));
  EXPECT_EQ(b.root().persistent_id()->items()[0]->text(), "storage");
  const PickleDocument c = parse("Pkey 7\n.");
  EXPECT_EQ(c.root().persistent_id()->text(), "key 7");

  // INST and OBJ (protocol 0/1 class instances), EXT1, STACK_GLOBAL, NEWOBJ_EX.
  const PickleDocument d = parse("(I1\nimod\nCls\n.");
  EXPECT_TRUE(d.root().is_call_to("mod", "Cls"));
  EXPECT_EQ(d.root().args()->items()[0]->as_int(), 1);
  const PickleDocument e = parse("(cmod\nCls\nK\x02o.");
  EXPECT_TRUE(e.root().is_call_to("mod", "Cls"));
  const PickleDocument f = parse("\x80\x02\x82\x07.");
  EXPECT_TRUE(f.root().is_global("copyreg.extension", "7"));
  const PickleDocument g = parse("\x80\x04\x8c\x03mod\x8c\x03" "Cls\x93)}\x92.");
  EXPECT_TRUE(g.root().is_call_to("mod", "Cls"));
  EXPECT_TRUE(g.root().kwargs()->is(Kind::Dict));
}

TEST(Unpickler, StackOpcodes) {
  // DUP, POP, POP_MARK, MEMOIZE, FRAME.
  const PickleDocument a = parse(B("\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01\x94(K\x02\x31\x32\x86."));
  ASSERT_TRUE(a.root().is(Kind::Tuple));
  EXPECT_EQ(a.root().items()[0], a.root().items()[1]);
  const PickleDocument b = parse("K\x01K\x02\x30.");  // POP leaves 1
  EXPECT_EQ(b.root().as_int(), 1);
  const PickleDocument c = parse("K\x01(\x30.");  // POP on an empty frame drops the mark
  EXPECT_EQ(c.root().as_int(), 1);
}

TEST(Unpickler, Protocol0Text) {
  EXPECT_EQ(parse("S'a\\x41\\n\\'\\\\'\n.").root().text(), "aA\n'\\");
  EXPECT_EQ(parse("Vcaf\xe9 \\u2713\n.").root().text(), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(parse("I01\n.").root().as_bool(), true);
  EXPECT_EQ(parse("I-42\n.").root().as_int(), -42);
  EXPECT_EQ(parse("L123L\n.").root().as_int(), 123);
  EXPECT_TRUE(parse("L123456789012345678901234567890L\n.").root().is(Kind::BigInt));
  EXPECT_EQ(parse("F-2.5\n.").root().as_float(), -2.5);
}

TEST(Unpickler, HostileStreamsAreOneLineErrorsWithPosition) {
  const std::pair<std::string, std::string> cases[] = {
      {std::string(""), "t.pkl: empty pickle"},
      {std::string("\x80\x02", 2), "ends without a STOP opcode"},
      {std::string("\x80\x02}\xff.", 5), "byte 3 (opcode 0xff): unknown opcode"},
      {std::string("\x80\x06.", 3), "unsupported pickle protocol 6"},
      {std::string("s.", 2), "stack underflow"},
      {std::string("(K\x01u.", 5), "stack underflow"},  // SETITEMS with nothing below the mark
      {std::string("]K\x01u.", 5), "no MARK"},
      {std::string("}(K\x01u.", 6), "odd number of items"},
      {std::string("K\x00K\x01K\x02s.", 8), "cannot set items on a int"},
      {std::string("K\x01K\x02\x61.", 6), "cannot append to a int"},
      {std::string("K\x01}b.", 4), "BUILD (set state) on a int"},
      {std::string("h\x07.", 3), "memo entry 7 is not defined"},
      {std::string("X\xff\xff\xff\x7f", 5), "needs 2147483647 more bytes"},
      {std::string("\x8d\x00\x00\x00\x00\x00\x00\x00\x40", 9), "truncated"},
      {std::string("\x8b\xff\xff\xff\xff.", 6), "negative LONG4 length"},
      {std::string("T\xff\xff\xff\xff.", 6), "negative BINSTRING length"},
      {std::string("\x95\xff\x00\x00\x00\x00\x00\x00\x00.", 10), "frame of 255 bytes"},
      {std::string("\x80\x05\x97.", 4), "out-of-band buffers"},
      {std::string("Snot quoted\n.", 13), "must be quoted"},
      {std::string("Inope\n.", 7), "'nope' is not an integer"},
      {std::string("Fx\n.", 4), "'x' is not a float"},
      {std::string("K\x01K\x02\x93.", 6), "STACK_GLOBAL needs two strings"},
      {std::string("cos\nsys", 7), "no end of line"},
      {std::string("o.", 2), "no MARK"},
      {std::string("(o.", 3), "OBJ without a class"},
  };
  for (const auto& [input, want] : cases) {
    const std::string msg = error_of(input);
    EXPECT_TRUE(msg.starts_with("t.pkl: ")) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << "input " << hex(input) << " gave: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(Unpickler, ObjectCountIsBounded) {
  PickleLimits limits;
  limits.max_values = 100;
  std::string s = "(";
  for (int i = 0; i < 200; ++i) s += "N";
  s += "l.";
  EXPECT_NE(error_of(s, limits).find("more than 100 objects"), std::string::npos);
}

TEST(Unpickler, DeepNestingNeedsNoRecursion) {
  // 200k nested lists: parsing, rendering and destruction stay iterative or bounded.
  const int depth = 200000;
  std::string s = "\x80\x02";
  s += std::string(depth, '(');
  s += std::string(depth, 'l');
  s += '.';
  const PickleDocument doc = parse(s);
  EXPECT_EQ(doc.value_count(), static_cast<size_t>(depth));
  EXPECT_LT(doc.root().repr(200).size(), 210u);
}

TEST(Unpickler, BigIntegersAndLongs) {
  // pickle.dumps(2**64, 2) and pickle.dumps(-1, 2) via LONG1.
  EXPECT_TRUE(parse(std::string("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", 14))
                  .root()
                  .is(Kind::BigInt));
  EXPECT_EQ(parse(std::string("\x8a\x01\xff.", 4)).root().as_int(), -1);
  EXPECT_EQ(parse(std::string("\x8a\x00.", 3)).root().as_int(), 0);
  EXPECT_EQ(parse(std::string("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80.", 11)).root().as_int(),
            INT64_MIN);
}
