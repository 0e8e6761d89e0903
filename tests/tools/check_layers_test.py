"""tools/check-layers on small trees: each kind of violation fires, a clean tree passes."""
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
    "check_layers", os.path.join(ROOT, "tools", "check-layers")).load_module()


def tree(files):
    """A temporary tree holding files ({path: [included paths]}); returns its folder."""
    folder = tempfile.mkdtemp(prefix="check-layers-test.")
    atexit.register(shutil.rmtree, folder, True)
    for path, included in files.items():
        full = os.path.join(folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write("#pragma once\n" + "".join(f'#include "{i}"\n' for i in included))
    return folder


def run(folder):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = check.main_with(folder)
    return code, out.getvalue().splitlines()


# A tree that keeps every rule: each room includes only rooms below it.
CLEAN = {
    "core/a.hpp": [],
    "model/cache/c.hpp": ["core/a.hpp"],
    "model/controller/k.hpp": ["model/cache/c.hpp"],
    "sim/trace/t.hpp": [],
    "sim/report/r.hpp": ["sim/trace/t.hpp"],
    "sim/full/f.hpp": ["sim/report/r.hpp"],
    "actors/messages.hpp": [],
    "actors/instance.cpp": ["actors/messages.hpp", "actors/device/d.hpp"],
    "actors/device/d.hpp": ["actors/messages.hpp"],
}


class CheckLayersTest(unittest.TestCase):
    def test_clean_tree_passes(self):
        code, lines = run(tree(CLEAN))
        self.assertEqual(code, 0, lines)
        self.assertIn("0 violations", lines[-1])

    def test_top_folder_including_upward_fails(self):
        code, lines = run(tree({**CLEAN, "model/cache/c.hpp": ["sim/trace/t.hpp"]}))
        self.assertEqual(code, 1)
        self.assertIn("model/cache/c.hpp:2: model -> sim (sim/trace/t.hpp)", lines)

    def test_room_including_upward_fails(self):
        # the loop on main before the report types moved: sim/report included sim/full
        code, lines = run(tree({**CLEAN, "sim/report/r.hpp": ["sim/full/f.hpp"]}))
        self.assertEqual(code, 1)
        self.assertIn("sim/report/r.hpp:2: sim/report -> sim/full (sim/full/f.hpp): up", lines)

    def test_peer_include_fails_unless_declared(self):
        files = {**CLEAN, "observe/events/e.hpp": ["observe/metrics/m.hpp"],
                 "observe/metrics/m.hpp": []}
        code, lines = run(tree(files))
        self.assertEqual(code, 1)
        self.assertIn("observe/events/e.hpp:2: observe/events -> observe/metrics "
                      "(observe/metrics/m.hpp): peer", lines)
        check.PEER_INCLUDES.add(("observe", "events", "metrics"))
        try:
            code, lines = run(tree(files))
        finally:
            check.PEER_INCLUDES.discard(("observe", "events", "metrics"))
        self.assertEqual(code, 0, lines)

    def test_loop_between_top_level_files_fails(self):
        # off_actor_lookups.hpp <-> server_actor.* on main: both in actors' room "." here
        files = {**CLEAN, "actors/lookups.hpp": ["actors/server.hpp"],
                 "actors/server.hpp": [], "actors/server.cpp": ["actors/lookups.hpp"]}
        code, lines = run(tree(files))
        self.assertEqual(code, 1)
        self.assertIn("actors/lookups.hpp:2: actors/lookups.* -> actors/server.* "
                      "(actors/server.hpp): closes a loop", lines)
        self.assertIn("actors/server.cpp:2: actors/server.* -> actors/lookups.* "
                      "(actors/lookups.hpp): closes a loop", lines)

    def test_room_not_in_the_table_fails_and_its_loops_are_named(self):
        files = {**CLEAN, "sim/widgets/w.hpp": ["sim/full/f.hpp"],
                 "sim/full/f.hpp": ["sim/widgets/w.hpp"]}
        code, lines = run(tree(files))
        self.assertEqual(code, 1)
        self.assertIn("sim/widgets: not placed in tools/check-layers' rooms of sim/", lines)
        self.assertIn("sim/full/f.hpp:2: sim/full -> sim/widgets (sim/widgets/w.hpp): "
                      "closes a loop", lines)

    def test_folder_with_sub_folders_needs_a_table(self):
        code, lines = run(tree({**CLEAN, "storage/parts/p.hpp": []}))
        self.assertEqual(code, 1)
        self.assertIn("storage/: has sub-folders (parts) but no table of rooms in "
                      "tools/check-layers", lines)

    def test_third_party_and_same_room_includes_pass(self):
        files = {**CLEAN, "sim/full/g.hpp": ["sim/full/f.hpp", "caf/all.hpp", "CLI/CLI.hpp"]}
        code, lines = run(tree(files))
        self.assertEqual(code, 0, lines)


if __name__ == "__main__":
    unittest.main()
