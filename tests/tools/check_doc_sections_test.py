"""tools/check-doc-sections on a small tree: each way of naming a section, found and missing."""
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
    "check_doc_sections", os.path.join(ROOT, "tools", "check-doc-sections")).load_module()

DOC = """# Design

## Layout

## The timed replay (`--mode full`)

```
## not a heading: fenced
```

## 2. Write policies

- **Workers.** Cells run in worker processes.
"""


def problems(source, name="core/a.hpp"):
    folder = tempfile.mkdtemp(prefix="check-doc-sections-test.")
    atexit.register(shutil.rmtree, folder, True)
    os.makedirs(os.path.join(folder, "docs"))
    os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
    with open(os.path.join(folder, "docs", "design.md"), "w") as f:
        f.write(DOC)
    with open(os.path.join(folder, name), "w") as f:
        f.write(source)
    with contextlib.redirect_stderr(io.StringIO()):
        found, _ = check.check(folder)
    return found


class DocSectionsTest(unittest.TestCase):
    def test_titles_found(self):
        source = ('// (docs/design.md, "Layout")\n// docs/design.md\'s "The timed replay"\n'
                  '// docs/design.md, "Workers"; docs/design.md §2\n'
                  'std::string s = "docs/design.md, \\"Layout\\"";\n'
                  '// see docs/design.md,\n// "Layout" for the order\n')
        self.assertEqual(problems(source), [])

    def test_missing_title_fails_naming_file_and_line(self):
        self.assertEqual(problems('\n// docs/design.md, "Storage pool semantics"\n'),
                         ['core/a.hpp:2: docs/design.md, "Storage pool semantics": '
                          'no such section'])

    def test_a_prefix_must_end_at_a_word_boundary(self):
        self.assertEqual(len(problems('// docs/design.md, "Lay"\n')), 1)

    def test_fenced_lines_are_not_headings(self):
        self.assertEqual(len(problems('// docs/design.md, "not a heading: fenced"\n')), 1)

    def test_missing_number_and_file(self):
        found = problems("// docs/design.md §3, docs/nowhere.md, \"Layout\"\n")
        self.assertEqual(len(found), 2, found)

    def test_anchors_relative_to_the_linking_file(self):
        ok = "[a](design.md#layout) [b](design.md#the-timed-replay---mode-full)\n"
        self.assertEqual(problems(ok, "docs/other.md"), [])
        self.assertEqual(len(problems("[a](design.md#lay-out)\n", "docs/other.md")), 1)


if __name__ == "__main__":
    unittest.main()
