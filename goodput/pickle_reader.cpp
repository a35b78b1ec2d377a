#include "goodput/pickle_reader.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

// Bounds on what a file can ask for: the dumps are a few MB with a few levels of nesting.
constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxStack = 1 << 20;
constexpr size_t kMaxMemo = 1 << 24;

// A value on the pickle machine's stack. Containers are shared, as Python's objects are, so that a
// memo entry and the stack see the same dict as it is filled.
struct Node {
  enum class Kind { kNone, kBool, kInt, kUint, kFloat, kStr, kList, kTuple, kDict, kMark } kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  std::vector<std::shared_ptr<Node>> items;                                      // list, tuple
  std::vector<std::pair<std::shared_ptr<Node>, std::shared_ptr<Node>>> entries;  // dict
};
using NodePtr = std::shared_ptr<Node>;

const char* refused_name(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'F': return "FLOAT";
    case 'g': return "GET";
    case 'p': return "PUT";
    default: return nullptr;
  }
}

class Machine {
 public:
  explicit Machine(std::string_view data) : data_(data) {}
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;
  // A pickle can make a list that holds itself (refused, but built): its nodes would keep each
  // other alive.
  ~Machine() {
    for (const NodePtr& n : arena_) {
      n->items.clear();
      n->entries.clear();
    }
  }

  nlohmann::json run() {
    if (data_.size() < 2 || static_cast<uint8_t>(data_[0]) != 0x80) fail(0, "not a pickle of protocol 2 or later");
    while (true) {
      size_t at = pos_;
      uint8_t op = byte();
      if (op == '.') {
        if (stack_.size() != 1 || stack_[0]->kind == Node::Kind::kMark)
          fail(at, "STOP with a stack that is not one value");
        return to_json(*stack_[0], 0, at);
      }
      step(op, at);
    }
  }

 private:
  NodePtr make(Node::Kind kind) {
    auto n = std::make_shared<Node>();
    n->kind = kind;
    arena_.push_back(n);
    return n;
  }

  [[noreturn]] void fail(size_t at, const std::string& why) const {
    throw InputError("byte " + std::to_string(at) + ": " + why);
  }

  uint8_t byte() {
    if (pos_ >= data_.size()) fail(pos_, "the pickle ends early (truncated?)");
    return static_cast<uint8_t>(data_[pos_++]);
  }

  // n bytes, little-endian, unsigned.
  uint64_t le(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(byte()) << (8 * k);
    return v;
  }

