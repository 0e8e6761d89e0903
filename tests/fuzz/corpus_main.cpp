// Without libFuzzer (the ordinary build), a fuzz target is a regression test: every file of the
// corpus folders given on the command line goes through LLVMFuzzerTestOneInput once. The corpora
// hold the seeds and every input a fuzz run ever found a defect with, so CI replays them all.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(argv[i]))
      if (e.is_regular_file())
        files.push_back(e.path());
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
  }
  std::printf("%zu inputs ran cleanly\n", inputs);
  // A corpus that went missing must not pass as clean.
  return inputs > 0 ? 0 : 1;
}
