// Generated source text, one line at a time: every line is indented by the
// writer's depth (two spaces a level) and Block opens a brace scope that
// closes itself, so the printers never pass indent strings by hand.
//   CodeWriter w;
//   w.Line("float t0 = ", x, ";");
//   { auto loop = w.Block("for (int j = 0; j < n; ++j)"); w.Line("t0 += a[j];"); }
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fusebox::backend {

class CodeWriter {
 public:
  // `depth`: the levels to start at, for text that goes inside scopes
  // another writer opened (spliced in with Raw).
  explicit CodeWriter(int depth = 0) : depth_(depth) {}

  // A line of the pieces (absl::StrCat's arguments), indented; an empty
  // line is printed without indentation.
  template <typename... Pieces>
  void Line(const Pieces&... pieces) {
    Put(depth_, absl::StrCat(pieces...));
  }
  // A line at column 0 whatever the depth: a preprocessor directive.
  template <typename... Pieces>
  void Directive(const Pieces&... pieces) {
    Put(0, absl::StrCat(pieces...));
  }
  // Text as it is: preludes, or lines another writer or printer produced,
  // already indented.
  void Raw(std::string_view text) { text_.append(text); }

  // What Block and Indented return: the scope's lines are one level (or
  // `levels`) deeper until it ends, where a block prints its `}`.
  class [[nodiscard]] Scope {
   public:
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope(Scope&& other) noexcept : w_(other.w_), levels_(other.levels_), braces_(other.braces_) { other.w_ = nullptr; }
    ~Scope() { End(); }
    // `} else {`, or `} else <pieces> {` (`Else("if (x)")`): the block goes
    // on as the next branch.
    template <typename... Pieces>
    void Else(const Pieces&... pieces) {
      Branch(absl::StrCat(pieces...));
    }
    // Ends the scope before its C++ scope does.
    void End();

   private:
    friend class CodeWriter;
    Scope(CodeWriter* w, int levels, bool braces) : w_(w), levels_(levels), braces_(braces) { w_->depth_ += levels_; }
    void Branch(const std::string& rest);
    CodeWriter* w_;
    int levels_;
    bool braces_;
  };

  // `<header> {` (`{` without one), the scope's lines, then `}`.
  template <typename... Pieces>
  Scope Block(const Pieces&... header) {
    const std::string h = absl::StrCat(header...);
    Line(h.empty() ? "{" : absl::StrCat(h, " {"));
    return Scope(this, 1, true);
  }
  // Lines `levels` deeper without braces: inside scopes a printer's text
  // opened (Raw), or the body of a line such as `if (c)` that needs none; a
  // negative `levels` prints them shallower (a body kept at its loop's depth).
  Scope Indented(int levels = 1) { return Scope(this, levels, false); }

  // Open and Close: a brace scope across functions (one printer hook opens
  // it, another closes it). Close(2) closes two scopes on one line (`}}`).
  template <typename... Pieces>
  void Open(const Pieces&... header) {
    const std::string h = absl::StrCat(header...);
    Line(h.empty() ? "{" : absl::StrCat(h, " {"));
    ++depth_;
  }
  void Close(int scopes = 1);

  int depth() const { return depth_; }
  const std::string& text() const { return text_; }
  std::string Release() && { return std::move(text_); }

 private:
  void Put(int depth, std::string_view line);

  std::string text_;
  int depth_;
};

}  // namespace fusebox::backend
