"""tools/check-function-length's reader on examples of each case it must get right."""
import atexit
import contextlib
import importlib.machinery
import io
import os
import shutil
import tempfile
import unittest
from unittest import mock

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
check = importlib.machinery.SourceFileLoader(
    "check_function_length", os.path.join(ROOT, "tools", "check-function-length")).load_module()


def body(lines):
    return "".join(f"  x += {i};\n" for i in range(lines))


class ReaderTest(unittest.TestCase):
    def lengths(self, text):
        return {name: last - first + 1 for name, first, last in check.functions(text)}

    def test_free_function_counts_name_line_to_closing_brace(self):
        text = "namespace a {\n\nint f(int x) {\n" + body(5) + "  return x;\n}\n}\n"
        self.assertEqual(self.lengths(text), {"f": 8})

    def test_signature_over_lines_and_qualified_name(self):
        text = "int\nfoo::bar(int x,\n         int y) const {\n" + body(3) + "}\n"
        self.assertEqual(self.lengths(text), {"foo::bar": 6})

    def test_class_members_and_operators(self):
        text = ("struct s : base {\n  int size() const { return n; }\n"
                "  bool operator()(int a) const {\n    return a;\n  }\n"
                "  bool operator==(const s& o) const { return n == o.n; }\n  int n{3};\n};\n")
        self.assertEqual(self.lengths(text), {"size": 1, "operator()": 3, "operator==": 1})

    def test_constructor_list_with_brace_initializers(self):
        text = "s::s(int a) : a_(a), b_{a, 2}, c_{} {\n" + body(2) + "}\n"
        self.assertEqual(self.lengths(text), {"s::s": 4})

    def test_lambdas_and_local_classes_count_toward_their_function(self):
        text = ("void f() {\n  auto g = [](int x) {\n    return x;\n  };\n"
                "  struct local { int h() { return 1; } };\n}\n")
        self.assertEqual(self.lengths(text), {"f": 6})

    def test_braces_in_comments_literals_and_preprocessor_lines_are_ignored(self):
        text = ('void f() {\n  // }\n  /* } */ const char* s = "}";\n  char c = \'}\';\n'
                '  auto r = R"x(})x";\n#define OPEN {\n  int n = 1\'000;\n}\nvoid g() {}\n')
        self.assertEqual(self.lengths(text), {"f": 8, "g": 1})

    def test_tables_namespaces_and_enums_are_not_functions(self):
        text = ("namespace k {\nenum class e : int { a, b };\n"
                "const std::vector<int> table = {\n  1,\n  2,\n};\n"
                "std::array<int, 2> t{1, 2};\n}\n")
        self.assertEqual(self.lengths(text), {})

    def test_macro_that_opens_a_body_is_named_by_its_string(self):
        text = 'TEST_CASE("a case", "[tag]") {\n  CHECK(1);\n}\n'
        self.assertEqual(self.lengths(text), {'TEST_CASE("a case")': 3})

    def test_macro_lines_without_semicolons_before_a_namespace(self):
        text = ("CAF_BEGIN_TYPE_ID_BLOCK(k, 1)\n  CAF_ADD_TYPE_ID(k, (int))\n"
                "CAF_END_TYPE_ID_BLOCK(k)\nnamespace k {\nvoid f() {\n}\n}\n")
        self.assertEqual(self.lengths(text), {"f": 2})


class CheckTest(unittest.TestCase):
    allow = {}

    def run_on(self, files):
        folder = tempfile.mkdtemp(prefix="check-function-length-test.")
        atexit.register(shutil.rmtree, folder, True)
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
            with open(os.path.join(folder, path), "w") as f:
                f.write(text)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), \
                mock.patch.dict(check.ALLOW, self.allow, clear=True):
            code = check.main([folder])
        return code, out.getvalue()

    def test_81_lines_fail_80_pass(self):
        code, out = self.run_on({"core/a.cpp": "int f() {\n" + body(79) + "}\n"})
        self.assertEqual(code, 1)
        self.assertIn("core/a.cpp:1: f is 81 lines (at most 80)", out)
        code, out = self.run_on({"core/a.cpp": "int f() {\n" + body(78) + "}\n"})
        self.assertEqual(code, 0, out)

    def test_allowed_table_passes_and_a_stale_allowance_fails(self):
        self.allow = {"core/t.cpp:rows": "a table"}
        code, out = self.run_on({"core/t.cpp": "int rows() {\n" + body(90) + "}\n"})
        self.assertEqual(code, 0, out)
        code, out = self.run_on({"core/t.cpp": "int other() {\n}\n"})
        self.assertEqual(code, 1)
        self.assertIn("ALLOW names core/t.cpp:rows, which no longer exists", out)


if __name__ == "__main__":
    unittest.main()
