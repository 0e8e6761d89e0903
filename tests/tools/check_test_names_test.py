"""tools/check-test-names on a small tree: names split over literals, fixtures, and clean names."""
import atexit
import contextlib
import importlib.machinery
import io
import os
import shutil
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
check = importlib.machinery.SourceFileLoader(
    "check_test_names", os.path.join(ROOT, "tools", "check-test-names")).load_module()


def problems(source, name="tests/a_test.cpp"):
    folder = tempfile.mkdtemp(prefix="check-test-names-test.")
    atexit.register(shutil.rmtree, folder, True)
    os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        f.write(source)
    with contextlib.redirect_stderr(io.StringIO()):
        return check.check(folder)


class TestNamesTest(unittest.TestCase):
    def test_a_semicolon_is_found_with_file_and_line(self):
        found = problems('\nTEST_CASE("a: one; two", "[a]") {}\n')
        self.assertEqual(found, [("tests/a_test.cpp", 2, "a: one; two")])

    def test_a_name_split_over_literals_is_joined(self):
        source = 'TEST_CASE("a: one, then the "\n          "other; two",\n          "[a]") {}\n'
        self.assertEqual([f[2] for f in problems(source)], ["a: one, then the other; two"])

    def test_fixtures_and_scenarios(self):
        source = ('TEST_CASE_METHOD(some_fixture, "b: x; y", "[b]") {}\n'
                  'SCENARIO("c: p; q") {}\n')
        self.assertEqual(len(problems(source)), 2)

    def test_tags_and_bodies_are_not_names(self):
        source = ('TEST_CASE("a: one, two", "[a;b]") {\n  int x = 1; (void)x;\n'
                  '  CHECK(f("s; t"));\n}\n')
        self.assertEqual(problems(source), [])

    def test_only_tests_is_read(self):
        self.assertEqual(problems('TEST_CASE("a; b") {}\n', "core/a.cpp"), [])


if __name__ == "__main__":
    unittest.main()
