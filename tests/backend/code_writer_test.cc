// The printers' code writer (backend/code_writer.h): lines indented by the
// depth of the scopes around them, blocks that print their braces and
// branches, directives at column 0, and text spliced in as it is.
#include "backend/code_writer.h"

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tensor/error.h"

namespace fusebox::backend {
namespace {

TEST(CodeWriterTest, BlocksIndentTheirLinesAndCloseThemselves) {
  CodeWriter w;
  w.Line("int x = ", 3, ";");
  {
    auto loop = w.Block("for (int j = 0; j < ", 8, "; ++j)");
    w.Line("x += j;");
    {
      auto inner = w.Block();
      w.Line("x *= ", 2LL, ";");
    }
  }
  w.Line("return x;");
  EXPECT_EQ(w.text(),
            "int x = 3;\n"
            "for (int j = 0; j < 8; ++j) {\n"
            "  x += j;\n"
            "  {\n"
            "    x *= 2;\n"
            "  }\n"
            "}\n"
            "return x;\n");
  EXPECT_EQ(w.depth(), 0);
}

TEST(CodeWriterTest, ElseContinuesTheBlockAsTheNextBranch) {
  CodeWriter w(1);
  {
    auto branch = w.Block("if (a)");
    w.Line("f();");
    branch.Else("if (b)");
    w.Line("g();");
    branch.Else();
    w.Line("h();");
  }
  EXPECT_EQ(w.text(),
            "  if (a) {\n"
            "    f();\n"
            "  } else if (b) {\n"
            "    g();\n"
            "  } else {\n"
            "    h();\n"
            "  }\n");
}

TEST(CodeWriterTest, DirectivesAndEmptyLinesCarryNoIndentation) {
  CodeWriter w;
  auto body = w.Block("void f()");
  w.Directive("#pragma unroll");
  w.Line("#pragma unroll 4");  // an indented pragma stays where the printer put it
  w.Line();
  w.Line("", "");
  body.End();
  body.End();  // a second End prints nothing
  EXPECT_EQ(w.text(), "void f() {\n#pragma unroll\n  #pragma unroll 4\n\n\n}\n");
}

TEST(CodeWriterTest, IndentedAndRawSpliceOtherPrintersText) {
  CodeWriter w;
  w.Raw("// prelude\nint g;\n");
  w.Raw("void f() {\n  for (;;) {\n");  // another printer's text, two scopes open
  {
    auto in = w.Indented(2);
    w.Line("g = ", absl::StrFormat("%.2f", 0.5), ";");
    w.Line("break;");
  }
  w.Raw("  }\n}\n");
  EXPECT_EQ(w.text(), "// prelude\nint g;\nvoid f() {\n  for (;;) {\n    g = 0.50;\n    break;\n  }\n}\n");
  EXPECT_EQ(w.depth(), 0);
}

TEST(CodeWriterTest, OpenAndCloseSpanFunctions) {
  CodeWriter w(2);
  w.Open("for (int k = 0; k < 4; ++k)");
  w.Open("if (k < n)");
  EXPECT_EQ(w.depth(), 4);
  w.Line("c[k] = x[k];");
  w.Close(2);  // both scopes on one line, as the cluster printer closes its row loop
  EXPECT_EQ(w.depth(), 2);
  w.Open("if (done)");
  w.Close();
  EXPECT_EQ(std::move(w).Release(),
            "    for (int k = 0; k < 4; ++k) {\n"
            "      if (k < n) {\n"
            "        c[k] = x[k];\n"
            "    }}\n"
            "    if (done) {\n"
            "    }\n");
}

TEST(CodeWriterTest, UnbalancedScopesAreBugs) {
  CodeWriter w;
  EXPECT_THROW(w.Close(), Error) << "nothing is open";
  w.Open("void f()");
  EXPECT_THROW(w.Close(2), Error) << "one scope is open";
  auto in = w.Indented();
  EXPECT_THROW(in.Else(), Error) << "an indentation has no braces to branch";
  CodeWriter moved_from;
  auto block = moved_from.Block("if (x)");
  auto taken = std::move(block);
  EXPECT_THROW(block.Else(), Error) << "the moved-from scope no longer owns the block";
  taken.End();
  EXPECT_EQ(moved_from.text(), "if (x) {\n}\n");
}

TEST(CodeWriterTest, NegativeIndentedKeepsABodyAtItsLoopsDepth) {
  CodeWriter w;
  w.Open("for (;;)");
  w.Open("if (k < n)");
  {
    auto at_loop_depth = w.Indented(-1);  // as the cluster printer's passes
    w.Line("g = 1;");
  }
  w.Close(2);
  EXPECT_EQ(w.text(), "for (;;) {\n  if (k < n) {\n  g = 1;\n}}\n");
  EXPECT_EQ(w.depth(), 0);
}

}  // namespace
}  // namespace fusebox::backend