  std::string_view bytes(uint64_t n) {
    if (n > data_.size() - pos_) fail(pos_, "a string of " + std::to_string(n) + " bytes past the end (truncated?)");
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  void push(NodePtr n, size_t at) {
    if (stack_.size() >= kMaxStack) fail(at, "stack deeper than " + std::to_string(kMaxStack));
    stack_.push_back(std::move(n));
  }

  NodePtr pop(size_t at) {
    if (stack_.empty() || stack_.back()->kind == Node::Kind::kMark) fail(at, "stack underflow");
    NodePtr n = std::move(stack_.back());
    stack_.pop_back();
    return n;
  }

  NodePtr& top(size_t at) {
    if (stack_.empty() || stack_.back()->kind == Node::Kind::kMark) fail(at, "stack underflow");
    return stack_.back();
  }

  // The values above the topmost MARK, which is removed.
  std::vector<NodePtr> pop_mark(size_t at) {
    size_t k = stack_.size();
    while (k > 0 && stack_[k - 1]->kind != Node::Kind::kMark) --k;
    if (k == 0) fail(at, "no MARK");
    std::vector<NodePtr> items(std::make_move_iterator(stack_.begin() + k), std::make_move_iterator(stack_.end()));
    stack_.resize(k - 1);
    return items;
  }

  NodePtr integer(int64_t v) {
    NodePtr n = make(Node::Kind::kInt);
    n->i = v;
    return n;
  }

  // LONG1/LONG4: little-endian two's complement of n bytes; up to 64 bits (unsigned above 2^63).
  NodePtr long_int(uint64_t n, size_t at) {
    std::string_view b = bytes(n);
    if (n == 0) return integer(0);
    bool negative = static_cast<uint8_t>(b[n - 1]) & 0x80;
    size_t used = n;
    // Sign bytes beyond 8 carry no value.
    while (used > 8 && static_cast<uint8_t>(b[used - 1]) == (negative ? 0xff : 0x00)) --used;
    if (used > 9 || (used == 9 && (negative || b[8] != 0))) fail(at, "an integer wider than 64 bits");
    uint64_t v = 0;
    for (size_t k = 0; k < std::min<size_t>(used, 8); ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(b[k])) << (8 * k);
    if (negative) {
      if (used < 8) v |= ~uint64_t{0} << (8 * used);
      return integer(static_cast<int64_t>(v));
    }
    if (v > static_cast<uint64_t>(INT64_MAX)) {
      NodePtr u = make(Node::Kind::kUint);
      u->u = v;
      return u;
    }
    return integer(static_cast<int64_t>(v));
  }

  // Strict UTF-8 (RFC 3629: no surrogates, no overlong forms), as JSON text must be.
  static bool utf8(std::string_view s) {
    for (size_t k = 0; k < s.size();) {
      const auto c = static_cast<uint8_t>(s[k]);
      size_t n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : 4;
      if (n == 4 || k + n >= s.size()) return false;
      uint32_t cp = n == 0 ? c : c & (0x3f >> n);
      for (size_t j = 1; j <= n; ++j) {
        const auto d = static_cast<uint8_t>(s[k + j]);
        if ((d & 0xc0) != 0x80) return false;
        cp = cp << 6 | (d & 0x3f);
      }
      static constexpr uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
      if (cp < kLeast[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
      k += n + 1;
    }
    return true;
  }

  NodePtr str(std::string_view s, size_t at) {
    if (!utf8(s)) fail(at, "a string that is not UTF-8");
    NodePtr n = make(Node::Kind::kStr);
    n->s.assign(s);
    return n;
  }

  void memo_put(uint64_t index, size_t at) {
    if (index >= kMaxMemo) fail(at, "memo index " + std::to_string(index) + " too large");
    if (index >= memo_.size()) memo_.resize(index + 1);
    memo_[index] = top(at);
  }

  void memo_get(uint64_t index, size_t at) {
    if (index >= memo_.size() || !memo_[index]) fail(at, "memo index " + std::to_string(index) + " was never put");
    push(memo_[index], at);
  }

  void add_entries(Node& dict, std::vector<NodePtr>& kv, size_t at) {
    if (dict.kind != Node::Kind::kDict) fail(at, "SETITEMS on something that is not a dict");
    if (kv.size() % 2 != 0) fail(at, "SETITEMS with an odd number of values");
    for (size_t k = 0; k < kv.size(); k += 2) dict.entries.emplace_back(kv[k], kv[k + 1]);
  }

  void step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        uint8_t p = byte();
        if (p < 2 || p > 5) fail(at, "pickle protocol " + std::to_string(p) + " (2 to 5 are read)");
        return;
      }
      case 0x95: le(8); return;  // FRAME: only a hint for buffered readers
      case '(': push(make(Node::Kind::kMark), at); return;
      case '}': push(make(Node::Kind::kDict), at); return;
      case ']': push(make(Node::Kind::kList), at); return;
      case ')': push(make(Node::Kind::kTuple), at); return;
      case 'N': push(make(Node::Kind::kNone), at); return;
      case 0x88:
      case 0x89: {
        NodePtr n = make(Node::Kind::kBool);
        n->b = op == 0x88;
        push(n, at);
        return;
      }
      case 'J': push(integer(static_cast<int32_t>(le(4))), at); return;
      case 'K': push(integer(static_cast<int64_t>(le(1))), at); return;
      case 'M': push(integer(static_cast<int64_t>(le(2))), at); return;
      case 0x8a: push(long_int(le(1), at), at); return;
      case 0x8b: push(long_int(le(4), at), at); return;
      case 'G': {
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = bits << 8 | byte();
        NodePtr n = make(Node::Kind::kFloat);
        std::memcpy(&n->f, &bits, sizeof bits);
        push(n, at);
        return;
      }
      case 0x8c: push(str(bytes(le(1)), at), at); return;  // SHORT_BINUNICODE
      case 'X': push(str(bytes(le(4)), at), at); return;   // BINUNICODE
      case 0x8d: push(str(bytes(le(8)), at), at); return;  // BINUNICODE8
      case 'C': push(str(bytes(le(1)), at), at); return;   // SHORT_BINBYTES
      case 'B': push(str(bytes(le(4)), at), at); return;   // BINBYTES
      case 0x8e: push(str(bytes(le(8)), at), at); return;  // BINBYTES8
      case 'q': memo_put(le(1), at); return;               // BINPUT
      case 'r': memo_put(le(4), at); return;               // LONG_BINPUT
      case 0x94: memo_put(memo_.size(), at); return;       // MEMOIZE
      case 'h': memo_get(le(1), at); return;               // BINGET
      case 'j': memo_get(le(4), at); return;               // LONG_BINGET
      case '0': pop(at); return;                           // POP
      case '1': pop_mark(at); return;                      // POP_MARK
      case '2': push(top(at), at); return;                 // DUP
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        NodePtr t = make(Node::Kind::kTuple);
        t->items.resize(op - 0x84);
        for (size_t k = t->items.size(); k > 0; --k) t->items[k - 1] = pop(at);
        push(t, at);
        return;
      }
      case 't':
      case 'l': {  // TUPLE, LIST: the values above the MARK
        NodePtr n = make(op == 't' ? Node::Kind::kTuple : Node::Kind::kList);
        n->items = pop_mark(at);
        push(n, at);
        return;
      }
      case 'd': {  // DICT
        std::vector<NodePtr> kv = pop_mark(at);
        NodePtr n = make(Node::Kind::kDict);
        add_entries(*n, kv, at);
        push(n, at);
        return;
      }
      case 'a': {  // APPEND
        NodePtr v = pop(at);
        Node& list = *top(at);
        if (list.kind != Node::Kind::kList) fail(at, "APPEND to something that is not a list");
        list.items.push_back(v);
        return;
      }
      case 'e': {  // APPENDS
        std::vector<NodePtr> vs = pop_mark(at);
        Node& list = *top(at);
        if (list.kind != Node::Kind::kList) fail(at, "APPENDS to something that is not a list");
        list.items.insert(list.items.end(), vs.begin(), vs.end());
        return;
      }
      case 's': {  // SETITEM
        std::vector<NodePtr> kv(2);
        kv[1] = pop(at);
        kv[0] = pop(at);
        add_entries(*top(at), kv, at);
        return;
      }
      case 'u': {  // SETITEMS
        std::vector<NodePtr> kv = pop_mark(at);
        add_entries(*top(at), kv, at);
        return;
      }
      default: {
        const char* name = refused_name(op);
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        if (name != nullptr)
          fail(at, std::string("opcode ") + name + " (" + hex + ") is refused: only plain data is read");
        fail(at, std::string("unknown opcode ") + hex);
      }
    }
  }

  // A shared value met twice is written twice; the budget bounds what memo references can multiply.
  nlohmann::json to_json(const Node& n, size_t depth, size_t at) {
    if (depth > kMaxDepth) fail(at, "nesting deeper than " + std::to_string(kMaxDepth) + " (a cycle?)");
    if (++nodes_ > budget_) fail(at, "more values than the file's size allows (memo references multiplied)");
    switch (n.kind) {
      case Node::Kind::kNone: return nullptr;
      case Node::Kind::kBool: return n.b;
      case Node::Kind::kInt: return n.i;
      case Node::Kind::kUint: return n.u;
      case Node::Kind::kFloat: return n.f;
      case Node::Kind::kStr: return n.s;
      case Node::Kind::kList:
      case Node::Kind::kTuple: {
        nlohmann::json a = nlohmann::json::array();
        for (const NodePtr& item : n.items) a.push_back(to_json(*item, depth + 1, at));
        return a;
      }
      case Node::Kind::kDict: {
        nlohmann::json o = nlohmann::json::object();
        for (const auto& [k, v] : n.entries) {
          std::string key;
          if (k->kind == Node::Kind::kStr) {
            key = k->s;
          } else if (k->kind == Node::Kind::kInt) {
            key = std::to_string(k->i);
          } else {
            fail(at, "a dict key that is not a str or an int");
          }
          o[key] = to_json(*v, depth + 1, at);
        }
        return o;
      }
      case Node::Kind::kMark: break;
    }
    fail(at, "a MARK inside a value");
  }

  std::string_view data_;
  size_t pos_ = 0;
  std::vector<NodePtr> stack_;
  std::vector<NodePtr> memo_;
  std::vector<NodePtr> arena_;  // every node made, to break cycles at the end
  size_t nodes_ = 0;
  size_t budget_ = 16 * data_.size() + 1024;
};

}  // namespace

nlohmann::json read_pickle(std::string_view data) { return Machine(data).run(); }

}  // namespace sdc::goodput
