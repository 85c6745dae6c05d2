// A SAX handler that builds the document itself: nlohmann's parser is iterative, and building through an explicit
// stack keeps it so, while letting us stop at a depth limit and name the place of any error.
#include "src/core/json_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "convtune/error.h"

namespace convtune {

namespace {

using json = nlohmann::json;

class DocumentBuilder {
 public:
  DocumentBuilder(int max_depth, std::vector<DuplicateKey>* duplicates)
      : max_depth_(max_depth), duplicates_(duplicates) {}

  bool null() { return put(json(nullptr)); }
  bool boolean(bool v) { return put(json(v)); }
  bool number_integer(json::number_integer_t v) { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(json(v)); }
  bool string(json::string_t& v) { return put(json(std::move(v))); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    Level& top = stack_.back();
    if (top.value->contains(k)) {
      top.key.clear();  // the path of the object itself, not of the key read before this one
      DuplicateKey duplicate{path(), k};
      if (!duplicates_) {
        message_ = fmt::format("the key \"{}\" appears twice in one object: expected each key once", duplicate.key);
        return false;
      }
      duplicates_->push_back(std::move(duplicate));
    }
    top.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token, const json::exception& e) {
    position_ = position;
    if (e.id == 406) {
      message_ = fmt::format("number {} is out of range: expected a finite number (at most about 1.8e308)", token);
    } else {
      // what() reads "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error while
      // parsing value - invalid literal; last read: 'x'": the id means nothing to a user, and the place is ours.
      std::string what = e.what();
      if (const size_t colon = what.find(": "); what.starts_with("[json.exception") && colon != std::string::npos)
        what.erase(0, colon + 2);
      message_ = what;
    }
    return false;
  }

  json& root() { return root_; }
  const std::string& message() const { return message_; }
  std::size_t position() const { return position_; }
  bool has_position() const { return position_ != std::string::npos; }

  // Where the parser is: entries[3].gflops. Long paths keep their first levels, which say which entry it is.
  std::string path() const {
    std::string out;
    for (size_t i = 0; i < stack_.size() && i < 6; ++i) {
      const Level& level = stack_[i];
      const bool innermost = i + 1 == stack_.size();
      if (level.value->is_array()) {
        // An inner container was already appended to this array; a failing scalar was not.
        const size_t index = level.value->size() - (innermost || level.value->empty() ? 0 : 1);
        out += fmt::format("[{}]", index);
      } else if (!level.key.empty()) {
        out += (out.empty() ? "" : ".") + level.key;
      }
    }
    if (stack_.size() > 6) out += "...";
    return out;
  }

 private:
  struct Level {
    json* value;
    std::string key;
  };

  json* insert(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Level& top = stack_.back();
    if (top.value->is_array()) {
      top.value->push_back(std::move(v));
      return &top.value->back();
    }
    json& slot = (*top.value)[top.key];
    slot = std::move(v);
    return &slot;
  }
  bool put(json&& v) {
    insert(std::move(v));
    return true;
  }
  bool open(json&& container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      message_ = fmt::format("nested deeper than {} levels: expected a shallow document", max_depth_);
      return false;
    }
    json* slot = insert(std::move(container));
    stack_.push_back({slot, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  int max_depth_;
  std::vector<DuplicateKey>* duplicates_;
  json root_;
  std::vector<Level> stack_;
  std::string message_;
  std::size_t position_ = std::string::npos;
};

}  // namespace

json parse_json(std::string_view text, int max_depth, std::vector<DuplicateKey>* duplicates) {
  DocumentBuilder builder(max_depth, duplicates);
  if (json::sax_parse(text.begin(), text.end(), &builder)) return std::move(builder.root());
  std::string place;
  if (builder.has_position()) {
    // The parser reports a byte offset; lines and columns are what an editor shows.
    const size_t at = std::min(builder.position(), text.size());
    const std::string_view before = text.substr(0, at);
    const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
    const size_t line_start = before.rfind('\n');
    const size_t column = at - (line_start == std::string_view::npos ? 0 : line_start + 1);
    place = fmt::format("line {}, column {}", line, column);
  }
  const std::string path = builder.path();
  if (!path.empty()) place += fmt::format("{}(at {})", place.empty() ? "" : " ", path);
  throw InvalidArgument(place.empty() ? builder.message() : fmt::format("{}: {}", place, builder.message()));
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace convtune
