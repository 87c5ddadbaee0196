#include "backend/code_writer.h"

#include "tensor/error.h"

namespace fusebox::backend {

void CodeWriter::Put(int depth, std::string_view line) {
  if (!line.empty()) text_.append(2 * static_cast<size_t>(depth), ' ').append(line);
  text_.push_back('\n');
}

void CodeWriter::Close(int scopes) {
  FUSEBOX_CHECK(scopes >= 1 && depth_ >= scopes, "CodeWriter: ", scopes, " scopes closed at depth ", depth_);
  depth_ -= scopes;
  Put(depth_, std::string(static_cast<size_t>(scopes), '}'));
}

void CodeWriter::Scope::End() {
  if (w_ == nullptr) return;
  w_->depth_ -= levels_;
  if (braces_) w_->Line("}");
  w_ = nullptr;
}

void CodeWriter::Scope::Branch(const std::string& rest) {
  FUSEBOX_CHECK(w_ != nullptr && braces_, "CodeWriter: else of a scope that is not an open block");
  w_->depth_ -= levels_;
  w_->Line(rest.empty() ? std::string("} else {") : absl::StrCat("} else ", rest, " {"));
  w_->depth_ += levels_;
}

}  // namespace fusebox::backend
